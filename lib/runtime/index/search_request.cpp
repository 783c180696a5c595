// A search's request: its kernels, chunk size and bound captures.
#include <algorithm>
#include <cstring>

#include "cuda/launch.h"
#include "index/schedule_plan.h"
#include "index/search_request.h"

namespace udf::rt {

namespace {

// Binds `decl` (a metric's or filter's captures, ABI order) from `bindings`
// by name into `out`: every declared one bound once, none unknown, types
// checked.  Arrays: length `array_len` (a metric's: dim), or any length >= 1
// when 0 (a filter's); host arrays are copied into `bufs`, unless `copies`
// says the buffer holds those bytes already (the same weights every search:
// one copy-engine operation fewer before the scan).  A metric's device
// arrays start on UDF_IVF_SCAN_V1_CAPTURE_ALIGN bytes, or are copied into
// `bufs` (the capture alignment, ivf_flat_v1.h).
void bind_captures(udf_index* ix, CUstream stream, const std::vector<Capture>& decl, const udf_capture_binding* bindings,
                   size_t n, const char* owner_kind, const std::string& owner_symbol, uint32_t array_len, DevBuf* bufs,
                   udf_index::Scratch::CaptureCopy* copies, udf_capture_v1* out) {
  udf_runtime* rt = ix->mod->rt;
  // The messages are built only on failure (this runs on every search).
  auto owner = [&] { return std::string(owner_kind) + " " + owner_symbol; };
  for (size_t i = 0; i < n; ++i) {
    require(bindings != nullptr, [&] { return "captures of " + owner() + " are NULL with a count > 0"; });
    const char* name = bindings[i].name;
    if (!name) fail(UDF_ERROR_CAPTURE, "capture binding " + std::to_string(i) + " of " + owner() + " has no name");
    const bool known = std::any_of(decl.begin(), decl.end(), [&](const Capture& c) { return c.name == name; });
    if (!known) {
      std::string d;
      for (const auto& c : decl) d += (d.empty() ? "" : ", ") + to_string(c);
      fail(UDF_ERROR_CAPTURE, std::string("capture '") + name + "' is not declared by " + owner() +
                                  " (declared: " + (d.empty() ? "none" : d) + ")");
    }
    for (size_t j = 0; j < i; ++j)
      if (bindings[j].name && std::strcmp(bindings[j].name, name) == 0)
        fail(UDF_ERROR_CAPTURE, std::string("capture '") + name + "' of " + owner() + " is bound twice");
  }
  for (size_t ci = 0; ci < decl.size(); ++ci) {
    const Capture& c = decl[ci];
    const udf_capture_binding* b = nullptr;
    for (size_t i = 0; i < n; ++i)
      if (std::strcmp(bindings[i].name, c.name.c_str()) == 0) b = &bindings[i];
    auto what = [&] { return "capture '" + to_string(c) + "' of " + owner(); };
    if (!b) fail(UDF_ERROR_CAPTURE, what() + " is not bound");
    udf_dtype want = c.type == CaptureType::F32 ? UDF_DTYPE_F32
                     : c.type == CaptureType::F16 ? UDF_DTYPE_F16
                     : c.type == CaptureType::I32 ? UDF_DTYPE_I32
                                                   : UDF_DTYPE_U8;
    if (c.array) {
      const udf_tensor* t = b->tensor;
      if (!t || !t->data) fail(UDF_ERROR_CAPTURE, what() + ": an array capture needs a tensor");
      if (t->dtype != want)
        fail(UDF_ERROR_CAPTURE, what() + ": bound to a " + dtype_name(t->dtype) + " tensor, expected " + dtype_name(want));
      const bool vec = (t->rows == 1 || t->cols == 1) && t->rows >= 1 && t->cols >= 1;
      if (!vec || (array_len != 0 && t->rows * t->cols != static_cast<int64_t>(array_len)))
        fail(UDF_ERROR_CAPTURE, what() + ": length " + std::to_string(t->rows) + " x " + std::to_string(t->cols) +
                                    (array_len ? ", expected dim = " + std::to_string(array_len) : std::string(", expected a 1-D array")));
      if (t->rows > 1 && t->row_stride != 0 && t->row_stride != 1)
        fail(UDF_ERROR_CAPTURE, what() + ": must be contiguous");
      const int64_t len = t->rows * t->cols;
      const size_t bytes = size_t(len) * udf_dtype_size(want);
      // The capture's own buffer, for a host array or a misaligned device one.
      auto own_buffer = [&]() -> DevBuf& {
        if (bufs[ci].bytes() < bytes) ix->quiesce();  // the previous search may still read it
        bufs[ci].ensure(bytes, "a capture");
        return bufs[ci];
      };
      if (t->device == UDF_HOST_DEVICE) {
        own_buffer();
        // Nothing but these uploads and the copies below writes the buffer,
        // and each runs after the previous search (the wait on `done`
        // above): bytes equal to the last upload into this buffer (copy.at
        // set) are there when this search runs.
        auto& copy = copies[ci];
        const auto* src = static_cast<const std::uint8_t*>(t->data);
        if (copy.at != bufs[ci].get() || copy.bytes.size() != bytes || std::memcmp(copy.bytes.data(), src, bytes) != 0) {
          copy.at = 0;  // until the upload is queued
          upload(stream, bufs[ci], t->data, bytes, "a capture");
          copy.bytes.assign(src, src + bytes);
          copy.at = bufs[ci].get();
        }
        out[ci].ptr = bufs[ci].as<const void>();
      } else {
        udf_tensor flat = *t;
        flat.rows = 1;
        flat.cols = len;
        flat.row_stride = 0;
        try {
          check_tensor(rt, &flat, "capture", want, len);
        } catch (const RuntimeFailure& f) {
          fail(UDF_ERROR_CAPTURE, what() + ": " + f.what());
        }
        out[ci].ptr = t->data;
        // The capture alignment (ivf_flat_v1.h): a metric's scans assume its
        // arrays start on 16 bytes; one that does not (a slice of another
        // array) is copied on the stream into the capture's own buffer.
        if (array_len != 0 && reinterpret_cast<std::uintptr_t>(t->data) % UDF_IVF_SCAN_V1_CAPTURE_ALIGN != 0) {
          DevBuf& buf = own_buffer();
          copies[ci].at = 0;  // it holds no host upload any more
          copies[ci].bytes.clear();
          CU(cuMemcpyDtoDAsync, buf.get(), reinterpret_cast<CUdeviceptr>(t->data), bytes, stream);
          out[ci].ptr = buf.as<const void>();
        }
      }
    } else {
      if (want != UDF_DTYPE_F32 && want != UDF_DTYPE_I32) fail(UDF_ERROR_CAPTURE, what() + ": bad scalar type");
      if (b->tensor) {
        const udf_tensor* t = b->tensor;
        if (t->dtype != want || t->rows != 1 || t->cols != 1 || t->device != UDF_HOST_DEVICE || !t->data)
          fail(UDF_ERROR_CAPTURE, what() + ": a scalar capture takes a 1 x 1 host tensor of " + dtype_name(want) +
                                      " (or the value in the binding)");
        std::memcpy(&out[ci].bits, t->data, 4);
      } else if (want == UDF_DTYPE_F32) {
        out[ci].f32 = b->f32;
      } else {
        out[ci].i32 = b->i32;
      }
    }
  }
}

}  // namespace

Request make_request(udf_index* ix, const SearchCall& call) {
  const udf_search_params& p = call.params;
  Request request;
  request.ix = ix;
  request.rt = ix->mod->rt;
  request.stream = call.stream ? call.stream : request.rt->stream;
  request.blocking = call.blocking;
  const udf_module* mod = ix->mod;
  request.art = &mod->manifest.artifacts[ix->metric];
  request.k = p.k;
  request.n_probes = p.n_probes;
  request.qpi_param = p.queries_per_item;
  request.qstride = call.query_stride;
  request.n = call.queries->rows;
  request.dstride = call.dist_stride;
  request.istride = call.id_stride;
  request.queries = call.queries;
  request.out_d = call.out_dists;
  request.out_i = call.out_ids;
  request.direct_out = request.out_d->device != UDF_HOST_DEVICE && request.out_i->device != UDF_HOST_DEVICE &&
                       request.dstride == p.k && request.istride == p.k;

  // Kernels: the smallest k_max >= k with a merge of the same k_max.
  int filter = -1;
  if (p.filter) {
    filter = static_cast<int>(find_filter(mod, p.filter));
  } else if (p.n_filter_captures > 0) {
    fail(UDF_ERROR_CAPTURE, "filter captures are bound (n_filter_captures = " + std::to_string(p.n_filter_captures) +
                                ") but no filter is named");
  }
  request.filter = filter;
  // On demand (udf_module_link_ex): the bucket of k, linked and loaded now
  // if it is not yet; a rows index's (exact search, refine) are the rows scans.
  const bool rows = ix->rows_mode != udf_index::RowsMode::None;
  // Whether the search's one chunk takes a direct schedule with a scan of
  // this recommendation and k bucket: plan_schedule's rule, which a direct
  // twin (launch.direct_only) serves.
  const int64_t chunk_queries = search_chunk_queries(ix, p);
  const DirectFor direct = [&](int recommended_qpi, int k_max) {
    if (rows || request.n > chunk_queries) return false;
    const auto nq = static_cast<uint32_t>(request.n);
    return direct_schedule(chunk_queries_per_item(request, nq, recommended_qpi, k_max), uint64_t(nq) * p.n_probes,
                           item_target(request.rt->info.sm_count));
  };
  ensure_linked(ix->mod, static_cast<int>(ix->metric), filter, p.k, rows, direct);
  // A monotone metric's k 32 scan may come twice (launch.prune): request.scan
  // is the pruning one, request.plain_scan the other.  A direct twin serves
  // a direct schedule where its plain scan is not loaded (an on-demand
  // module's first searches): of one k bucket, the pruning scan first, then
  // the plain one, then the twin.
  auto usable = [&](const udf_module::Scan& s) { return !s.direct_only || direct(s.recommended_qpi, s.k_max); };
  auto rank = [](const udf_module::Scan& s) { return s.prune ? 2 : s.direct_only ? 0 : 1; };
  for (const auto& s : mod->scans)
    if (s.artifact == static_cast<int>(ix->metric) && s.filter == filter && s.rows == rows && s.k_max >= static_cast<int>(p.k) &&
        usable(s) &&
        (!request.scan || s.k_max < request.scan->k_max || (s.k_max == request.scan->k_max && rank(s) > rank(*request.scan))) &&
        std::any_of(mod->merges.begin(), mod->merges.end(),
                    [&](const udf_module::Merge& m) { return m.order == request.art->order && m.k_max == s.k_max; }))
      request.scan = &s;
  for (const auto& s : mod->scans)
    if (request.scan && request.scan->prune && &s != request.scan && s.artifact == request.scan->artifact && s.filter == filter &&
        s.rows == rows && s.k_max == request.scan->k_max && !s.prune && usable(s) &&
        (!request.plain_scan || rank(s) > rank(*request.plain_scan)))
      request.plain_scan = &s;
  if (!request.scan && filter >= 0 &&
      std::none_of(mod->scans.begin(), mod->scans.end(), [&](const udf_module::Scan& s) {
        return s.artifact == static_cast<int>(ix->metric) && s.filter == filter;
      }))
    fail(UDF_ERROR_MISMATCH, std::string("filter ") + p.filter + " is not linked with metric " + ix->symbol + " in module " +
                                 mod->name + ": link them together (udf-link --pair " + ix->symbol + ":" + p.filter + ")");
  if (!request.scan && rows &&
      std::none_of(mod->scans.begin(), mod->scans.end(), [&](const udf_module::Scan& s) {
        return s.artifact == static_cast<int>(ix->metric) && s.rows;
      }))
    fail(UDF_ERROR_UNSUPPORTED, "module " + mod->name + " has no exact-search and refine scans for metric " + ix->symbol +
                                    ": link it with udf-link --exact (or udf_module_link_ex, whose on-demand modules link "
                                    "them when first used)");
  if (!request.scan) fail(UDF_ERROR_UNSUPPORTED, "no scan kernel for k = " + std::to_string(p.k));
  for (const auto& m : mod->merges)
    if (m.order == request.art->order && m.k_max == request.scan->k_max) request.merge = &m;
  request.sort_capacity = request.scan->sort_capacity;  // the module's, which its scans were linked with
  request.merge_smem = UDF_IVF_MERGE_V1_SMEM_BYTES(request.sort_capacity);
  prepare_smem(request.rt, request.merge->fn, request.merge_smem, [&] { return "the merge for k = " + std::to_string(p.k); });

  request.chunk_queries = std::min<int64_t>(chunk_queries, request.n);
  request.share = call.coarse_share;
  require(!request.share || request.n <= request.chunk_queries, "a shared coarse probe takes one chunk");

  // Captures last: binding uploads host arrays (on the stream, after the
  // previous search of this index).
  if (ix->scratch.done.created() && !ix->scratch.done_reached) CU(cuStreamWaitEvent, request.stream, ix->scratch.done.get(), 0);
  bind_captures(ix, request.stream, request.art->captures, p.captures, p.n_captures, "metric", ix->symbol, ix->dim, ix->scratch.cap,
                ix->scratch.cap_copy, request.caps);
  if (filter >= 0) {
    const ModuleFilter& mf = mod->manifest.filters[filter];
    bind_captures(ix, request.stream, mf.captures, p.filter_captures, p.n_filter_captures, "filter", mf.symbol, 0, ix->scratch.fcap,
                  ix->scratch.fcap_copy, request.fcaps);
    request.n_fcaps = static_cast<uint32_t>(mf.captures.size());
  }
  return request;
}

// Chunks: candidates (n_probes x k per query) and coarse distances
// (n_lists per query; a rows index has none) stay within a few hundred MB.
int64_t search_chunk_queries(const udf_index* ix, const udf_search_params& p) {
  if (p.max_batch) return p.max_batch;
  const int64_t by_cands = (int64_t(512) << 20) / (int64_t(p.n_probes) * p.k * 8);
  const int64_t by_keys =
      ix->rows_mode != udf_index::RowsMode::None ? by_cands : (int64_t(256) << 20) / (int64_t(ix->n_lists) * 4);
  return std::clamp<int64_t>(std::min(by_cands, by_keys), 256, 65536);
}

// Grows a scratch buffer; waits first for the previous search, which may read it.
void grow(udf_index* ix, DevBuf& b, size_t bytes, const char* what) {
  if (b.bytes() >= bytes) return;
  ix->quiesce();
  b.ensure(bytes, what);
}

}  // namespace udf::rt

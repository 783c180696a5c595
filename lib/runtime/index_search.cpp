// The search pipeline (docs/kernels.md, "Search"): queries onto the device,
// the coarse probe (tiled distances + per-query selection), the list-major
// schedule built on the GPU, the UDF scan and the merge, all queued on one
// stream with no host round trip; the blocking call waits once at the end
// (and between internal chunks), the asynchronous one not at all.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "api_guard.h"
#include "index.h"
#include "index_shards.h"
#include "schedule_plan.h"
#include "versioned.h"
#include "udf/kernels/ivf_flat_v1.h"

using namespace udf;
using namespace udf::rt;

namespace {

// A v2 state metric's state words kept per (query, thread): the artifact's
// state_words, all 8 when it has none (a 1.2 module).
uint32_t state_words_of(const ModuleArtifact& a) {
  return a.state_words >= 1 && a.state_words <= UDF_ABI_METRIC_V2_STATE_WORDS ? a.state_words : UDF_ABI_METRIC_V2_STATE_WORDS;
}

// Binds `decl` (a metric's or filter's captures, ABI order) from `bindings`
// by name into `out`: every declared one bound once, none unknown, types
// checked.  Arrays: length `array_len` (a metric's: dim), or any length >= 1
// when 0 (a filter's); host arrays are copied into `bufs`, unless `copies`
// says the buffer holds those bytes already (the same weights every search:
// one copy-engine operation fewer before the scan; within the spread of a
// batch-1 search in an A/B on an H100, docs/performance-log.md item 37).
// A metric's device arrays start on UDF_IVF_SCAN_V1_CAPTURE_ALIGN bytes, or
// are copied into `bufs` (CAPTURE ALIGNMENT, ivf_flat_v1.h).
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
        // CAPTURE ALIGNMENT (ivf_flat_v1.h): a metric's scans assume its
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

// Bytes of nq x k staged results: the distances (padded to 8 bytes), then the ids.
size_t staged_dist_bytes(size_t nq, uint32_t k) { return (nq * k * 4 + 7) / 8 * 8; }
size_t staged_result_bytes(size_t nq, uint32_t k) { return staged_dist_bytes(nq, k) + nq * k * 8; }

// A checked search call: what every chunk of it needs.
struct Request {
  udf_index* ix = nullptr;
  udf_runtime* rt = nullptr;
  CUstream stream = nullptr;
  bool blocking = true;
  const udf_tensor *queries = nullptr, *out_d = nullptr, *out_i = nullptr;
  int64_t qstride = 0, dstride = 0, istride = 0, n = 0;
  uint32_t k = 0, P = 0, qpi_param = 0;
  const ModuleArtifact* art = nullptr;
  udf_capture_v1 caps[UDF_ABI_METRIC_V1_MAX_CAPTURES] = {};
  udf_capture_v1 fcaps[UDF_ABI_FILTER_V1_MAX_CAPTURES] = {};
  int filter = -1;
  uint32_t n_fcaps = 0;
  const udf_module::Scan* scan = nullptr;
  const udf_module::Scan* plain_scan = nullptr;  // scan prunes: the same k_max without (SCAN CHOICE)
  const udf_module::Merge* merge = nullptr;
  uint32_t S = 0;  // sort capacity of the kernels' k_max
  size_t merge_smem = 0;
  int64_t chunk = 0;
  bool direct_out = false;  // outputs contiguous on the device: the merge writes them
};

// Whether the request's scan reads the slots' ids (a filter's argument, a
// v2 metric's ctx->id).  A shard by vectors (udf_index::d_keys) returns tie
// keys in place of ids: through the scan's tail merge only when it does not.
bool scan_reads_ids(const Request& r) { return r.filter >= 0 || r.art->shape.has_value(); }

// One chunk of the queries (rows q0 .. q0 + nq) on its way through the stages.
struct Chunk {
  int64_t q0 = 0;
  uint32_t nq = 0;
  CUdeviceptr qdev = 0;  // the queries on the device, qs elements apart
  uint64_t qs = 0;
  uint32_t qpi = 1;
  uint32_t stage_rows = 0;  // ABI v2 vector scans: rows staged per warp at a time
  const udf_module::Scan* scan = nullptr;  // the request's scan or its plain one (SCAN CHOICE)
  udf::rt::ScanChoice* choice = nullptr;   // SCAN CHOICE: where the scan's time goes when measured
  int choice_scan = 0;                     // which of the two that is (ScanChoice::kPrune / kPlain)
  size_t scan_smem = 0;
  uint32_t items_max = 0, rows_max = 0;
  // Tiny batches (one query an item, few pairs): the coarse selection writes
  // a query-major schedule itself (DirectSchedule), up to direct_sched.tiles
  // tiles a probe; otherwise the list-major schedule kernels run (sched).
  bool direct = false;
  bool tail = false;  // direct, and the scan merges each query's rows (no merge launch)
  DirectSchedule direct_sched;
  // Where the merge writes the chunk's results (merge_outputs).
  float* out_dists = nullptr;
  long long* out_ids = nullptr;
  bool out_final = false;  // in the outputs (or mapped pinned staging): nothing to copy after
  udf_ivf_sched_args_v1 sched{};
};

// `mapped_out`: the outputs are the runtime's own mapped pinned memory (a
// sharded search's rows, index_shards.cpp), described as device memory of
// this device: their checks are skipped.
Request check_request(udf_index* ix, const udf_tensor* queries, const udf_search_params* params,
                      const udf_tensor* out_distances, const udf_tensor* out_ids, CUstream stream, bool blocking,
                      bool mapped_out = false) {
  require(ix != nullptr, "index is NULL");
  require(params != nullptr, "params is NULL");
  Request r;
  r.ix = ix;
  r.rt = ix->mod->rt;
  r.stream = stream ? stream : r.rt->stream;
  r.blocking = blocking;
  const udf_module* mod = ix->mod;
  r.art = &mod->manifest.artifacts[ix->metric];
  const udf_search_params p =
      read_versioned(*params, search_params_defaults(), kSearchParamsMinSize, "params", "udf_search_params");
  const uint32_t max_k = mod->metrics[ix->metric].info.max_k;
  require(p.k >= 1, "k = 0: k must be at least 1");
  // (The messages are built only on failure: these checks run on every search.)
  require(p.k <= max_k, [&] {
    return "k = " + std::to_string(p.k) + " exceeds the largest k of metric " + ix->symbol + " (" + std::to_string(max_k) +
           ")";
  });
  require(p.n_probes >= 1 && p.n_probes <= ix->n_lists, [&] {
    return "n_probes = " + std::to_string(p.n_probes) + " must be in 1 .. n_lists (" + std::to_string(ix->n_lists) + ")";
  });
  require(p.queries_per_item <= 64,
          [&] { return "queries_per_item = " + std::to_string(p.queries_per_item) + " is above 64"; });
  r.k = p.k;
  r.P = p.n_probes;
  r.qpi_param = p.queries_per_item;
  require(queries != nullptr, "queries is NULL");
  if (queries->cols != static_cast<int64_t>(ix->dim))
    fail(UDF_ERROR_INVALID_ARGUMENT, "queries have dimension " + std::to_string(queries->cols) + "; the index has " +
                                         std::to_string(ix->dim));
  r.qstride = check_tensor(r.rt, queries, "queries", to_dtype(ix->elem), ix->dim);
  r.n = queries->rows;
  require(r.n <= 100000000, "too many queries");
  r.dstride = mapped_out ? p.k : check_tensor(r.rt, out_distances, "out_distances", UDF_DTYPE_F32, p.k, r.n);
  r.istride = mapped_out ? p.k : check_tensor(r.rt, out_ids, "out_ids", UDF_DTYPE_I64, p.k, r.n);
  if (!blocking)
    require(out_distances->device != UDF_HOST_DEVICE && out_ids->device != UDF_HOST_DEVICE,
            "udf_index_search_async writes device outputs only; out_distances / out_ids are host memory "
            "(use udf_index_search)");
  r.queries = queries;
  r.out_d = out_distances;
  r.out_i = out_ids;
  r.direct_out = out_distances->device != UDF_HOST_DEVICE && out_ids->device != UDF_HOST_DEVICE && r.dstride == p.k &&
                 r.istride == p.k;

  // Kernels: the smallest k_max >= k with a merge of the same k_max.
  int filter = -1;
  if (p.filter) {
    size_t fi = 0;
    if (udf_module_find_filter(mod, p.filter, &fi) != UDF_OK) fail(UDF_ERROR_INVALID_ARGUMENT, udf_last_error());
    filter = static_cast<int>(fi);
  } else if (p.n_filter_captures > 0) {
    fail(UDF_ERROR_CAPTURE, "filter captures are bound (n_filter_captures = " + std::to_string(p.n_filter_captures) +
                                ") but no filter is named");
  }
  r.filter = filter;
  // On demand (udf_module_link_ex): the bucket of k, linked and loaded now if it is not yet.
  ensure_linked(ix->mod, static_cast<int>(ix->metric), filter, p.k);
  // A monotone metric's k 32 scan may come twice (module manifest 1.6,
  // launch.prune): r.scan is the pruning one, r.plain_scan the other.
  for (const auto& s : mod->scans)
    if (s.artifact == static_cast<int>(ix->metric) && s.filter == filter && s.k_max >= static_cast<int>(p.k) &&
        (!r.scan || s.k_max < r.scan->k_max || (s.k_max == r.scan->k_max && s.prune)) &&
        std::any_of(mod->merges.begin(), mod->merges.end(),
                    [&](const udf_module::Merge& m) { return m.order == r.art->order && m.k_max == s.k_max; }))
      r.scan = &s;
  for (const auto& s : mod->scans)
    if (r.scan && &s != r.scan && s.artifact == r.scan->artifact && s.filter == filter && s.k_max == r.scan->k_max && !s.prune)
      r.plain_scan = &s;
  if (!r.scan && filter >= 0 &&
      std::none_of(mod->scans.begin(), mod->scans.end(), [&](const udf_module::Scan& s) {
        return s.artifact == static_cast<int>(ix->metric) && s.filter == filter;
      }))
    fail(UDF_ERROR_MISMATCH, std::string("filter ") + p.filter + " is not linked with metric " + ix->symbol + " in module " +
                                 mod->name + ": link them together (udf-link --pair " + ix->symbol + ":" + p.filter + ")");
  if (!r.scan) fail(UDF_ERROR_UNSUPPORTED, "no scan kernel for k = " + std::to_string(p.k));
  for (const auto& m : mod->merges)
    if (m.order == r.art->order && m.k_max == r.scan->k_max) r.merge = &m;
  r.S = r.scan->sort_capacity;  // the module's (kernel pack 1.8 halved it for k_max 32)
  r.merge_smem = UDF_IVF_MERGE_V1_SMEM_BYTES(r.S);
  prepare_smem(r.rt, r.merge->fn, r.merge_smem, [&] { return "the merge for k = " + std::to_string(p.k); });

  // Chunks: candidates (n_probes x k per query) and coarse distances
  // (n_lists per query) stay within a few hundred MB.
  const int64_t by_cands = (int64_t(512) << 20) / (int64_t(r.P) * r.k * 8);
  const int64_t by_keys = (int64_t(256) << 20) / (int64_t(ix->n_lists) * 4);
  const int64_t automatic = std::clamp<int64_t>(std::min(by_cands, by_keys), 256, 65536);
  r.chunk = std::min<int64_t>(p.max_batch ? p.max_batch : automatic, r.n);

  // Captures last: binding uploads host arrays (on the stream, after the
  // previous search of this index).
  if (ix->s.done.created() && !ix->s.done_reached) CU(cuStreamWaitEvent, r.stream, ix->s.done.get(), 0);
  bind_captures(ix, r.stream, r.art->captures, p.captures, p.n_captures, "metric", ix->symbol, ix->dim, ix->s.cap,
                ix->s.cap_copy, r.caps);
  if (filter >= 0) {
    const ModuleFilter& mf = mod->manifest.filters[filter];
    bind_captures(ix, r.stream, mf.captures, p.filter_captures, p.n_filter_captures, "filter", mf.symbol, 0, ix->s.fcap,
                  ix->s.fcap_copy, r.fcaps);
    r.n_fcaps = static_cast<uint32_t>(mf.captures.size());
  }
  return r;
}

// Grows a scratch buffer; waits first for the previous search, which may read it.
void grow(udf_index* ix, DevBuf& b, size_t bytes, const char* what) {
  if (b.bytes() >= bytes) return;
  ix->quiesce();
  b.ensure(bytes, what);
}

// Stages 1 and 2, for rows [s0, s0 + n) of the chunk: the queries on the
// device (host ones from pinned staging, where row s0 is at staged), then
// normalized when the coarse metric is cosine; then their n_probes nearest
// lists (and a tiny batch's direct schedule).  Host queries come in slices
// (run), so the first slices' probes are computed while the next are copied;
// `side`: their uploads go on the runtime's side stream, so the copy engine
// takes the next slice while the coarse probe computes this one.
void stage_queries_and_coarse(Request& r, Chunk& c, const std::uint8_t* staged, uint32_t s0, uint32_t n, bool side) {
  udf_index* ix = r.ix;
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  CUdeviceptr rows = 0;
  uint64_t stride = 0;
  const std::uint8_t* inline_rows = nullptr;
  if (r.queries->device == UDF_HOST_DEVICE) {
    const CUstream up = side ? r.rt->aux_stream : r.stream;
    if (side && s0 == 0) {  // after what the stream has queued (the previous search may read the buffer)
      ix->s.upload_start.record(r.stream);
      CU(cuStreamWaitEvent, up, ix->s.upload_start.get(), 0);
    }
    // A tiny batch's queries (a direct schedule, up to 1 KB) ride in the
    // coarse kernel's launch, which stores them for the scan: no copy
    // engine round trip before the first kernel (nearest_centroids).
    if (c.direct && !side && !ix->normalize && n * row_bytes <= UDF_IVF_COARSE_INLINE_V1_BYTES)
      inline_rows = staged;
    else
      CU(cuMemcpyHtoDAsync, ix->s.queries.get() + s0 * row_bytes, staged, n * row_bytes, up);
    if (side) {
      ix->s.uploaded.record(up);
      CU(cuStreamWaitEvent, r.stream, ix->s.uploaded.get(), 0);
    }
    rows = ix->s.queries.get() + s0 * row_bytes;
    stride = ix->dim;
  } else {
    rows = reinterpret_cast<CUdeviceptr>(r.queries->data) + size_t((c.q0 + s0) * r.qstride) * ix->esize;
    stride = static_cast<uint64_t>(r.qstride);
  }
  if (ix->normalize) {
    const uint32_t el = static_cast<uint32_t>(to_dtype(ix->elem));
    convert(r.rt, r.stream, rows, el, stride, ix->s.qnorm.get() + s0 * row_bytes, el, n, ix->dim, true);
    rows = ix->s.qnorm.get() + s0 * row_bytes;
    stride = ix->dim;
  }
  if (s0 == 0) {  // where the chunk's queries are, for the scan
    c.qdev = rows;
    c.qs = stride;
  }
  nearest_centroids(r.rt, r.stream, rows, static_cast<uint32_t>(to_dtype(ix->elem)), stride, n, ix->d_centroids.get(),
                    ix->n_lists, ix->dim, ix->coarse, r.P, ix->s.probes.get() + size_t(s0) * r.P * 4, 0, ix->s.keys,
                    c.direct ? &c.direct_sched : nullptr, inline_rows);
}

// SCAN CHOICE: a monotone metric's pruning scan (module manifest 1.6,
// launch.prune; ivf_flat_v1.h, PRUNE) drops a vector once its partial key is
// beyond the query's bound, which comes from items that ran before (through
// query_bound) or from the same item's earlier steps.  A direct schedule of
// one step an item (tile_groups 4, one group a warp: a single query at P32 on
// 1M x 128, 1024 lists) runs all its items at once, so nothing is there to
// prune with and the checks only cost; it takes the plain scan where the
// module has one (udf-link links both since b60698e).  Elsewhere the data
// decides: well-separated clusters let it drop most vectors, overlapping
// ones too few to pay for its checks (11-17% slower at batch 10k on the
// overlap data, docs/performance-log.md).  So each index measures both scans,
// per kind of search, and takes the faster (scan_choice.h; c.choice is set
// when this search's scan is to be timed).  UDF_SEARCH_PRUNE=0 / 1 (test and
// benchmark hooks): the plain scan always / the pruning one always.
const udf_module::Scan* scan_for(const Request& r, Chunk& c) {
  if (!r.plain_scan) return r.scan;
  const char* e = std::getenv("UDF_SEARCH_PRUNE");
  if (e && std::strcmp(e, "0") == 0) return r.plain_scan;
  if (e && std::strcmp(e, "1") == 0) return r.scan;
  if (c.direct && c.direct_sched.tile_groups <= 4) return r.plain_scan;
  udf::rt::ScanChoice& choice = r.ix->scan_choice[udf::rt::ScanChoice::key(r.scan->k_max, r.P, c.nq)];
  // A blocking search reads its scan's time when it ends; an asynchronous
  // one leaves it for a later search (pending_choice), one at a time.
  const udf::rt::ScanChoice::Pick pick = choice.next(r.ix->s.pending_choice.choice == nullptr);
  if (pick.measure) {
    c.choice = &choice;
    c.choice_scan = pick.scan;
  }
  return pick.scan == udf::rt::ScanChoice::kPlain ? r.plain_scan : r.scan;
}

// NEAR FIRST for a pruning scan (ivf_flat_v1.h, PRUNE): a list-major
// schedule takes each query's nearest list before its other probes, as a
// list of its own (ivf_index_v1.h, NEAR FIRST), so that they meet the bound
// it sets.  (Tiny batches' direct schedules keep their order: launching a
// single query's nearest list first cost uniform data 10-15 us on an H100
// and saved clustered data 1-2 us at P32.)  UDF_SEARCH_NEAR_FIRST=0 (a test
// and benchmark hook) keeps the plain order.
bool near_first_for(const Chunk& c) {
  const char* e = std::getenv("UDF_SEARCH_NEAR_FIRST");
  return c.scan->prune && !(e && std::strcmp(e, "0") == 0);
}

// The scratch of stages 1 and 2 for up to r.chunk queries: the uploaded
// and the normalized queries and their probes (and the wait for the
// previous search where the coarse keys are to grow).
void grow_coarse_scratch(Request& r) {
  udf_index* ix = r.ix;
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  // (Whole 4-byte words: the inline coarse kernel stores them so.)
  if (r.queries->device == UDF_HOST_DEVICE)
    grow(ix, ix->s.queries, (size_t(r.chunk) * row_bytes + 3) / 4 * 4, "queries");
  if (ix->normalize) grow(ix, ix->s.qnorm, size_t(r.chunk) * row_bytes, "normalized queries");
  grow(ix, ix->s.probes, size_t(r.chunk) * r.P * 4, "probes");
  if (ix->s.keys.bytes() < size_t(r.chunk) * ix->n_lists * 4) ix->quiesce();  // nearest_centroids may grow it
}

// The scan's shared memory (c.scan_smem) for the chunk's queries per item.
// Shared memory by ABI: v1, v2 state (its state words a (query, thread))
// or v2 vector (plus stage_rows staged rows a warp: enough that rows x
// queries fill the 32 lanes, ivf_flat_v1.h).  Over the device's limit,
// fewer staged rows first (vector), then fewer queries per item
// (schedule_plan.h, fit_scan_smem): c.stage_rows and c.qpi as fitted.
void fit_smem(const Request& r, Chunk& c) {
  udf_index* ix = r.ix;
  const size_t filter_smem = r.filter >= 0 ? UDF_IVF_SCAN_V1_FILTER_SMEM_BYTES : 0;
  const std::optional<MetricShape> shape = r.art->shape;
  auto smem = [&](uint32_t qpi, uint32_t stage_rows) {
    const uint32_t dp = ix->dim_padded;
    if (shape == MetricShape::State)
      return size_t(UDF_IVF_SCAN_V2_STATE_SMEM_BYTES(qpi, r.S, dp, state_words_of(*r.art))) + filter_smem;
    if (shape == MetricShape::Vector)
      return size_t(UDF_IVF_SCAN_V2_VECTOR_SMEM_BYTES(size_t(qpi), size_t(r.S), size_t(dp), size_t(stage_rows))) + filter_smem;
    return size_t(UDF_IVF_SCAN_V1_SMEM_BYTES(qpi, r.S, dp)) + filter_smem;
  };
  const size_t limit = static_cast<size_t>(r.rt->max_smem_optin) - 1024;
  const ScanSmem s = fit_scan_smem(shape, c.qpi, limit, smem);
  c.qpi = s.qpi;
  c.stage_rows = s.stage_rows;
  c.scan_smem = s.bytes;
}

// The chosen scan's shared memory on its function (refused beyond the
// device's limit).
void prepare_scan(const Request& r, const Chunk& c) {
  prepare_smem(r.rt, c.scan->fn, c.scan_smem, [&] {
    return "the scan for k = " + std::to_string(r.k) + ", dim = " + std::to_string(r.ix->dim) + ", " +
           std::to_string(c.qpi) + " queries per item" +
           (r.art->shape == MetricShape::Vector ? ", " + std::to_string(c.stage_rows) + " staged rows per warp"
                                                : std::string());
  });
}

// A direct schedule (written by the coarse selection): its scratch and
// arguments.  One buffer: query_rows (nq + 1 words), then four statistics
// words a query (copied like a list-major header), then with a tail merge
// each query's row range (two words): 7 * nq + 1 words.
void prepare_direct(Request& r, Chunk& c) {
  udf_index* ix = r.ix;
  const uint32_t nq = c.nq;
  const uint64_t pairs = uint64_t(nq) * r.P;
  // A scan with a tail merge (kernel pack 1.4) takes each probe's own
  // tiles and merges the rows itself; older ones every probe in as many
  // tiles as the longest list and the merge kernel.
  // UDF_SEARCH_TAIL_MERGE=0 (a test hook) takes the older path.
  const char* tail_env = std::getenv("UDF_SEARCH_TAIL_MERGE");
  // A shard by vectors whose scan reads ids returns tie keys through the merge kernel only.
  c.tail = c.scan->tail_merge && !(tail_env && std::strcmp(tail_env, "0") == 0) && !(ix->d_keys.get() && scan_reads_ids(r));
  c.items_max = c.rows_max = static_cast<uint32_t>(pairs * c.direct_sched.tiles);
  grow(ix, ix->s.sched, (7 * size_t(nq) + 1) * 4, "the schedule");
  grow(ix, ix->s.items, size_t(c.items_max) * sizeof(udf_ivf_work_item_v1), "work items");
  grow(ix, ix->s.pairs, size_t(c.rows_max) * sizeof(udf_ivf_pair_v1), "pairs");
  uint32_t* w = ix->s.sched.as<uint32_t>();
  c.sched = udf_ivf_sched_args_v1{};
  c.sched.query_rows = w;
  c.sched.header = w + nq + 1;  // the per-query statistics, copied like the header
  c.direct_sched.list_sizes = ix->d_sizes.as<const uint32_t>();
  c.direct_sched.items = ix->s.items.as<void>();
  c.direct_sched.pairs = ix->s.pairs.as<void>();
  c.direct_sched.query_rows = c.sched.query_rows;
  // The statistics: a blocking search has the selection write them to the
  // mapped staging (read after the wait; run()), no copy.
  c.direct_sched.query_stats = r.blocking ? reinterpret_cast<uint32_t*>(ix->s.h_header.device()) : c.sched.header;
  if (c.tail) {
    c.direct_sched.row_ranges = c.sched.header + 4 * size_t(nq);
    // The tail merge's arrival counts: zero when allocated, left zero by every scan.
    if (ix->s.query_done.bytes() < size_t(nq) * 4) {
      ix->quiesce();
      ix->s.query_done.ensure(size_t(nq) * 4, "tail merge counts");
      CU(cuMemsetD32Async, ix->s.query_done.get(), 0, ix->s.query_done.bytes() / 4, r.stream);
    }
  }
}

// A list-major schedule (built on the GPU by stage_schedule): its bounds on
// items and rows (schedule_plan.h, list_major_bounds), its scratch and its
// argument block.
void prepare_list_major(Request& r, Chunk& c) {
  udf_index* ix = r.ix;
  const uint32_t L = ix->n_lists, nq = c.nq, P = r.P;
  const uint64_t pairs = uint64_t(nq) * P;
  const uint32_t target = item_target(r.rt->info.sm_count);
  // NEAR FIRST (ivf_index_v1.h) for a pruning scan: each query's nearest
  // list before its other probes.
  const bool near_first = near_first_for(c);
  const ListMajorBounds b = list_major_bounds(nq, P, L, c.qpi, target, near_first);
  if (!b.fits) fail(UDF_ERROR_UNSUPPORTED, "too many (query, list) pairs in one chunk: lower max_batch");
  c.items_max = static_cast<uint32_t>(b.items_max);
  c.rows_max = static_cast<uint32_t>(b.rows_max);
  grow(ix, ix->s.sched, b.sched_words * 4, "the schedule");
  grow(ix, ix->s.items, b.items_max * sizeof(udf_ivf_work_item_v1), "work items");
  grow(ix, ix->s.pairs, b.rows_max * sizeof(udf_ivf_pair_v1), "pairs");
  // The buffer's layout (ListMajorBounds::sched_words): counts, fill,
  // list_start, tiles, item_start, pair_start (SL each), header, by_list
  // and row_offset (pairs each), query_rows (nq + 1).
  const uint32_t SL = b.sched_lists;  // the schedule's lists
  uint32_t* w = ix->s.sched.as<uint32_t>();
  udf_ivf_sched_args_v1& a = c.sched;
  a = udf_ivf_sched_args_v1{};
  a.probes = ix->s.probes.as<const uint32_t>();
  a.list_sizes = ix->d_sizes.as<const uint32_t>();
  a.counts = w;
  a.fill = w + SL;
  a.list_start = w + 2 * size_t(SL);
  a.tiles = w + 3 * size_t(SL);
  a.item_start = w + 4 * size_t(SL);
  a.pair_start = w + 5 * size_t(SL);
  a.header = w + 6 * size_t(SL);
  a.near_first = near_first ? 1u : 0u;
  a.by_list = a.header + UDF_IVF_SCHED_V1_HEADER_WORDS;
  a.row_offset = a.by_list + pairs;
  a.query_rows = a.row_offset + pairs;
  a.items = ix->s.items.as<void>();
  a.pairs = ix->s.pairs.as<void>();
  a.n_queries = nq;
  a.n_probes = P;
  a.n_lists = L;
  a.qpi = c.qpi;
  a.target = target;
  a.rows_extra = static_cast<uint32_t>(b.rows_extra);
  a.items_max = c.items_max;
}

// Before the coarse probe: the chunk's queries per item, the scan's shared
// memory, which schedule (direct or list-major), the bounds on items and
// rows, and the scratch they need.  The decisions are schedule_plan.h's
// (pure rules, tested on the CPU); this applies them.
void plan_schedule(Request& r, Chunk& c) {
  grow_coarse_scratch(r);
  // Queries per item: the search's, or from the mean queries per probed list.
  c.qpi = r.qpi_param ? r.qpi_param
                      : queries_per_item(c.nq, r.P, r.ix->n_lists, r.scan->recommended_qpi, r.art->shape,
                                         state_words_of(*r.art), r.scan->k_max);
  fit_smem(r, c);
  // Tiny batches: a direct (query-major) schedule, cut into tiles (schedule_plan.h, direct_tiles).
  const std::optional<DirectTiles> d =
      direct_tiles(c.qpi, uint64_t(c.nq) * r.P, item_target(r.rt->info.sm_count), r.ix->max_list_size, r.k);
  c.direct = d.has_value();
  if (d) {
    c.direct_sched.tile_groups = d->tile_groups;
    c.direct_sched.tiles = d->tiles;
  }
  c.scan = scan_for(r, c);
  if (!r.qpi_param && !c.direct && r.filter < 0) {  // the chosen scan's own (schedule_plan.h, list_major_qpi; unfiltered: measured so)
    const uint32_t q = list_major_qpi(c.qpi, c.nq, r.P, r.ix->n_lists, c.scan->prune);
    if (q != c.qpi) {
      c.qpi = q;
      fit_smem(r, c);
    }
  }
  prepare_scan(r, c);
  if (c.direct) prepare_direct(r, c);
  else prepare_list_major(r, c);
}

// Stage 3: the list-major schedule, on the GPU (include/udf/kernels/ivf_index_v1.h).
void stage_schedule(Request& r, Chunk& c) {
  if (c.direct) return;  // written by the coarse selection
  udf_runtime* rt = r.rt;
  udf_index* ix = r.ix;
  udf_ivf_sched_args_v1& a = c.sched;
  const uint64_t pairs = uint64_t(c.nq) * r.P;
  const uint64_t items_max = c.items_max;
  const uint32_t L = ix->n_lists, nq = c.nq;
  constexpr unsigned kThreads = UDF_IVF_INDEX_V1_THREADS, kPlan = UDF_IVF_SCHED_V1_PLAN_THREADS;
  // One block does it all up to kSmallSchedule pairs (and items): beyond,
  // its loops cost more than the grids' extra launches.
  constexpr uint64_t kSmallSchedule = 4096;
  if (pairs <= kSmallSchedule && items_max <= kSmallSchedule) {
    launch_on(r.stream, rt->f_sched_small, 1, 1, kPlan, 0, &a);
    return;
  }
  // counts and fill (the schedule's lists each: 2 * L with NEAR FIRST)
  CU(cuMemsetD32Async, reinterpret_cast<CUdeviceptr>(a.counts), 0, 2 * size_t(a.near_first ? 2 * L : L), r.stream);
  CU(cuMemsetD32Async, ix->s.items.get(), 0, items_max * sizeof(udf_ivf_work_item_v1) / 4, r.stream);
  const uint64_t cap = uint64_t(rt->info.sm_count) * 16;
  auto blocks = [&](uint64_t threads) { return static_cast<unsigned>(std::min<uint64_t>(cap, (threads + kThreads - 1) / kThreads)); };
  // BLOCK HISTOGRAMS (ivf_index_v1.cu): where lists have 128 pairs or more
  // on average, the count and the scatter count each block's pairs in
  // shared memory, a word a schedule list, if that fits without opting in
  // (48 KB: 12288 lists); else a global add a pair (H100, 1M x 128, 1024
  // lists: batch 10k P128's schedule 0.296 -> 0.118 ms, P32's 0.100 ->
  // 0.071; batch 1000 P128, 125 pairs a list, 0.053 -> 0.059: its few
  // blocks' runs are longer than its adds' contention).
  const size_t lists = a.near_first ? 2 * size_t(L) : L;
  const bool hist = pairs >= 128 * lists && 4 * lists <= 48 * 1024;
  const unsigned hist_smem = hist ? static_cast<unsigned>(4 * lists) : 0u;
  launch_on(r.stream, rt->f_sched_count, blocks(pairs), 1, kThreads, hist_smem, &a);
  launch_on(r.stream, rt->f_sched_plan, 1, 1, kPlan, 0, &a);
  launch_on(r.stream, rt->f_sched_scatter_rows, blocks(std::max<uint64_t>(pairs, uint64_t(nq) * 32)), 1, kThreads, hist_smem, &a);
  launch_on(r.stream, rt->f_sched_query_rows, 1, 1, kPlan, 0, &a);
  launch_on(r.stream, rt->f_sched_fill, blocks(pairs), 1, kThreads, 0, &a);
}

// Stage 4: the UDF scan over every work item (launched on the upper bound;
// items past the real ones are empty).
void stage_scan(Request& r, Chunk& c) {
  udf_index* ix = r.ix;
  grow(ix, ix->s.cand_dists, size_t(c.rows_max) * r.k * 4, "candidate distances");
  grow(ix, ix->s.cand_slots, size_t(c.rows_max) * r.k * 4, "candidate slots");
  udf_ivf_scan_args_v1 sa{};
  sa.list_data = ix->d_list_data.as<const void>();
  sa.list_offsets = ix->d_offsets.as<const uint64_t>();
  sa.list_sizes = ix->d_sizes.as<const uint32_t>();
  sa.queries = reinterpret_cast<const void*>(c.qdev);
  sa.items = ix->s.items.as<const udf_ivf_work_item_v1>();
  sa.pairs = ix->s.pairs.as<const udf_ivf_pair_v1>();
  sa.cand_dists = ix->s.cand_dists.as<float>();
  sa.cand_slots = ix->s.cand_slots.as<uint32_t>();
  sa.query_stride = c.qs;
  sa.n_items = c.items_max;
  sa.dim = ix->dim;
  sa.dim_padded = ix->dim_padded;
  sa.k = r.k;
  sa.queries_per_item = c.qpi;
  if (r.art->acc == AccType::F32) {
    const float f = static_cast<float>(r.art->initial.value);
    std::memcpy(&sa.acc_init, &f, 4);
  } else {
    const int32_t i = static_cast<int32_t>(r.art->initial.value);
    std::memcpy(&sa.acc_init, &i, 4);
  }
  for (size_t w = 0; w < r.art->initial_state.size() && w < UDF_ABI_METRIC_V2_STATE_WORDS; ++w) {
    if (r.art->acc == AccType::F32) {
      const float f = static_cast<float>(r.art->initial_state[w].value);
      std::memcpy(&sa.state_init[w], &f, 4);
    } else {
      const int32_t i = static_cast<int32_t>(r.art->initial_state[w].value);
      std::memcpy(&sa.state_init[w], &i, 4);
    }
  }
  sa.stage_rows = c.stage_rows;
  sa.state_words = r.art->shape == MetricShape::State ? state_words_of(*r.art) : 0;
  sa.n_captures = static_cast<uint32_t>(r.art->captures.size());
  std::copy(std::begin(r.caps), std::end(r.caps), sa.captures);
  // The scan's ids: the filter's and a v2 metric's ctx->id; otherwise only
  // the tail merge writes them, so a shard by vectors gives its tie keys.
  sa.ids = ix->d_keys.get() && !scan_reads_ids(r) ? ix->d_keys.as<const long long>() : ix->d_ids.as<const long long>();
  sa.query_base = static_cast<uint32_t>(c.q0);
  sa.n_filter_captures = r.n_fcaps;
  std::copy(std::begin(r.fcaps), std::end(r.fcaps), sa.filter_captures);
  if (c.tail) {
    sa.query_done = ix->s.query_done.as<uint32_t>();
    sa.query_row_ranges = c.direct_sched.row_ranges;
    sa.out_dists = c.out_dists;
    sa.out_ids = c.out_ids;
  }
  // Query bounds (kernel pack 1.5; ivf_flat_v1.h, QUERY BOUND): items skip
  // candidates that finished rows of their query already beat k times.  The
  // words are all UDF_IVF_V1_BOUND_NONE between searches: set so when
  // allocated, reset by the tail merge, or here after a scan without one.
  // UDF_SEARCH_QUERY_BOUND=0 (a test and benchmark hook) leaves them out.
  const char* bound_env = std::getenv("UDF_SEARCH_QUERY_BOUND");
  const bool bound = c.scan->query_bound && !(bound_env && std::strcmp(bound_env, "0") == 0);
  if (bound) {
    if (ix->s.query_bound.bytes() < size_t(c.nq) * 4) {
      ix->quiesce();
      ix->s.query_bound.ensure(size_t(c.nq) * 4, "query bounds");
      CU(cuMemsetD32Async, ix->s.query_bound.get(), UDF_IVF_V1_BOUND_NONE, ix->s.query_bound.bytes() / 4, r.stream);
    }
    sa.query_bound = ix->s.query_bound.as<uint32_t>();
  }
  launch_on(r.stream, c.scan->fn, c.items_max, 1, UDF_IVF_V1_BLOCK_THREADS, c.scan_smem, &sa);
  if (bound && !c.tail) CU(cuMemsetD32Async, ix->s.query_bound.get(), UDF_IVF_V1_BOUND_NONE, c.nq, r.stream);
}

// Where the chunk's merged results go (before the scan: a tail merge writes
// them): the outputs when they are contiguous device memory; small batches
// with host outputs the pinned staging directly (mapped), saving the copy
// engine's round trip after the merge (a few microseconds of a batch-1
// search); otherwise scratch, copied on by stage_merge.
void merge_outputs(Request& r, Chunk& c, std::uint8_t* h_out) {
  udf_index* ix = r.ix;
  const uint32_t k = r.k;
  const size_t dist_bytes = staged_dist_bytes(c.nq, k);
  constexpr uint32_t kMappedOut = 1024;
  if (r.direct_out) {
    c.out_dists = static_cast<float*>(r.out_d->data) + size_t(c.q0) * k;
    c.out_ids = static_cast<long long*>(r.out_i->data) + size_t(c.q0) * k;
    c.out_final = true;
  } else if (h_out && c.nq <= kMappedOut) {
    const CUdeviceptr o = ix->s.h_out.device();
    c.out_dists = reinterpret_cast<float*>(o);
    c.out_ids = reinterpret_cast<long long*>(o + dist_bytes);
    c.out_final = true;
  } else {
    grow(ix, ix->s.out, staged_result_bytes(size_t(r.chunk), k), "results");
    c.out_dists = ix->s.out.as<float>();
    c.out_ids = reinterpret_cast<long long*>(ix->s.out.as<std::uint8_t>() + dist_bytes);
  }
}

// Stage 5: per query the k best of its rows (unless the scan merged them),
// then on to the outputs (host ones through pinned staging, copied out by
// finish_chunk).
void stage_merge(Request& r, Chunk& c, std::uint8_t* h_out) {
  udf_index* ix = r.ix;
  const uint32_t k = r.k, nq = c.nq;
  if (!c.tail) {
    udf_ivf_merge_args_v1 ma{};
    ma.cand_dists = ix->s.cand_dists.as<const float>();
    ma.cand_slots = ix->s.cand_slots.as<const uint32_t>();
    ma.query_rows = c.sched.query_rows;
    ma.ids = ix->d_keys.get() ? ix->d_keys.as<const long long>() : ix->d_ids.as<const long long>();  // (shards by vectors: tie keys)
    ma.out_dists = c.out_dists;
    ma.out_ids = c.out_ids;
    ma.n_queries = nq;
    ma.k = k;
    launch_on(r.stream, r.merge->fn, nq, 1, UDF_IVF_V1_BLOCK_THREADS, r.merge_smem, &ma);
  }
  if (c.out_final) return;
  const size_t dist_bytes = staged_dist_bytes(nq, k);
  if (h_out) {  // one copy of both into pinned memory
    CU(cuMemcpyDtoHAsync, h_out, ix->s.out.get(), staged_result_bytes(nq, k), r.stream);
    return;
  }
  // Strided device outputs (and nothing on the host): a copy per row.
  auto put = [&](const udf_tensor* t, int64_t stride, CUdeviceptr src, size_t es) {
    for (uint32_t q = 0; q < nq; ++q)
      CU(cuMemcpyDtoDAsync,
         reinterpret_cast<CUdeviceptr>(static_cast<std::uint8_t*>(t->data) + size_t((c.q0 + q) * stride) * es),
         src + size_t(q) * k * es, k * es, r.stream);
  };
  put(r.out_d, r.dstride, ix->s.out.get(), 4);
  put(r.out_i, r.istride, ix->s.out.get() + dist_bytes, 8);
}

// AWAKE: a CUDA host function (no CUDA calls in it) that keeps the host
// pool's workers spinning for the next millisecond.
void CUDA_CB wake_host_pool(void* pool) { static_cast<HostPool*>(pool)->keep_awake(std::chrono::milliseconds(1)); }

// Whether finish_chunk copies one of the chunk's outputs on the host pool: a
// host output of contiguous rows (stride k) large enough for two parts.
bool finish_uses_pool(const Request& r, uint32_t nq) {
  auto pooled = [&](const udf_tensor* t, int64_t stride, size_t es) {
    return t->device == UDF_HOST_DEVICE && stride == static_cast<int64_t>(r.k) && copy_is_pooled(size_t(nq) * r.k * es);
  };
  return pooled(r.out_d, r.dstride, 4) || pooled(r.out_i, r.istride, 8);
}

// After the stream has finished a chunk: its results from pinned memory to the outputs.
void finish_chunk(Request& r, const Chunk& c, const std::uint8_t* h_out) {
  const uint32_t k = r.k, nq = c.nq;
  const size_t dist_bytes = staged_dist_bytes(nq, k);
  auto put = [&](const udf_tensor* t, int64_t stride, const std::uint8_t* src, size_t es) {
    auto* base = static_cast<std::uint8_t*>(t->data) + size_t(c.q0 * stride) * es;
    if (t->device == UDF_HOST_DEVICE) {
      if (stride == static_cast<int64_t>(k)) {
        // On the host pool: batch 10k k10's 1.2 MB of results in about 0.1
        // ms after the scan's idle time on the H100 machine (one thread: 0.19).
        copy_parallel(r.rt, base, src, size_t(nq) * k * es);
        return;
      }
      for (uint32_t q = 0; q < nq; ++q) std::memcpy(base + size_t(q) * stride * es, src + size_t(q) * k * es, k * es);
    } else {  // the other output is on the host: this one goes back up
      for (uint32_t q = 0; q < nq; ++q)
        CU(cuMemcpyHtoDAsync, reinterpret_cast<CUdeviceptr>(base + size_t(q) * stride * es), src + size_t(q) * k * es,
           k * es, r.stream);
      CU(cuStreamSynchronize, r.stream);
    }
  };
  put(r.out_d, r.dstride, h_out, 4);
  put(r.out_i, r.istride, h_out + dist_bytes, 8);
}

float elapsed(Event& a, Event& b) {
  float ms = 0;
  CU(cuEventElapsedTime, &ms, a.get(), b.get());
  return ms;
}

// SCAN CHOICE for asynchronous searches: the scan time an earlier one
// measured, once the GPU has passed its end (cuEventQuery: no wait).
void read_pending_choice(udf_index* ix) {
  auto& pc = ix->s.pending_choice;
  if (!pc.choice) return;
  const CUresult q = cuda().cuEventQuery(ix->s.scan_end.get());
  if (q == CUDA_ERROR_NOT_READY) return;
  cu_check(q, "cuEventQuery");
  pc.choice->record(pc.scan, elapsed(ix->s.scan_begin, ix->s.scan_end), pc.pairs);
  pc = {};
}

// Runs every chunk of a checked request.
void run(Request& r) {
  udf_index* ix = r.ix;
  auto& s = ix->s;
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  const bool host_q = r.queries->device == UDF_HOST_DEVICE;
  const bool host_out = !r.direct_out && (r.out_d->device == UDF_HOST_DEVICE || r.out_i->device == UDF_HOST_DEVICE);
  const double t_start = now_ms();
  read_pending_choice(ix);
  if (r.blocking) ix->stats = udf_search_stats{};
  s.done_reached = false;  // until this search's end (an error leaves it false)
  // Pinned staging: a blocking call waits for each chunk, so one chunk's
  // worth is reused; an asynchronous one stages all of its host queries.
  if (host_q) {
    s.staged.sync();  // an earlier call's copy out of it has finished
    s.h_in.ensure((r.blocking ? size_t(r.chunk) : size_t(r.n)) * row_bytes, "staged queries");
  }
  if (host_out) {
    s.h_out.ensure(staged_result_bytes(size_t(r.chunk), r.k), "staged results");
  }
  // The statistics come down from the schedule: its header, or a direct
  // schedule's four words a query.
  const size_t header_bytes = std::max<size_t>(UDF_IVF_SCHED_V1_HEADER_WORDS, 4 * size_t(r.chunk)) * 4;
  if (r.blocking) {
    s.h_header.ensure(header_bytes, "schedule header");
    ix->work = udf_search_work{};
  }
  // Stage times only when asked for (udf_index_set_stage_timing): the five
  // events cost a batch-1 search 5-7 us (H100, 1M x 128, P32).
  const bool timed = r.blocking && ix->stage_timing;
  for (int64_t q0 = 0; q0 < r.n; q0 += r.chunk) {
    Chunk c;
    c.q0 = q0;
    c.nq = static_cast<uint32_t>(std::min(r.chunk, r.n - q0));
    plan_schedule(r, c);
    merge_outputs(r, c, host_out ? s.h_out.as<std::uint8_t>() : nullptr);
    if (host_q) {
      // Host queries through pinned staging.  A few MB go in slices of about
      // 1 MB, copied on the runtime's host pool: the copy engine and the
      // coarse probe take each slice while the host copies the next (batch
      // 10k x 128 f32 on the H100 machine: 5 MB copied in 0.2 ms, the first
      // MB ready after 0.1 ms; each MB's upload 0.04 ms, its coarse kernels
      // 0.07 ms).  A first slice of 128 KB, for the GPU to start sooner, was
      // no faster.
      std::uint8_t* dst = s.h_in.as<std::uint8_t>() + (r.blocking ? 0 : size_t(q0) * row_bytes);
      constexpr size_t kSliceBytes = size_t(1) << 20;
      const bool sliced = c.nq * row_bytes >= 2 * kSliceBytes;
      auto ready = [&](int64_t s0, int64_t n) {
        if (s0 == 0 && timed) s.stage[0].record(r.stream);
        stage_queries_and_coarse(r, c, dst + s0 * row_bytes, static_cast<uint32_t>(s0), static_cast<uint32_t>(n), sliced);
      };
      if (sliced) {
        host_rows_in_slices(r.rt, r.queries, r.qstride, q0, c.nq, dst, std::max<int64_t>(1, kSliceBytes / row_bytes), ready);
      } else {
        rows_to_host(r.rt, r.queries, r.qstride, q0, c.nq, dst);
        ready(0, c.nq);
      }
      // The next call waits for this before it writes the staging again; a
      // blocking search has waited for its copies when it returns.
      if (!r.blocking) s.staged.record(r.stream);
    } else {
      if (timed) s.stage[0].record(r.stream);
      stage_queries_and_coarse(r, c, nullptr, 0, c.nq, false);
    }
    if (timed) s.stage[1].record(r.stream);
    stage_schedule(r, c);
    // The schedule's header (for the statistics) comes down on the side
    // stream, so the scan does not wait for the copy.  A direct schedule
    // (nothing between the coarse and the scan stages) wrote its statistics
    // to the mapped staging itself (plan_schedule): no copy, no event.
    const bool copy_header = r.blocking && !c.direct;
    if (copy_header) {
      s.stage[2].record(r.stream);
      CU(cuStreamWaitEvent, r.rt->aux_stream, s.stage[2].get(), 0);
      CU(cuMemcpyDtoHAsync, s.h_header.as<void>(), reinterpret_cast<CUdeviceptr>(c.sched.header),
         UDF_IVF_SCHED_V1_HEADER_WORDS * 4, r.rt->aux_stream);
      s.header_copied.record(r.rt->aux_stream);
    }
    if (c.choice) s.scan_begin.record(r.stream);
    stage_scan(r, c);
    if (c.choice) s.scan_end.record(r.stream);
    // AWAKE (host_pool.h): results the host pool will copy out wake its
    // workers when the scan ends, so that they are spinning, not asleep,
    // when the copy comes (the merge and the copy down take about 0.1 ms;
    // batch 10k on the H100 machine: 0.03-0.04 ms a search).  A host
    // function on a stream of its own: it waits for nothing else.
    if (r.blocking && host_out && !c.out_final && finish_uses_pool(r, c.nq)) {
      s.scanned.record(r.stream);
      CU(cuStreamWaitEvent, r.rt->wake_stream, s.scanned.get(), 0);
      CU(cuLaunchHostFunc, r.rt->wake_stream, wake_host_pool, &host_pool(r.rt));
    }
    if (timed) s.stage[3].record(r.stream);
    stage_merge(r, c, host_out ? s.h_out.as<std::uint8_t>() : nullptr);
    if (!r.blocking) {
      if (c.choice) s.pending_choice = {c.choice, c.choice_scan, double(c.nq) * r.P};
      continue;
    }
    if (timed) s.stage[4].record(r.stream);
    // No `done` event: the wait below reaches the end of this search, and
    // done_reached (set below) spares the next search the wait on it; an
    // event record costs a batch-1 search about a microsecond.
    CU(cuStreamSynchronize, r.stream);
    read_pending_choice(ix);  // an earlier asynchronous search's, complete now
    if (copy_header) s.header_copied.sync();  // before the next chunk's schedule overwrites the header
    if (host_out) finish_chunk(r, c, s.h_out.as<std::uint8_t>());
    if (c.choice) c.choice->record(c.choice_scan, elapsed(s.scan_begin, s.scan_end), double(c.nq) * r.P);
    c.choice = nullptr;
    udf_search_stats& st = ix->stats;
    if (timed) {
      st.coarse_ms += elapsed(s.stage[0], s.stage[1]);
      if (copy_header) {
        st.schedule_ms += elapsed(s.stage[1], s.stage[2]);
        st.scan_ms += elapsed(s.stage[2], s.stage[3]);
      } else {
        st.scan_ms += elapsed(s.stage[1], s.stage[3]);
      }
      st.merge_ms += elapsed(s.stage[3], s.stage[4]);
    }
    st.chunks += 1;
    st.queries_per_item = c.qpi;
    const uint32_t* h = s.h_header.as<uint32_t>();
    uint64_t scored = 0, groups = 0;
    if (c.direct) {
      st.work_items += c.items_max;
      for (uint32_t q = 0; q < c.nq; ++q, h += 4) {
        scored += h[0] | uint64_t(h[1]) << 32;
        groups += h[2] | uint64_t(h[3]) << 32;
      }
    } else {
      st.work_items += h[0];
      scored = h[4] | uint64_t(h[5]) << 32;
      groups = h[6] | uint64_t(h[7]) << 32;
    }
    ix->work.scored += scored;
    ix->work.list_bytes_read += groups * 32 * ix->dim_padded * ix->esize;
  }
  if (!r.blocking) s.done.record(r.stream);
  s.done_reached = r.blocking;  // the last chunk's wait covered it (and `done`, older, is complete)
  if (r.blocking) ix->stats.total_ms = now_ms() - t_start;
}

}  // namespace

void udf::rt::search_shard(udf_index* shard, const udf_tensor* queries, const udf_search_params* params,
                           const udf_tensor* out_d, const udf_tensor* out_i, CUstream stream, bool mapped_out) {
  Request r = check_request(shard, queries, params, out_d, out_i, stream, false, mapped_out);
  run(r);
}

extern "C" {

UDF_API udf_status udf_index_search(udf_index* ix, const udf_tensor* queries, const udf_search_params* params,
                                    const udf_tensor* out_distances, const udf_tensor* out_ids) {
  return guarded([&] {
    require(ix != nullptr, "index is NULL");
    if (ix->sharded()) return search_sharded(ix, queries, params, out_distances, out_ids, nullptr, true);
    CtxGuard g(ix->mod->rt->ctx);
    Request r = check_request(ix, queries, params, out_distances, out_ids, nullptr, true);
    run(r);
  });
}

UDF_API udf_status udf_index_search_async(udf_index* ix, const udf_tensor* queries, const udf_search_params* params,
                                          const udf_tensor* out_distances, const udf_tensor* out_ids, void* stream) {
  return guarded([&] {
    require(ix != nullptr, "index is NULL");
    if (ix->sharded())
      return search_sharded(ix, queries, params, out_distances, out_ids, static_cast<CUstream>(stream), false);
    CtxGuard g(ix->mod->rt->ctx);
    Request r = check_request(ix, queries, params, out_distances, out_ids, static_cast<CUstream>(stream), false);
    run(r);
  });
}

}  // extern "C"

// SHARDS: indexes over several devices of one host (include/udf/runtime.h,
// "several GPUs"; docs/scale-out.md).
//
// A sharded index is a udf_index that keeps no lists itself: it holds the
// whole index's centroids and list sizes, and one ordinary index a device
// (shards), each with every centroid and only its own contiguous range of
// lists (the others empty).  Built as one index would be (k-means and the
// balanced assignment on the first device), so its lists are that index's.
// A search runs the ordinary search on every shard at once (each probes the
// same lists: the same centroids and kernels), then gathers the shards'
// top-k on the first device (NCCL, or peer copies) and merges them there
// (udf_ivf_index_v1_shard_merge, kernels/shard_merge.cuh): the one index's
// results, bit for bit.
#include "index_shards.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <deque>
#include <exception>

#include "api_guard.h"
#include "index_file.h"
#include "shard_plan.h"
#include "versioned.h"
#include "udf/kernels/ivf_index_v1.h"
#include "udf/support/fs.h"
#include "shard_merge.cuh"

using namespace udf;
using namespace udf::rt;

namespace udf::rt {

ShardGroup::~ShardGroup() {
  workers.reset();  // (joins: no search is running)
  try {
    quiesce();
  } catch (...) {
  }
  if (nccl_api)
    for (ncclComm_t c : comms)
      if (c) nccl_api->ncclCommDestroy(c);
  for (auto& s : per) {
    if (!s) continue;
    try {
      CtxGuard g(s->ctx);
      s.reset();
    } catch (...) {
    }
  }
  if (home) {
    try {
      CtxGuard g(home_ctx);
      home.reset();
    } catch (...) {
    }
  }
}

void ShardGroup::quiesce() {
  if (home) home->done.sync();
  for (auto& s : per)
    if (s) s->searched.sync();
}

namespace {

// HOST MERGE for batches up to this many queries (host outputs);
// UDF_SHARD_HOST_MERGE=0 (a test hook) takes the GPU merge always.
constexpr uint32_t kHostMergeQueries = 64;
// Shards 1 .. start on threads of their own (SHARD WORKERS, shard_workers.h:
// their host work -- staging host queries, planning, launches -- beside the
// first's) when the shards' runtimes are distinct; UDF_SHARD_THREADS=0 (a
// test and benchmark hook) starts them one after the other.
bool shard_threads_off() {
  const char* v = std::getenv("UDF_SHARD_THREADS");
  return v != nullptr && std::strcmp(v, "0") == 0;
}

bool host_merge_off() {
  const char* e = std::getenv("UDF_SHARD_HOST_MERGE");
  return e && std::strcmp(e, "0") == 0;
}

udf_index* shard_of(const udf_index* ix, size_t s) { return ix->shards[s].get(); }

// Rows [r0, r0 + m) of a tensor (row_stride kept).
udf_tensor rows_of(const udf_tensor& t, int64_t stride, int64_t r0, int64_t m) {
  udf_tensor s = t;
  s.data = static_cast<std::uint8_t*>(t.data) + size_t(r0) * size_t(stride) * udf_dtype_size(t.dtype);
  s.rows = m;
  return s;
}

udf_tensor device_tensor(CUdeviceptr p, int32_t device, udf_dtype dtype, int64_t rows, int64_t cols) {
  udf_tensor t{};
  t.data = reinterpret_cast<void*>(p);
  t.dtype = dtype;
  t.rows = rows;
  t.cols = cols;
  t.row_stride = cols;
  t.device = device;
  return t;
}

// A device buffer grown to `bytes`; a buffer that grows first waits for the
// searches that may still read it.
void ensure(ShardGroup& g, DevBuf& b, size_t bytes, const char* what) {
  if (b.bytes() >= bytes) return;
  g.quiesce();
  b.ensure(bytes, what);
}

// A device tensor of the first device, as shard `sh` (on another device)
// reads it: a copy in `buf` on its stream.  The rows are contiguous (packed
// first when they were not).
udf_tensor copy_to_shard(ShardGroup& g, ShardGroup::Shard& sh, const udf_tensor& t, DevBuf& buf, const char* what) {
  const size_t bytes = size_t(t.rows) * size_t(t.cols) * udf_dtype_size(t.dtype);
  ensure(g, buf, bytes, what);
  CU(cuMemcpyPeerAsync, buf.get(), sh.ctx, reinterpret_cast<CUdeviceptr>(t.data), g.home_ctx, bytes, sh.stream);
  udf_tensor c = t;
  c.data = buf.as<void>();
  c.row_stride = t.cols;
  int dev = 0;
  CU(cuPointerGetAttribute, &dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, buf.get());
  c.device = dev;
  return c;
}

// Whether a tensor's values are one block of rows * cols elements.
bool contiguous(const udf_tensor& t) { return t.row_stride == 0 || t.row_stride == t.cols || t.rows == 1; }

// Capture bindings as a shard on another device takes them: device arrays
// (of the first device) copied to `bufs`.  `tensors` holds the copies'
// descriptions while the bindings are used.
std::vector<udf_capture_binding> shard_bindings(ShardGroup& g, ShardGroup::Shard& sh, const udf_capture_binding* b, size_t n,
                                                DevBuf* bufs, size_t n_bufs, std::deque<udf_tensor>& tensors) {
  if (n == 0 || b == nullptr) return {};
  std::vector<udf_capture_binding> out(b, b + n);
  for (size_t i = 0; i < n; ++i) {
    const udf_tensor* t = b[i].tensor;
    if (!t || t->device == UDF_HOST_DEVICE || !t->data) continue;
    require(i < n_bufs, "too many capture bindings");
    require(contiguous(*t), [&] {
      return std::string("capture ") + (b[i].name ? b[i].name : "?") +
             ": a strided device array is not taken by a sharded index (make it contiguous or pass host memory)";
    });
    tensors.push_back(copy_to_shard(g, sh, *t, bufs[i], "capture copy"));
    out[i].tensor = &tensors.back();
  }
  return out;
}

// Copies the merged rows (k apart in `src`) to a chunk's output rows: device
// outputs on the stream; host outputs into `pinned` (host_rows copies them
// on once the stream has reached the copy).
void put_rows(const udf_tensor& t, int64_t stride, CUdeviceptr src, size_t es, uint32_t m, uint32_t k, CUstream stream,
              std::uint8_t* pinned) {
  auto* base = static_cast<std::uint8_t*>(t.data);
  if (t.device == UDF_HOST_DEVICE) {
    CU(cuMemcpyDtoHAsync, pinned, src, size_t(m) * k * es, stream);
    return;
  }
  if (stride == static_cast<int64_t>(k)) {
    CU(cuMemcpyDtoDAsync, reinterpret_cast<CUdeviceptr>(base), src, size_t(m) * k * es, stream);
    return;
  }
  for (uint32_t q = 0; q < m; ++q)
    CU(cuMemcpyDtoDAsync, reinterpret_cast<CUdeviceptr>(base + size_t(q) * stride * es), src + size_t(q) * k * es, k * es,
       stream);
}

void host_rows(const udf_tensor& t, int64_t stride, const std::uint8_t* pinned, size_t es, uint32_t m, uint32_t k) {
  if (t.device != UDF_HOST_DEVICE) return;
  auto* base = static_cast<std::uint8_t*>(t.data);
  if (stride == static_cast<int64_t>(k)) {
    std::memcpy(base, pinned, size_t(m) * k * es);
    return;
  }
  for (uint32_t q = 0; q < m; ++q) std::memcpy(base + size_t(q) * stride * es, pinned + size_t(q) * k * es, k * es);
}

// HOST MERGE: the shards' rows (in their mapped pinned memory) merged into
// the outputs' rows q0 .. q0 + m, by kernels/shard_merge.cuh's placement.
// keys_at: by vectors, the tie keys' offset in the rows (0: by lists, none).
void merge_on_host(ShardGroup& g, const udf_tensor& out_d, int64_t dstride, const udf_tensor& out_i, int64_t istride,
                   int64_t q0, uint32_t m, uint32_t k, size_t ids_at, size_t keys_at, bool max_order) {
  const uint32_t S = static_cast<uint32_t>(g.per.size());
  auto* od = static_cast<float*>(out_d.data) + size_t(q0) * size_t(dstride);
  auto* oi = static_cast<long long*>(out_i.data) + size_t(q0) * size_t(istride);
  for (uint32_t q = 0; q < m; ++q) {
    auto rows = [&](uint32_t t) { return g.per[t]->rows.as<const float>() + size_t(q) * k; };
    auto ties = [&](uint32_t t) {
      return reinterpret_cast<const long long*>(g.per[t]->rows.as<const std::uint8_t>() + keys_at) + size_t(q) * k;
    };
    for (uint32_t s = 0; s < S; ++s) {
      const float* d = rows(s);
      const long long* ids = reinterpret_cast<const long long*>(g.per[s]->rows.as<const std::uint8_t>() + ids_at) + size_t(q) * k;
      for (uint32_t pos = 0; pos < k; ++pos) {
        const uint32_t at = keys_at ? udf_shard_merge::place(rows, ties, S, k, max_order, s, pos)
                                    : udf_shard_merge::place(rows, S, k, max_order, s, pos);
        if (at < k) {
          od[size_t(q) * dstride + at] = d[pos];
          oi[size_t(q) * istride + at] = ids[pos];
        }
      }
    }
  }
}

// SHARDS BY VECTORS: a shard's m x k results as tie keys (at `keys`) to
// their ids (at `ids`), on its stream (udf_ivf_index_v1_resolve_keys).
void resolve_keys(udf_index* sh, CUstream stream, CUdeviceptr keys, CUdeviceptr ids, size_t n) {
  udf_runtime* rt = sh->mod->rt;
  udf_ivf_resolve_keys_args_v1 a{reinterpret_cast<const long long*>(keys), reinterpret_cast<long long*>(ids),
                                 sh->d_keys.as<const long long>(), sh->d_ids.as<const long long>(),
                                 sh->d_offsets.as<const uint64_t>(), sh->d_sizes.as<const uint32_t>(), n, sh->n_lists, 0};
  const auto grid = static_cast<unsigned>(
      std::min<uint64_t>((n + UDF_IVF_INDEX_V1_THREADS - 1) / UDF_IVF_INDEX_V1_THREADS, uint64_t(1) << 16));
  launch_on(stream, rt->f_resolve_keys, std::max(grid, 1u), 1, UDF_IVF_INDEX_V1_THREADS, 0, &a);
}

}  // namespace

void search_sharded(udf_index* ix, const udf_tensor* queries, const udf_search_params* params, const udf_tensor* out_d,
                    const udf_tensor* out_i, CUstream stream, bool blocking) {
  ShardGroup& g = *ix->group;
  ShardGroup::Home& H = *g.home;
  udf_index* first = shard_of(ix, 0);
  udf_runtime* hrt = first->mod->rt;
  CtxGuard hg(hrt->ctx);
  require(params != nullptr, "params is NULL");
  const udf_search_params p =
      read_versioned(*params, search_params_defaults(), kSearchParamsMinSize, "params", "udf_search_params");
  const uint32_t max_k = first->mod->metrics[first->metric].info.max_k;
  require(p.k >= 1, "k = 0: k must be at least 1");
  require(p.k <= max_k, [&] {
    return "k = " + std::to_string(p.k) + " exceeds the largest k of metric " + ix->symbol + " (" + std::to_string(max_k) + ")";
  });
  require(queries != nullptr, "queries is NULL");
  if (queries->cols != static_cast<int64_t>(ix->dim))
    fail(UDF_ERROR_INVALID_ARGUMENT,
         "queries have dimension " + std::to_string(queries->cols) + "; the index has " + std::to_string(ix->dim));
  const int64_t qstride = check_tensor(hrt, queries, "queries", to_dtype(ix->elem), ix->dim);
  const int64_t n = queries->rows;
  const int64_t dstride = check_tensor(hrt, out_d, "out_distances", UDF_DTYPE_F32, p.k, n);
  const int64_t istride = check_tensor(hrt, out_i, "out_ids", UDF_DTYPE_I64, p.k, n);
  if (!blocking)
    require(out_d->device != UDF_HOST_DEVICE && out_i->device != UDF_HOST_DEVICE,
            "udf_index_search_async writes device outputs only; out_distances / out_ids are host memory "
            "(use udf_index_search)");
  const double t0 = now_ms();
  const uint32_t S = static_cast<uint32_t>(ix->shards.size()), k = p.k;
  const bool max_order = first->mod->manifest.artifacts[first->metric].order == Order::Max;
  const bool by_vectors = ix->by_vectors();
  // Chunks of queries whose gathered results stay within 256 MB.
  const int64_t chunk = std::clamp<int64_t>((int64_t(256) << 20) / (int64_t(S) * k * 12), 1, 65536);
  CUstream s0 = !blocking && stream ? stream : hrt->stream;
  const bool remote_device_queries = queries->device != UDF_HOST_DEVICE &&
                                     std::any_of(g.per.begin(), g.per.end(), [](const auto& s) { return !s->home_device; });
  uint32_t chunks = 0;
  for (int64_t q0 = 0; q0 < n; q0 += chunk, ++chunks) {
    const uint32_t m = static_cast<uint32_t>(std::min(chunk, n - q0));
    const size_t per_shard = size_t(m) * k;
    udf_tensor qs = rows_of(*queries, qstride, q0, m);
    // Strided device queries that other devices read: packed here first.
    if (remote_device_queries && !contiguous(qs)) {
      const size_t es = ix->esize, row_bytes = size_t(ix->dim) * es;
      ensure(g, H.packed, size_t(m) * row_bytes, "packed queries");
      CUDA_MEMCPY2D c{};
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = reinterpret_cast<CUdeviceptr>(qs.data);
      c.srcPitch = size_t(qstride) * es;
      c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      c.dstDevice = H.packed.get();
      c.dstPitch = row_bytes;
      c.WidthInBytes = row_bytes;
      c.Height = m;
      if (!g.done_reached) CU(cuStreamWaitEvent, s0, H.done.get(), 0);
      CU(cuMemcpy2DAsync, &c, s0);
      qs.data = H.packed.as<void>();
      qs.row_stride = ix->dim;
    }
    // HOST MERGE: a small batch with host outputs: each GPU writes its rows
    // to mapped pinned memory and the host merges them (the same placement
    // as the merge kernel's), sparing the gather and the merge's launch.
    // A shard's pinned rows: distances, ids, then (by vectors) tie keys.
    const size_t ids_at = (per_shard * 4 + 7) / 8 * 8;
    const size_t keys_at = by_vectors ? ids_at + per_shard * 8 : 0;
    const bool host_merge = blocking && out_d->device == UDF_HOST_DEVICE && out_i->device == UDF_HOST_DEVICE &&
                            m <= kHostMergeQueries && !host_merge_off();
    if (!host_merge) {
      ensure(g, H.gather_dists, S * per_shard * 4, "gathered distances");
      ensure(g, H.gather_ids, S * per_shard * 8, "gathered ids");
      if (by_vectors) ensure(g, H.gather_keys, S * per_shard * 8, "gathered tie keys");
    }
    // The shards start after what came before on the first device's stream
    // (the caller's work, the previous search's merge).
    if (!g.done_reached) CU(cuStreamWaitEvent, s0, H.done.get(), 0);
    H.start.record(s0);
    // Shard s's part: its search, into its gather slot (or its own buffers).
    auto start_shard = [&](uint32_t s) {
      ShardGroup::Shard& sh = *g.per[s];
      udf_index* x = shard_of(ix, s);
      CtxGuard sg(sh.ctx);
      const CUstream ss = s == 0 ? s0 : sh.stream;
      if (s != 0) CU(cuStreamWaitEvent, ss, H.start.get(), 0);
      udf_tensor q_s = qs, od_s, oi_s;
      udf_search_params p_s = p;
      std::vector<udf_capture_binding> caps, fcaps;
      std::deque<udf_tensor> copies;  // (a deque: the bindings point into it)
      const int32_t dev = x->mod->rt->ordinal;
      // Where its distances, ids and (by vectors) tie keys go.
      CUdeviceptr d_at = 0, i_at = 0, k_at = 0;
      if (host_merge) {
        sh.rows.ensure(ids_at + per_shard * (by_vectors ? 16 : 8), "shard rows");
        d_at = sh.rows.device(), i_at = d_at + ids_at, k_at = by_vectors ? d_at + keys_at : 0;
      } else if (sh.home_device) {
        d_at = H.gather_dists.get() + s * per_shard * 4;
        i_at = H.gather_ids.get() + s * per_shard * 8;
        k_at = by_vectors ? H.gather_keys.get() + s * per_shard * 8 : 0;
      } else {
        ensure(g, sh.dists, per_shard * 4, "shard distances");
        ensure(g, sh.ids, per_shard * 8, "shard ids");
        if (by_vectors) ensure(g, sh.keys, per_shard * 8, "shard tie keys");
        d_at = sh.dists.get(), i_at = sh.ids.get(), k_at = by_vectors ? sh.keys.get() : 0;
      }
      // By vectors the search returns tie keys in place of ids (resolved below).
      od_s = device_tensor(d_at, dev, UDF_DTYPE_F32, m, k);
      oi_s = device_tensor(by_vectors ? k_at : i_at, dev, UDF_DTYPE_I64, m, k);
      if (!sh.home_device) {
        if (qs.device != UDF_HOST_DEVICE) q_s = copy_to_shard(g, sh, qs, sh.queries, "query copy");
        caps = shard_bindings(g, sh, p.captures, p.n_captures, sh.caps, 8, copies);
        fcaps = shard_bindings(g, sh, p.filter_captures, p.n_filter_captures, sh.fcaps, 8, copies);
        if (!caps.empty()) p_s.captures = caps.data();
        if (!fcaps.empty()) p_s.filter_captures = fcaps.data();
      }
      search_shard(x, &q_s, &p_s, &od_s, &oi_s, ss, host_merge);
      if (by_vectors) resolve_keys(x, ss, k_at, i_at, per_shard);
      if (s != 0) sh.searched.record(ss);
    };
    if (S > 1 && g.distinct_runtimes && !shard_threads_off()) {
      if (!g.workers) g.workers = std::make_unique<ShardWorkers>(S - 1);
      g.workers->run(start_shard);
    } else {
      for (uint32_t s = 0; s < S; ++s) start_shard(s);
    }
    if (host_merge) {
      CU(cuStreamSynchronize, s0);
      for (uint32_t s = 1; s < S; ++s) g.per[s]->searched.sync();
      merge_on_host(g, *out_d, dstride, *out_i, istride, q0, m, k, ids_at, keys_at, max_order);
      g.done_reached = true;
      continue;
    }
    // The shards' results to the first device.
    if (g.transport == "nccl") {
      const NcclApi& nc = *g.nccl_api;
      nccl_check(nc.ncclGroupStart(), "ncclGroupStart");
      for (uint32_t s = 1; s < S; ++s) {
        ShardGroup::Shard& sh = *g.per[s];
        nccl_check(nc.ncclSend(sh.dists.as<void>(), per_shard * 4, kNcclUint8, 0, g.comms[s], sh.stream), "ncclSend");
        nccl_check(nc.ncclSend(sh.ids.as<void>(), per_shard * 8, kNcclUint8, 0, g.comms[s], sh.stream), "ncclSend");
        if (by_vectors)
          nccl_check(nc.ncclSend(sh.keys.as<void>(), per_shard * 8, kNcclUint8, 0, g.comms[s], sh.stream), "ncclSend");
        nccl_check(nc.ncclRecv(H.gather_dists.as<std::uint8_t>() + s * per_shard * 4, per_shard * 4, kNcclUint8, static_cast<int>(s),
                               g.comms[0], s0),
                   "ncclRecv");
        nccl_check(nc.ncclRecv(H.gather_ids.as<std::uint8_t>() + s * per_shard * 8, per_shard * 8, kNcclUint8, static_cast<int>(s),
                               g.comms[0], s0),
                   "ncclRecv");
        if (by_vectors)
          nccl_check(nc.ncclRecv(H.gather_keys.as<std::uint8_t>() + s * per_shard * 8, per_shard * 8, kNcclUint8,
                                 static_cast<int>(s), g.comms[0], s0),
                     "ncclRecv");
      }
      nccl_check(nc.ncclGroupEnd(), "ncclGroupEnd");
      // NCCL may have made another device's context current: the first one's again.
      CUcontext top = nullptr;
      CU(cuCtxPopCurrent, &top);
      CU(cuCtxPushCurrent, g.home_ctx);
    } else {
      for (uint32_t s = 1; s < S; ++s) {
        ShardGroup::Shard& sh = *g.per[s];
        CU(cuStreamWaitEvent, s0, sh.searched.get(), 0);
        if (sh.home_device) continue;
        CU(cuMemcpyPeerAsync, H.gather_dists.get() + s * per_shard * 4, g.home_ctx, sh.dists.get(), sh.ctx, per_shard * 4, s0);
        CU(cuMemcpyPeerAsync, H.gather_ids.get() + s * per_shard * 8, g.home_ctx, sh.ids.get(), sh.ctx, per_shard * 8, s0);
        if (by_vectors)
          CU(cuMemcpyPeerAsync, H.gather_keys.get() + s * per_shard * 8, g.home_ctx, sh.keys.get(), sh.ctx, per_shard * 8, s0);
      }
    }
    // The merge, into the outputs when they are contiguous device memory,
    // or into the pinned staging (mapped: no copy after the merge) when both
    // are host memory and a small batch; otherwise into scratch, copied on.
    udf_tensor od = rows_of(*out_d, dstride, q0, m), oi = rows_of(*out_i, istride, q0, m);
    const bool direct = od.device != UDF_HOST_DEVICE && oi.device != UDF_HOST_DEVICE && dstride == k && istride == k;
    const bool mapped = od.device == UDF_HOST_DEVICE && oi.device == UDF_HOST_DEVICE && m <= 1024;
    CUdeviceptr md, mi;
    if (direct) {
      md = reinterpret_cast<CUdeviceptr>(od.data);
      mi = reinterpret_cast<CUdeviceptr>(oi.data);
    } else if (mapped) {
      H.h_out.ensure(per_shard * 12, "staged results");
      md = H.h_out.device();
      mi = H.h_out.device() + per_shard * 4;
    } else {
      ensure(g, H.merged, per_shard * 12, "merged results");
      md = H.merged.get();
      mi = H.merged.get() + per_shard * 4;
    }
    udf_ivf_shard_merge_args_v1 a{H.gather_dists.as<const float>(), H.gather_ids.as<const long long>(),
                                  reinterpret_cast<float*>(md), reinterpret_cast<long long*>(mi), per_shard, S, m, k,
                                  max_order ? 1u : 0u, by_vectors ? H.gather_keys.as<const long long>() : nullptr};
    const uint64_t threads = S * per_shard;
    const auto grid = static_cast<unsigned>(std::min<uint64_t>((threads + UDF_IVF_INDEX_V1_THREADS - 1) / UDF_IVF_INDEX_V1_THREADS,
                                                               uint64_t(1) << 16));
    launch_on(s0, hrt->f_shard_merge, grid, 1, UDF_IVF_INDEX_V1_THREADS, 0, &a);
    if (mapped) {
      CU(cuStreamSynchronize, s0);
      host_rows(od, dstride, H.h_out.as<std::uint8_t>(), 4, m, k);
      host_rows(oi, istride, H.h_out.as<std::uint8_t>() + per_shard * 4, 8, m, k);
    } else if (!direct) {
      const bool host = od.device == UDF_HOST_DEVICE || oi.device == UDF_HOST_DEVICE;
      if (host) H.h_out.ensure(per_shard * 12, "staged results");
      put_rows(od, dstride, md, 4, m, k, s0, H.h_out.as<std::uint8_t>());
      put_rows(oi, istride, mi, 8, m, k, s0, H.h_out.as<std::uint8_t>() + per_shard * 4);
      if (host) {
        CU(cuStreamSynchronize, s0);
        host_rows(od, dstride, H.h_out.as<std::uint8_t>(), 4, m, k);
        host_rows(oi, istride, H.h_out.as<std::uint8_t>() + per_shard * 4, 8, m, k);
      }
    }
    if (blocking) {  // the wait reaches the end of this search: no `done` to record
      if (!mapped) CU(cuStreamSynchronize, s0);
      g.done_reached = true;
    } else {
      H.done.record(s0);
      g.done_reached = false;
    }
  }
  if (blocking) {
    ix->stats = udf_search_stats{};
    ix->stats.total_ms = now_ms() - t0;
    ix->stats.chunks = chunks;
  }
}

}  // namespace udf::rt

namespace {

// The modules of a sharded index: each holds `metric` with the first's artifact.
void check_modules(udf_module* const* modules, size_t n, const char* metric) {
  require(modules != nullptr, "modules is NULL");
  require(n >= 1 && n <= 64, "n_modules = " + std::to_string(n) + " must be in 1 .. 64");
  require(metric != nullptr, "metric is NULL");
  std::string key;
  for (size_t i = 0; i < n; ++i) {
    require(modules[i] != nullptr, "modules[" + std::to_string(i) + "] is NULL");
    size_t mi = 0;
    if (udf_module_find_metric(modules[i], metric, &mi) != UDF_OK)
      fail(UDF_ERROR_INVALID_ARGUMENT, "modules[" + std::to_string(i) + "]: " + udf_last_error());
    const std::string& k = modules[i]->manifest.artifacts[mi].cache_key;
    if (i == 0) key = k;
    if (k != key)
      fail(UDF_ERROR_MISMATCH, "modules[" + std::to_string(i) + "] holds another artifact for metric " + metric +
                                   " than modules[0] (cache key " + k.substr(0, 16) + "..., modules[0] has " +
                                   key.substr(0, 16) + "...): a sharded index takes the same module on every device");
  }
}

using ShardPtr = std::unique_ptr<udf_index, void (*)(udf_index*)>;

// A udf_shard_layout, checked: UDF_SHARD_BY_LISTS or UDF_SHARD_BY_VECTORS.
uint32_t checked_layout(uint32_t layout) {
  if (layout == UDF_SHARD_DEFAULT) return UDF_SHARD_BY_VECTORS;
  require(layout == UDF_SHARD_BY_LISTS || layout == UDF_SHARD_BY_VECTORS,
          [&] { return "shard_layout = " + std::to_string(layout) + " is not a udf_shard_layout (0, 1 lists, 2 vectors)"; });
  return layout;
}

// The top-level index and its (empty) shards, one a module.
std::unique_ptr<udf_index> new_sharded(udf_module* const* modules, size_t n, const char* metric, uint32_t dim, uint32_t n_lists,
                                       uint32_t layout) {
  auto ix = new_index(modules[0], metric, dim, n_lists);
  ix->shard_layout = checked_layout(layout);
  for (size_t i = 0; i < n; ++i) {
    CtxGuard g(modules[i]->rt->ctx);
    ShardPtr sh(new_index(modules[i], metric, dim, n_lists).release(), udf_index_destroy);
    ++modules[i]->live_indexes;  // udf_index_destroy takes it back
    ix->shards.push_back(std::move(sh));
  }
  return ix;
}

// The search's transport and buffers: NCCL when every shard is on a device
// of its own and NCCL loads and initializes, else peer copies (with peer
// access where the devices allow it).
void make_group(udf_index* ix) {
  auto g = std::make_unique<ShardGroup>();
  udf_runtime* hrt = ix->shards[0]->mod->rt;
  g->home_ctx = hrt->ctx;
  std::vector<int> ordinals;
  std::vector<const udf_runtime*> runtimes;
  for (auto& sh : ix->shards) {
    udf_runtime* rt = sh->mod->rt;
    runtimes.push_back(rt);
    auto s = std::make_unique<ShardGroup::Shard>();
    s->ctx = rt->ctx;
    s->stream = rt->stream;
    s->home_device = rt->ordinal == hrt->ordinal;
    ordinals.push_back(rt->ordinal);
    g->per.push_back(std::move(s));
  }
  {
    CtxGuard hg(hrt->ctx);
    g->home = std::make_unique<ShardGroup::Home>();
  }
  std::sort(runtimes.begin(), runtimes.end());
  g->distinct_runtimes = std::adjacent_find(runtimes.begin(), runtimes.end()) == runtimes.end();
  std::vector<int> sorted = ordinals;
  std::sort(sorted.begin(), sorted.end());
  const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  if (ix->shards.size() > 1 && distinct) {
    std::string why;
    if (const NcclApi* nc = nccl(&why)) {
      std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
      CtxGuard hg(hrt->ctx);  // ncclCommInitAll switches devices; the guard restores the caller's context
      const ncclResult_t r = nc->ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), ordinals.data());
      if (r == 0) {
        g->comms = std::move(comms);
        g->nccl_api = nc;
        g->transport = "nccl";
      } else {
        g->why_not_nccl = std::string("ncclCommInitAll: ") + nc->ncclGetErrorString(r);
      }
    } else {
      g->why_not_nccl = why;
    }
  }
  // Peer access (both ways) where the devices allow it: the peer copies
  // then go device to device.
  for (size_t i = 1; i < ix->shards.size(); ++i) {
    udf_runtime* rt = ix->shards[i]->mod->rt;
    if (rt->ordinal == hrt->ordinal) continue;
    auto enable = [](udf_runtime* from, udf_runtime* to) {
      int can = 0;
      CU(cuDeviceCanAccessPeer, &can, from->dev, to->dev);
      if (!can) return;
      CtxGuard cg(from->ctx);
      const CUresult r = cuda().cuCtxEnablePeerAccess(to->ctx, 0);
      if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) cu_check(r, "cuCtxEnablePeerAccess");
    };
    enable(hrt, rt);
    enable(rt, hrt);
  }
  ix->group = std::move(g);
}

}  // namespace

extern "C" {

UDF_API udf_status udf_index_build_sharded(udf_module* const* modules, size_t n_modules, const char* metric,
                                           const udf_tensor* data, const udf_tensor* ids, const udf_index_params* params,
                                           udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    check_modules(modules, n_modules, metric);
    const udf_index_params p = checked_build_params(params, data);
    udf_runtime* hrt = modules[0]->rt;
    auto ix = new_sharded(modules, n_modules, metric, static_cast<uint32_t>(data->cols), p.n_lists, p.shard_layout);
    ix->balance = p.balance;
    for (auto& sh : ix->shards) sh->balance = p.balance;
    udf_index* first = ix->shards[0].get();
    int64_t stride = 0;
    std::vector<int64_t> id_list;
    {
      CtxGuard g(hrt->ctx);
      stride = check_tensor(hrt, data, "data", to_dtype(ix->elem), data->cols);
      check_ids(hrt, ids, data->rows, id_list);
      make_centroids(first, data, stride, p);  // the one-GPU build's centroids
    }
    share_centroids(ix.get());
    make_group(ix.get());
    add_rows_sharded(ix.get(), data, stride, ids ? id_list.data() : nullptr, &p);
    ++modules[0]->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_build_chunked(udf_module* const* modules, size_t n_modules, const char* metric, size_t n_chunks,
                                           udf_chunk_fn chunk, void* user, const udf_index_params* params, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    require(chunk != nullptr, "chunk (the callback) is NULL");
    check_modules(modules, n_modules, metric);
    auto source = [&](size_t c, udf_tensor& data, udf_tensor& ids) {
      data = udf_tensor{};
      ids = udf_tensor{};
      const int r = chunk(user, c, &data, &ids);
      if (r != 0)
        fail(UDF_ERROR_IO, "the chunk callback returned " + std::to_string(r) + " for chunk " + std::to_string(c) +
                               " of " + std::to_string(n_chunks));
    };
    require(n_chunks >= 1, "n_chunks = 0: there must be at least one chunk");
    udf_tensor first{}, first_ids{};
    source(0, first, first_ids);  // its width, and the build's checks
    const udf_index_params p = checked_build_params(params, &first);
    std::unique_ptr<udf_index> ix;
    if (n_modules == 1) {
      CtxGuard g(modules[0]->rt->ctx);
      ix = new_index(modules[0], metric, static_cast<uint32_t>(first.cols), p.n_lists);
      ix->balance = p.balance;
    } else {
      ix = new_sharded(modules, n_modules, metric, static_cast<uint32_t>(first.cols), p.n_lists, p.shard_layout);
      ix->balance = p.balance;
      for (auto& sh : ix->shards) sh->balance = p.balance;
      make_group(ix.get());
    }
    build_in_chunks(ix.get(), n_chunks, source, p);
    ++modules[0]->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_load_sharded(udf_module* const* modules, size_t n_modules, const char* path, udf_index** out) {
  return udf_index_load_sharded_layout(modules, n_modules, path, UDF_SHARD_DEFAULT, out);
}

UDF_API udf_status udf_index_load_sharded_layout(udf_module* const* modules, size_t n_modules, const char* path,
                                                 uint32_t shard_layout, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    checked_layout(shard_layout);  // (before the file is read)
    const IndexFile f = read_index_file(path);
    const std::string P = path;
    const IndexFileHeader& h = f.header;
    require(modules != nullptr, "modules is NULL");
    require(n_modules >= 1 && n_modules <= 64, "n_modules = " + std::to_string(n_modules) + " must be in 1 .. 64");
    for (size_t i = 0; i < n_modules; ++i) {
      require(modules[i] != nullptr, "modules[" + std::to_string(i) + "] is NULL");
      check_index_file_module(modules[i], h, P);
    }
    check_modules(modules, n_modules, h.symbol.c_str());
    auto lists = parse_index_file_lists(f.bytes, h, P);
    if (!lists) fail(UDF_ERROR_BAD_FORMAT, lists.error().message());
    auto ix = new_sharded(modules, n_modules, h.symbol.c_str(), h.dim, h.n_lists, shard_layout);
    if ((h.coarse & 0xFF) != ix->coarse || ((h.coarse & 0x100) != 0) != ix->normalize)
      fail(UDF_ERROR_MISMATCH, P + ": coarse metric differs from metric '" + h.symbol + "'");
    ix->size = h.size;
    ix->next_id = h.next_id;
    ix->balance = h.balance;
    ix->centroids = std::move(lists->centroids);
    std::vector<uint64_t> sizes(h.n_lists);
    ix->sizes.resize(h.n_lists);
    for (uint32_t l = 0; l < h.n_lists; ++l) sizes[l] = ix->sizes[l] = static_cast<uint32_t>(lists->ids[l].size());
    ix->max_list_size = *std::max_element(ix->sizes.begin(), ix->sizes.end());
    const size_t S = ix->shards.size();
    if (!ix->by_vectors()) ix->shard_lists = plan_shard_lists(sizes, static_cast<uint32_t>(n_modules));
    for (size_t s = 0; s < S; ++s) {
      udf_index* sh = ix->shards[s].get();
      CtxGuard g(sh->mod->rt->ctx);
      sh->next_id = h.next_id;
      sh->balance = h.balance;
      sh->centroids = ix->centroids;
      // Its rows of list l: by vectors part s of every list, by lists its range's whole lists.
      auto part = [&](uint32_t l) -> std::pair<uint32_t, uint32_t> {
        const uint64_t n = sizes[l];
        if (ix->by_vectors()) return {uint32_t(part_begin(n, s, S)), uint32_t(part_begin(n, s + 1, S))};
        const bool mine = l >= ix->shard_lists[s] && l < ix->shard_lists[s + 1];
        return {0u, mine ? uint32_t(n) : 0u};
      };
      upload_lists(sh, lists->ids, lists->vecs, part);
      sh->size = 0;
      for (uint32_t l = 0; l < ix->n_lists; ++l) sh->size += sh->sizes[l];
      if (ix->by_vectors()) keep_equal_parts(sh, s, S, sizes);
    }
    make_group(ix.get());
    ++modules[0]->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_shard_count(const udf_index* ix, size_t* count) {
  return guarded([&] {
    require(ix && count, "index or count is NULL");
    *count = ix->sharded() ? ix->shards.size() : 1;
  });
}

UDF_API udf_status udf_index_shard_info(const udf_index* ix, size_t shard, udf_shard_info* out) {
  return guarded([&] {
    require(ix && out, "index or out is NULL");
    const size_t n = ix->sharded() ? ix->shards.size() : 1;
    require(shard < n, "shard " + std::to_string(shard) + " is out of range: the index has " + std::to_string(n));
    *out = udf_shard_info{};
    if (!ix->sharded()) {
      out->device = ix->mod->rt->ordinal;
      out->layout = UDF_SHARD_BY_LISTS;
      out->list_begin = 0;
      out->list_end = ix->n_lists;
      out->size = ix->size;
      return;
    }
    const udf_index* sh = ix->shards[shard].get();
    out->device = sh->mod->rt->ordinal;
    out->layout = ix->shard_layout;
    out->list_begin = ix->by_vectors() ? 0 : ix->shard_lists[shard];
    out->list_end = ix->by_vectors() ? ix->n_lists : ix->shard_lists[shard + 1];
    out->size = sh->size;
  });
}

UDF_API const char* udf_index_shard_transport(const udf_index* ix) {
  if (!ix || !ix->sharded() || ix->shards.size() < 2) return "none";
  return ix->group->transport.c_str();
}

}  // extern "C"

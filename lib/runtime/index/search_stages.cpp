// The search's stages on the stream: the queries and the coarse probe
// (stages 1 and 2), the scan (4) and the merge (5), and the copy of a
// chunk's results to host outputs once the stream has finished it.
#include <algorithm>
#include <cstring>

#include "cuda/launch.h"
#include "index/search_request.h"
#include "index/testing_paths.h"

namespace udf::rt {

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
  // Query bounds (ivf_flat_v1.h): items skip candidates that finished rows
  // of their query already beat k times.  The words are all
  // UDF_IVF_V1_BOUND_NONE between searches: set so when allocated, reset by
  // the tail merge, or here after a scan without one.  The tests'
  // kTestingNoQueryBound leaves them out.
  const bool bound = c.scan->query_bound && !testing_path(kTestingNoQueryBound);
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

}  // namespace udf::rt

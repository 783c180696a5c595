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
// takes the next slice while the coarse probe computes this one.  `probe`:
// which of the slice's rows this device probes when the probe is shared out.
void stage_queries_and_coarse(Request& request, Chunk& chunk, const std::uint8_t* staged, uint32_t s0, uint32_t n, bool side,
                              SliceProbe probe) {
  udf_index* ix = request.ix;
  const size_t row_bytes = size_t(ix->dim) * ix->esize;
  CUdeviceptr rows = 0;
  uint64_t stride = 0;
  const std::uint8_t* inline_rows = nullptr;
  if (request.queries->device == UDF_HOST_DEVICE) {
    const CUstream up = side ? request.rt->aux_stream : request.stream;
    if (side && s0 == 0) {  // after what the stream has queued (the previous search may read the buffer)
      ix->scratch.upload_start.record(request.stream);
      CU(cuStreamWaitEvent, up, ix->scratch.upload_start.get(), 0);
    }
    // A tiny batch's queries (a direct schedule, up to 1 KB) ride in the
    // coarse kernel's launch, which stores them for the scan: no copy
    // engine round trip before the first kernel (nearest_centroids).
    if (chunk.direct && ix->rows_mode == udf_index::RowsMode::None && !side && !ix->coarse_copy() &&
        n * row_bytes <= UDF_IVF_COARSE_INLINE_V1_BYTES)
      inline_rows = staged;
    else
      CU(cuMemcpyHtoDAsync, ix->scratch.queries.get() + s0 * row_bytes, staged, n * row_bytes, up);
    if (side) {
      ix->scratch.uploaded.record(up);
      CU(cuStreamWaitEvent, request.stream, ix->scratch.uploaded.get(), 0);
    }
    rows = ix->scratch.queries.get() + s0 * row_bytes;
    stride = ix->dim;
  } else {
    rows = reinterpret_cast<CUdeviceptr>(request.queries->data) + size_t((chunk.q0 + s0) * request.qstride) * ix->esize;
    stride = static_cast<uint64_t>(request.qstride);
  }
  if (ix->normalize) {
    const uint32_t el = static_cast<uint32_t>(to_dtype(ix->elem));
    convert(request.rt, request.stream, rows, el, stride, ix->scratch.qnorm.get() + s0 * row_bytes, el, n, ix->dim, true);
    rows = ix->scratch.qnorm.get() + s0 * row_bytes;
    stride = ix->dim;
  }
  if (s0 == 0) {  // where the chunk's queries are, for the scan
    chunk.qdev = rows;
    chunk.qs = stride;
  }
  if (ix->rows_mode != udf_index::RowsMode::None) {  // rows lists: the probes are known (index/rows_search.h)
    udf_ivf_rows_args_v1 a{};
    const bool exact = ix->rows_mode == udf_index::RowsMode::Exact;
    const uint64_t threads = exact ? uint64_t(n) * request.n_probes : n;
    const auto grid = static_cast<unsigned>(std::min<uint64_t>((threads + UDF_IVF_INDEX_V1_THREADS - 1) / UDF_IVF_INDEX_V1_THREADS,
                                                               uint64_t(request.rt->info.sm_count) * 32));
    a.n_queries = n;
    if (exact) {  // every query probes every tile (list-major schedule)
      a.probes = ix->scratch.probes.as<uint32_t>() + size_t(s0) * request.n_probes;
      a.n_probes = request.n_probes;
      launch_on(request.stream, request.rt->kernels[IndexKernel::rows_probes], grid, 1, UDF_IVF_INDEX_V1_THREADS, 0, &a);
    } else {  // refine: query q's own list q, the direct schedule (search_schedule.cpp, plan_schedule)
      a.sizes = ix->d_sizes.as<uint32_t>();
      a.list_base = static_cast<uint32_t>(chunk.q0);
      a.sched_items = chunk.direct_sched.items;
      a.sched_pairs = chunk.direct_sched.pairs;
      a.query_rows = chunk.direct_sched.query_rows;
      a.query_stats = chunk.direct_sched.query_stats;
      a.row_ranges = chunk.direct_sched.row_ranges;
      a.row0 = s0;
      a.chunk_rows = chunk.nq;
      launch_on(request.stream, request.rt->kernels[IndexKernel::rows_direct], grid, 1, UDF_IVF_INDEX_V1_THREADS, 0, &a);
    }
    return;
  }
  // A shared coarse probe (SearchCall::CoarseShare): this device's rows of
  // the slice only; the exchange brings the others'.  (A direct schedule,
  // written by the selection, takes every row.)
  uint32_t a = s0, b = s0 + n;
  if (request.share && !chunk.direct) {
    const CoarseShare& share = *request.share;
    if (probe == SliceProbe::part) {
      a = s0 + static_cast<uint32_t>(uint64_t(n) * share.part / share.parts);
      b = s0 + static_cast<uint32_t>(uint64_t(n) * (share.part + 1) / share.parts);
    } else if (probe == SliceProbe::none) {
      a = b;
    }
    if (a >= b) return;
    chunk.probed.emplace_back(a, b);
  }
  // The probe's rows a .. b: the queries as the scan reads them, or their
  // copy scaled by the coarse weights.
  CUdeviceptr at = rows + size_t(a - s0) * stride * ix->esize;
  uint32_t at_elem = static_cast<uint32_t>(to_dtype(ix->elem));
  uint64_t at_stride = stride;
  if (!ix->coarse_weights.empty()) {
    const CUdeviceptr scaled = ix->scratch.qcoarse.get() + size_t(a) * ix->dim * 4;
    convert(request.rt, request.stream, at, at_elem, stride, scaled, 0, b - a, ix->dim, false, 0, ix->coarse_scale());
    at = scaled;
    at_elem = 0;
    at_stride = ix->dim;
  }
  nearest_centroids(request.rt, request.stream, at, at_elem, at_stride, b - a, ix->d_centroids.get(), ix->n_lists, ix->dim,
                    ix->coarse, request.n_probes, ix->scratch.probes.get() + size_t(a) * request.n_probes * 4, 0, ix->scratch.keys,
                    chunk.direct ? &chunk.direct_sched : nullptr, inline_rows);
}

// Stage 4: the UDF scan over every work item (launched on the upper bound;
// items past the real ones are empty).
void stage_scan(Request& request, Chunk& chunk) {
  udf_index* ix = request.ix;
  grow(ix, ix->scratch.cand_dists, size_t(chunk.rows_max) * request.k * 4, "candidate distances");
  grow(ix, ix->scratch.cand_slots, size_t(chunk.rows_max) * request.k * 4, "candidate slots");
  udf_ivf_scan_args_v1 sa{};
  sa.list_data = ix->rows_mode != udf_index::RowsMode::None ? reinterpret_cast<const void*>(ix->rows_data)
                                                            : ix->d_list_data.as<const void>();
  sa.list_offsets = ix->d_offsets.as<const uint64_t>();
  sa.list_sizes = ix->d_sizes.as<const uint32_t>();
  sa.queries = reinterpret_cast<const void*>(chunk.qdev);
  sa.items = ix->scratch.items.as<const udf_ivf_work_item_v1>();
  sa.pairs = ix->scratch.pairs.as<const udf_ivf_pair_v1>();
  sa.cand_dists = ix->scratch.cand_dists.as<float>();
  sa.cand_slots = ix->scratch.cand_slots.as<uint32_t>();
  sa.query_stride = chunk.qs;
  sa.n_items = chunk.items_max;
  sa.dim = ix->dim;
  sa.dim_padded = ix->dim_padded;
  sa.k = request.k;
  sa.queries_per_item = chunk.qpi;
  if (request.art->acc == AccType::F32) {
    const float f = static_cast<float>(request.art->initial.value);
    std::memcpy(&sa.acc_init, &f, 4);
  } else {
    const int32_t i = static_cast<int32_t>(request.art->initial.value);
    std::memcpy(&sa.acc_init, &i, 4);
  }
  for (size_t w = 0; w < request.art->initial_state.size() && w < UDF_ABI_METRIC_V2_STATE_WORDS; ++w) {
    if (request.art->acc == AccType::F32) {
      const float f = static_cast<float>(request.art->initial_state[w].value);
      std::memcpy(&sa.state_init[w], &f, 4);
    } else {
      const int32_t i = static_cast<int32_t>(request.art->initial_state[w].value);
      std::memcpy(&sa.state_init[w], &i, 4);
    }
  }
  sa.stage_rows = chunk.stage_rows;
  sa.state_words = request.art->shape == MetricShape::State ? state_words_of(*request.art) : 0;
  sa.n_captures = static_cast<uint32_t>(request.art->captures.size());
  std::copy(std::begin(request.caps), std::end(request.caps), sa.captures);
  // The scan's ids: the filter's and a v2 metric's ctx->id; otherwise only
  // the tail merge writes them, so a shard by vectors gives its tie keys.
  sa.ids = ix->d_keys.get() && !scan_reads_ids(request) ? ix->d_keys.as<const long long>() : ix->d_ids.as<const long long>();
  sa.query_base = static_cast<uint32_t>(chunk.q0);
  sa.n_filter_captures = request.n_fcaps;
  std::copy(std::begin(request.fcaps), std::end(request.fcaps), sa.filter_captures);
  if (chunk.tail) {
    sa.query_done = ix->scratch.query_done.as<uint32_t>();
    sa.query_row_ranges = chunk.direct_sched.row_ranges;
    sa.out_dists = chunk.out_dists;
    sa.out_ids = chunk.out_ids;
  }
  // Query bounds (ivf_flat_v1.h): items skip candidates that finished rows
  // of their query already beat k times.  The words are all
  // UDF_IVF_V1_BOUND_NONE between searches: set so when allocated, reset by
  // the tail merge, or here after a scan without one.  The tests'
  // kTestingNoQueryBound leaves them out.
  const bool bound = chunk.scan->query_bound && !testing_path(kTestingNoQueryBound);
  if (bound) {
    if (ix->scratch.query_bound.bytes() < size_t(chunk.nq) * 4) {
      ix->quiesce();
      ix->scratch.query_bound.ensure(size_t(chunk.nq) * 4, "query bounds");
      CU(cuMemsetD32Async, ix->scratch.query_bound.get(), UDF_IVF_V1_BOUND_NONE, ix->scratch.query_bound.bytes() / 4, request.stream);
    }
    sa.query_bound = ix->scratch.query_bound.as<uint32_t>();
  }
  launch_on(request.stream, chunk.scan->fn, chunk.items_max, 1, UDF_IVF_V1_BLOCK_THREADS, chunk.scan_smem, &sa);
  if (bound && !chunk.tail) CU(cuMemsetD32Async, ix->scratch.query_bound.get(), UDF_IVF_V1_BOUND_NONE, chunk.nq, request.stream);
}

// Where the chunk's merged results go (before the scan: a tail merge writes
// them): the outputs when they are contiguous device memory; small batches
// with host outputs the pinned staging directly (mapped), saving the copy
// engine's round trip after the merge (a few microseconds of a batch-1
// search); otherwise scratch, copied on by stage_merge.
void merge_outputs(Request& request, Chunk& chunk, std::uint8_t* h_out) {
  udf_index* ix = request.ix;
  const uint32_t k = request.k;
  const size_t dist_bytes = staged_dist_bytes(chunk.nq, k);
  constexpr uint32_t kMappedOut = 1024;
  if (request.direct_out) {
    chunk.out_dists = static_cast<float*>(request.out_d->data) + size_t(chunk.q0) * k;
    chunk.out_ids = static_cast<long long*>(request.out_i->data) + size_t(chunk.q0) * k;
    chunk.out_final = true;
  } else if (h_out && chunk.nq <= kMappedOut) {
    const CUdeviceptr o = ix->scratch.h_out.device();
    chunk.out_dists = reinterpret_cast<float*>(o);
    chunk.out_ids = reinterpret_cast<long long*>(o + dist_bytes);
    chunk.out_final = true;
  } else {
    grow(ix, ix->scratch.out, staged_result_bytes(size_t(request.chunk_queries), k), "results");
    chunk.out_dists = ix->scratch.out.as<float>();
    chunk.out_ids = reinterpret_cast<long long*>(ix->scratch.out.as<std::uint8_t>() + dist_bytes);
  }
}

// Stage 5: per query the k best of its rows (unless the scan merged them),
// then on to the outputs (host ones through pinned staging, copied out by
// finish_chunk).
void stage_merge(Request& request, Chunk& chunk, std::uint8_t* h_out) {
  udf_index* ix = request.ix;
  const uint32_t k = request.k, nq = chunk.nq;
  if (!chunk.tail) {
    udf_ivf_merge_args_v1 ma{};
    ma.cand_dists = ix->scratch.cand_dists.as<const float>();
    ma.cand_slots = ix->scratch.cand_slots.as<const uint32_t>();
    ma.query_rows = chunk.sched.query_rows;
    ma.ids = ix->d_keys.get() ? ix->d_keys.as<const long long>() : ix->d_ids.as<const long long>();  // (shards by vectors: tie keys)
    ma.out_dists = chunk.out_dists;
    ma.out_ids = chunk.out_ids;
    ma.n_queries = nq;
    ma.k = k;
    launch_on(request.stream, request.merge->fn, nq, 1, UDF_IVF_V1_BLOCK_THREADS, request.merge_smem, &ma);
  }
  if (chunk.out_final) return;
  const size_t dist_bytes = staged_dist_bytes(nq, k);
  if (h_out) {  // one copy of both into pinned memory
    CU(cuMemcpyDtoHAsync, h_out, ix->scratch.out.get(), staged_result_bytes(nq, k), request.stream);
    return;
  }
  // Strided device outputs (and nothing on the host): a copy per row.
  auto put = [&](const udf_tensor* t, int64_t stride, CUdeviceptr src, size_t es) {
    for (uint32_t q = 0; q < nq; ++q)
      CU(cuMemcpyDtoDAsync,
         reinterpret_cast<CUdeviceptr>(static_cast<std::uint8_t*>(t->data) + size_t((chunk.q0 + q) * stride) * es),
         src + size_t(q) * k * es, k * es, request.stream);
  };
  put(request.out_d, request.dstride, ix->scratch.out.get(), 4);
  put(request.out_i, request.istride, ix->scratch.out.get() + dist_bytes, 8);
}

// Whether finish_chunk copies one of the chunk's outputs on the host pool: a
// host output of contiguous rows (stride k) large enough for two parts.
bool finish_uses_pool(const Request& request, uint32_t nq) {
  auto pooled = [&](const udf_tensor* t, int64_t stride, size_t es) {
    return t->device == UDF_HOST_DEVICE && stride == static_cast<int64_t>(request.k) && copy_is_pooled(size_t(nq) * request.k * es);
  };
  return pooled(request.out_d, request.dstride, 4) || pooled(request.out_i, request.istride, 8);
}

// After the stream has finished a chunk: its results from pinned memory to the outputs.
void finish_chunk(Request& request, const Chunk& chunk, const std::uint8_t* h_out) {
  const uint32_t k = request.k, nq = chunk.nq;
  const size_t dist_bytes = staged_dist_bytes(nq, k);
  auto put = [&](const udf_tensor* t, int64_t stride, const std::uint8_t* src, size_t es) {
    auto* base = static_cast<std::uint8_t*>(t->data) + size_t(chunk.q0 * stride) * es;
    if (t->device == UDF_HOST_DEVICE) {
      // Contiguous rows on the host pool (woken when the scan ended: index/search.cpp).
      host_rows_to(request.rt, base, size_t(stride) * es, src, nq, k * es);
    } else {  // the other output is on the host: this one goes back up
      for (uint32_t q = 0; q < nq; ++q)
        CU(cuMemcpyHtoDAsync, reinterpret_cast<CUdeviceptr>(base + size_t(q) * stride * es), src + size_t(q) * k * es,
           k * es, request.stream);
      CU(cuStreamSynchronize, request.stream);
    }
  };
  put(request.out_d, request.dstride, h_out, 4);
  put(request.out_i, request.istride, h_out + dist_bytes, 8);
}

}  // namespace udf::rt

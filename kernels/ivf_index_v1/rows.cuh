// Stage rows: the lists of an exact search or a refine, whose scans read a
// dataset's rows (ivf_flat_v1.h, ROWS LAYOUT): slot -> row tables, every
// query's probes, and each query's candidates checked and compacted.
#pragma once
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_rows_iota(udf_ivf_rows_args_v1 a) {
  for (uint64_t s = grid_thread(); s < a.n_slots; s += grid_threads())
    a.ids[s] = s < a.n_rows ? static_cast<long long>(s) : 0ll;
}

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_rows_probes(udf_ivf_rows_args_v1 a) {
  const uint64_t total = uint64_t(a.n_queries) * a.n_probes;
  for (uint64_t t = grid_thread(); t < total; t += grid_threads()) {
    const uint32_t q = static_cast<uint32_t>(t / a.n_probes), p = static_cast<uint32_t>(t % a.n_probes);
    a.probes[t] = a.probe_base + p + q * a.probe_step;
  }
}

// One block a query.  Each round takes kThreads candidates in order; a
// candidate is kept when it is a row (0 .. n_rows-1) that no earlier
// candidate of the query names; the kept ones are written in order after
// those of earlier rounds.  Repeats are found by comparing with every
// earlier candidate (m^2 / 2 reads from L1 a query: refine's m is a few
// hundred).
extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_rows_candidates(udf_ivf_rows_args_v1 a) {
  const uint32_t q = blockIdx.x;
  if (q >= a.n_queries) return;
  const long long* c = a.candidates + uint64_t(q) * a.cand_stride;
  long long* out = a.ids + uint64_t(q) * a.m_pad;
  __shared__ uint32_t warp_kept[kThreads / 32];
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t written = 0;  // block-uniform
  for (uint32_t j0 = 0; j0 < a.m; j0 += kThreads) {
    const uint32_t j = j0 + threadIdx.x;
    bool keep = false;
    if (j < a.m) {
      const long long id = c[j];
      if (id < -1 || (id >= 0 && static_cast<uint64_t>(id) >= a.n_rows)) {
        atomicMin(a.bad, static_cast<unsigned long long>(q) * a.m + j);
      } else if (id >= 0) {
        keep = true;
        for (uint32_t i = 0; i < j && keep; ++i) keep = c[i] != id;
      }
    }
    const uint32_t ballot = __ballot_sync(kFull, keep);
    if (lane == 0) warp_kept[warp] = __popc(ballot);
    __syncthreads();
    uint32_t before = written, total = 0;
    for (uint32_t w = 0; w < kThreads / 32; ++w) {
      if (w < warp) before += warp_kept[w];
      total += warp_kept[w];
    }
    if (keep) out[before + __popc(ballot & ((1u << lane) - 1u))] = c[j];
    written += total;
    __syncthreads();  // warp_kept is read before the next round writes it
  }
  for (uint32_t i = written + threadIdx.x; i < a.m_pad; i += kThreads) out[i] = 0;
  if (threadIdx.x == 0) {
    a.sizes[q] = written;
    a.offsets[q] = uint64_t(q) * a.m_pad;
  }
}

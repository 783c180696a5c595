// Stage schedule: the search schedule built on the GPU (see the header).
// Each phase is a device function over (thread, n_threads), so the
// small-batch kernel runs them all in one block and large batches run them
// as separate grids.
#pragma once
#include "common.cuh"

namespace {

constexpr uint32_t kPlanThreads = UDF_IVF_SCHED_V1_PLAN_THREADS;
constexpr uint32_t kNoTile = 0xFFFFFFFFu;


// NEAR FIRST (the header): the schedule's lists, and pair i's among them.
__device__ __forceinline__ uint32_t sched_lists(const udf_ivf_sched_args_v1& a) { return a.near_first ? 2 * a.n_lists : a.n_lists; }
__device__ __forceinline__ uint32_t sched_list(const udf_ivf_sched_args_v1& a, uint64_t i) {
  const uint32_t l = a.probes[i];
  return a.near_first && i % a.n_probes != 0 ? a.n_lists + l : l;
}
__device__ __forceinline__ uint32_t sched_size(const udf_ivf_sched_args_v1& a, uint32_t l) {
  return a.list_sizes[l < a.n_lists ? l : l - a.n_lists];
}

__device__ void sched_zero(const udf_ivf_sched_args_v1& a, uint32_t t, uint32_t nt) {
  for (uint32_t l = t; l < sched_lists(a); l += nt) a.counts[l] = a.fill[l] = 0;
  uint32_t* items = static_cast<uint32_t*>(a.items);
  for (uint64_t i = t; i < uint64_t(a.items_max) * 6; i += nt) items[i] = 0;
}

__device__ void sched_count(const udf_ivf_sched_args_v1& a, uint64_t t, uint64_t nt) {
  for (uint64_t i = t; i < uint64_t(a.n_queries) * a.n_probes; i += nt) atomicAdd(a.counts + sched_list(a, i), 1u);
}

// BLOCK HISTOGRAMS (the large batches' count and scatter kernels, when the
// runtime gives them 4 bytes of dynamic shared memory a schedule list): a
// block counts its run of pairs in shared memory and adds each list's count
// to global memory once: an atomic of every pair on its list's global word
// serializes on the few hot words, in proportion to the pairs a list.  The
// blocks that histogram are few enough that their own adds stay under an
// eighth of the pairs (at least 8 pairs a list a block).
__device__ __forceinline__ uint32_t dynamic_smem_bytes() {
  uint32_t n;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
  return n;
}
__device__ __forceinline__ bool sched_block_hist(const udf_ivf_sched_args_v1& a) {
  return dynamic_smem_bytes() >= 4 * sched_lists(a);
}
// This block's run of pairs [i0, i1) among the histogram blocks (the first
// max(1, min(grid, pairs / (8 * lists)))); false for a block past them.
__device__ __forceinline__ bool sched_hist_run(const udf_ivf_sched_args_v1& a, uint64_t& i0, uint64_t& i1) {
  const uint64_t pairs = uint64_t(a.n_queries) * a.n_probes, per = 8 * uint64_t(sched_lists(a));
  const uint64_t b = pairs / per;
  const uint32_t blocks = b < 1 ? 1u : b > gridDim.x ? gridDim.x : static_cast<uint32_t>(b);
  if (blockIdx.x >= blocks) return false;
  i0 = pairs * blockIdx.x / blocks;
  i1 = pairs * (blockIdx.x + 1) / blocks;
  return true;
}
// f(i, list) for every pair i in [i0, i1), the thread's share: kAhead
// pairs' probes loaded before any is used (a block's run is thousands of
// pairs: one at a time, their loads' latency would be the kernel's time).
template <class F> __device__ __forceinline__ void sched_each_pair(const udf_ivf_sched_args_v1& a, uint64_t i0, uint64_t i1, F f) {
  constexpr int kAhead = 8;
  for (uint64_t base = i0 + threadIdx.x; base < i1; base += uint64_t(kAhead) * kThreads) {
    uint32_t l[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const uint64_t i = base + uint64_t(u) * kThreads;
      l[u] = i < i1 ? sched_list(a, i) : 0u;
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const uint64_t i = base + uint64_t(u) * kThreads;
      if (i < i1) f(i, l[u]);
    }
  }
}
// hist[l] = the pairs of list l in [i0, i1).  Block-wide; ends with a barrier.
__device__ void sched_hist(const udf_ivf_sched_args_v1& a, uint64_t i0, uint64_t i1, uint32_t* hist) {
  for (uint32_t l = threadIdx.x; l < sched_lists(a); l += kThreads) hist[l] = 0;
  __syncthreads();
  sched_each_pair(a, i0, i1, [&](uint64_t, uint32_t l) { atomicAdd(hist + l, 1u); });
  __syncthreads();
}
__device__ void sched_count_blocks(const udf_ivf_sched_args_v1& a, uint32_t* hist) {
  uint64_t i0, i1;
  if (!sched_hist_run(a, i0, i1)) return;
  sched_hist(a, i0, i1, hist);
  for (uint32_t l = threadIdx.x; l < sched_lists(a); l += kThreads)
    if (hist[l] != 0) atomicAdd(a.counts + l, hist[l]);
}

// Exclusive scan of three values over a block of kPlanThreads threads (every
// thread calls it); tot: the block totals.
__device__ void block_scan3(uint32_t v[3], uint32_t tot[3]) {
  __shared__ uint32_t ws[3][33];  // per warp its exclusive prefix; [32]: the total
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t incl[3];
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    incl[k] = warp_inclusive_scan(v[k]);
    if (lane == 31) ws[k][warp] = incl[k];
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      const uint32_t w = ws[k][lane];
      const uint32_t s = warp_inclusive_scan(w);
      ws[k][lane] = s - w;
      if (lane == 31) ws[k][32] = s;
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    tot[k] = ws[k][32];
    v[k] = ws[k][warp] + incl[k] - v[k];
  }
  __syncthreads();
}

// One block of kPlanThreads threads.
__device__ void sched_plan(const udf_ivf_sched_args_v1& a) {
  static_assert(kPlanThreads == 1024, "block_scan3 assumes 32 warps");
  __shared__ unsigned long long sums[4];
  __shared__ uint32_t s_tile;
  const uint32_t n_lists = sched_lists(a);
  const uint32_t per = div_up(n_lists, kPlanThreads);
  const uint32_t l0 = threadIdx.x * per, l1 = min(n_lists, l0 + per);
  if (threadIdx.x < 4) sums[threadIdx.x] = 0;
  __syncthreads();
  unsigned long long base = 0, probed = 0, pair_groups = 0, scored = 0;
  for (uint32_t l = l0; l < l1; ++l) {
    const uint32_t n = a.counts[l], groups = div_up(sched_size(a, l), 32);
    if (n == 0 || groups == 0) continue;
    const uint32_t chunks = div_up(n, a.qpi);
    base += chunks;
    probed += uint64_t(chunks) * groups;
    pair_groups += uint64_t(n) * groups;
    scored += uint64_t(n) * sched_size(a, l);
  }
  // A warp's sums first: 1024 threads' atomics on one shared word serialize.
  unsigned long long part[4] = {base, probed, pair_groups, scored};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) part[j] += __shfl_xor_sync(kFull, part[j], o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&sums[j], part[j]);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t tile = kNoTile;
    if (sums[0] < a.target && sums[1] > 0) {
      unsigned long long t = (sums[1] + a.target - 1) / a.target;
      if (t < 4) t = 4;
      if (a.rows_extra > 0 && (sums[2] + a.rows_extra - 1) / a.rows_extra > t) t = (sums[2] + a.rows_extra - 1) / a.rows_extra;
      tile = t < kNoTile ? static_cast<uint32_t>(t) : kNoTile - 1;
    }
    s_tile = tile;
  }
  __syncthreads();
  const uint32_t tile = s_tile;
  uint32_t v[3] = {0, 0, 0}, tot[3];
  for (uint32_t l = l0; l < l1; ++l) {
    const uint32_t n = a.counts[l], groups = div_up(sched_size(a, l), 32);
    const uint32_t T = n == 0 || groups == 0 ? 0u : tile == kNoTile ? 1u : div_up(groups, tile);
    v[0] += n;
    v[1] += div_up(n, a.qpi) * T;
    v[2] += n * T;
  }
  block_scan3(v, tot);
  for (uint32_t l = l0; l < l1; ++l) {
    const uint32_t n = a.counts[l], groups = div_up(sched_size(a, l), 32);
    const uint32_t T = n == 0 || groups == 0 ? 0u : tile == kNoTile ? 1u : div_up(groups, tile);
    a.list_start[l] = v[0];
    a.item_start[l] = v[1];
    a.pair_start[l] = v[2];
    a.tiles[l] = T;
    v[0] += n;
    v[1] += div_up(n, a.qpi) * T;
    v[2] += n * T;
  }
  if (threadIdx.x == 0) {
    a.header[0] = tot[1];
    a.header[1] = tot[2];
    a.header[2] = tile;
    a.header[3] = 0;
    a.header[4] = static_cast<uint32_t>(sums[3]);
    a.header[5] = static_cast<uint32_t>(sums[3] >> 32);
    a.header[6] = static_cast<uint32_t>(sums[1]);
    a.header[7] = static_cast<uint32_t>(sums[1] >> 32);
  }
}

__device__ void sched_scatter(const udf_ivf_sched_args_v1& a, uint64_t t, uint64_t nt) {
  for (uint64_t i = t; i < uint64_t(a.n_queries) * a.n_probes; i += nt) {
    const uint32_t l = sched_list(a, i);
    a.by_list[a.list_start[l] + atomicAdd(a.fill + l, 1u)] = static_cast<uint32_t>(i);
  }
}
// BLOCK HISTOGRAMS: a block reserves each list's places for its run of
// pairs with one global add, then hands them out in shared memory.  (Where
// in its list a pair lands was never fixed: the adds' order varies.)
__device__ void sched_scatter_blocks(const udf_ivf_sched_args_v1& a, uint32_t* hist) {
  uint64_t i0, i1;
  if (!sched_hist_run(a, i0, i1)) return;
  sched_hist(a, i0, i1, hist);
  for (uint32_t l = threadIdx.x; l < sched_lists(a); l += kThreads)
    if (hist[l] != 0) hist[l] = a.list_start[l] + atomicAdd(a.fill + l, hist[l]);
  __syncthreads();
  sched_each_pair(a, i0, i1, [&](uint64_t i, uint32_t l) { a.by_list[atomicAdd(hist + l, 1u)] = static_cast<uint32_t>(i); });
}

// A warp per query: row_offset[q][j] (exclusive over j of the tiles of q's
// probes) and rows_of[q] into query_rows[q].
__device__ void sched_rows(const udf_ivf_sched_args_v1& a, uint32_t warp0, uint32_t n_warps) {
  const uint32_t lane = threadIdx.x & 31;
  for (uint32_t q = warp0; q < a.n_queries; q += n_warps) {
    uint32_t running = 0;
    for (uint32_t j0 = 0; j0 < a.n_probes; j0 += 32) {
      const uint32_t j = j0 + lane;
      const uint64_t i = uint64_t(q) * a.n_probes + j;
      const uint32_t t = j < a.n_probes ? a.tiles[sched_list(a, i)] : 0u;
      const uint32_t incl = warp_inclusive_scan(t);
      if (j < a.n_probes) a.row_offset[i] = running + incl - t;
      running += __shfl_sync(kFull, incl, 31);
    }
    if (lane == 0) a.query_rows[q] = running;
  }
}

// One block of kPlanThreads: query_rows[0 .. n_queries] = exclusive scan of
// the per-query row counts left in query_rows[0 .. n_queries).
__device__ void sched_query_rows(const udf_ivf_sched_args_v1& a) {
  const uint32_t nq = a.n_queries, per = div_up(nq, kPlanThreads);
  const uint32_t q0 = min(nq, threadIdx.x * per), q1 = min(nq, q0 + per);
  uint32_t v[3] = {0, 0, 0}, tot[3];
  for (uint32_t q = q0; q < q1; ++q) v[0] += a.query_rows[q];
  block_scan3(v, tot);
  uint32_t run = v[0];
  for (uint32_t q = q0; q < q1; ++q) {
    const uint32_t n = a.query_rows[q];
    a.query_rows[q] = run;
    run += n;
  }
  if (threadIdx.x == 0) a.query_rows[nq] = tot[0];
}

__device__ void sched_fill(const udf_ivf_sched_args_v1& a, uint64_t t, uint64_t nt) {
  const uint32_t tile = a.header[2];
  auto* items = static_cast<udf_ivf_work_item_v1*>(a.items);
  auto* pairs = static_cast<udf_ivf_pair_v1*>(a.pairs);
  for (uint64_t pos = t; pos < uint64_t(a.n_queries) * a.n_probes; pos += nt) {
    const uint32_t v = a.by_list[pos];
    const uint32_t q = v / a.n_probes;
    const uint32_t l = sched_list(a, v);
    const uint32_t T = a.tiles[l];
    if (T == 0) continue;
    const uint32_t i = static_cast<uint32_t>(pos) - a.list_start[l];
    const uint32_t c = i / a.qpi, in_chunk = i - c * a.qpi;
    const uint32_t cnt = min(a.qpi, a.counts[l] - c * a.qpi);
    const uint32_t row0 = a.query_rows[q] + a.row_offset[v];
    const uint32_t chunk_pairs = a.pair_start[l] + T * c * a.qpi;
    for (uint32_t t2 = 0; t2 < T; ++t2) {
      pairs[chunk_pairs + t2 * cnt + in_chunk] = udf_ivf_pair_v1{q, row0 + t2};
      if (in_chunk == 0) {
        udf_ivf_work_item_v1 it;
        it.list = l < a.n_lists ? l : l - a.n_lists;
        it.group_begin = tile == kNoTile ? 0u : t2 * tile;
        it.group_end = tile == kNoTile ? 0xFFFFFFFFu : (t2 + 1) * tile;
        it.pair_begin = chunk_pairs + t2 * cnt;
        it.pair_count = cnt;
        it.reserved = 0;
        items[a.item_start[l] + c * T + t2] = it;
      }
    }
  }
}

}  // namespace

// Small batches: every phase in one block of kPlanThreads threads.
extern "C" __global__ void __launch_bounds__(kPlanThreads) udf_ivf_index_v1_sched_small(udf_ivf_sched_args_v1 a) {
  sched_zero(a, threadIdx.x, kPlanThreads);
  __syncthreads();
  sched_count(a, threadIdx.x, kPlanThreads);
  __syncthreads();
  sched_plan(a);
  __syncthreads();
  sched_scatter(a, threadIdx.x, kPlanThreads);
  sched_rows(a, threadIdx.x / 32, kPlanThreads / 32);
  __syncthreads();
  sched_query_rows(a);
  __syncthreads();
  sched_fill(a, threadIdx.x, kPlanThreads);
}

// Large batches: one launch per phase (counts, fill and items cleared by the runtime).
extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_sched_count(udf_ivf_sched_args_v1 a) {
  extern __shared__ uint32_t sched_smem[];
  if (sched_block_hist(a))  // grid-uniform
    sched_count_blocks(a, sched_smem);
  else
    sched_count(a, grid_thread(), grid_threads());
}
extern "C" __global__ void __launch_bounds__(kPlanThreads) udf_ivf_index_v1_sched_plan(udf_ivf_sched_args_v1 a) {
  sched_plan(a);
}
extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_sched_scatter_rows(udf_ivf_sched_args_v1 a) {
  extern __shared__ uint32_t sched_smem[];
  if (sched_block_hist(a))  // grid-uniform; every block then takes its share of the rows
    sched_scatter_blocks(a, sched_smem);
  else
    sched_scatter(a, grid_thread(), grid_threads());
  sched_rows(a, static_cast<uint32_t>(grid_thread() / 32), static_cast<uint32_t>(grid_threads() / 32));
}
extern "C" __global__ void __launch_bounds__(kPlanThreads) udf_ivf_index_v1_sched_query_rows(udf_ivf_sched_args_v1 a) {
  sched_query_rows(a);
}
extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_sched_fill(udf_ivf_sched_args_v1 a) {
  sched_fill(a, grid_thread(), grid_threads());
}

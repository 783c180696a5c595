// The merge: per query, the k best of all of its candidate rows, as the
// pack's merge kernels and as a scan's tail merge.
#pragma once
#include "../warp_topk.cuh"
#include "block_topk.cuh"

namespace udf_kernels {

// The merge: per query, the k best of all of its candidate rows.

constexpr int kMergeAhead = 8;  // candidate loads in flight a thread (few candidates a query: latency)

// Query q's candidates (its rows' k each) in steps of kThreads, one a
// thread, kAhead steps' loads in flight at once (the candidates of one query
// are few at small batches: latency, not bandwidth): step(key, slot,
// next_key, next_known) for each step, slot UDF_IVF_V1_NO_SLOT past the end;
// next_key is the thread's key of the next step where next_known (its load
// is in flight already: all but one step in kAhead).  The bounds are block-uniform
// (every thread of the block calls step equally often; see warp_topk.cuh).
// The loads are unrolled, the steps are not: step is a top-k offer, and
// eight inlined copies of it would be most of a merge's code (and every
// scan carries one in its tail merge); the registers shift down a step
// instead of being indexed, so they stay registers.
template <bool kMax, class Step>
__device__ __forceinline__ void for_each_candidate_step(const udf_ivf_merge_args_v1& a, uint32_t q, Step step) {
  const uint64_t first = static_cast<uint64_t>(a.query_rows[q]) * a.k;
  const uint64_t n = static_cast<uint64_t>(a.query_rows[q + 1]) * a.k - first;
  constexpr int kAhead = kMergeAhead;
  for (uint64_t base = 0; base < n; base += uint64_t(kAhead) * kThreads) {
    float keys[kAhead];
    uint32_t slots[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const uint64_t i = base + uint64_t(u) * kThreads + threadIdx.x;
      // Through L2 (ld.global.cg): a tail merge reads rows other blocks of
      // the same launch wrote; no stale line of this SM's L1 may answer.
      slots[u] = i < n ? __ldcg(a.cand_slots + first + i) : UDF_IVF_V1_NO_SLOT;
      keys[u] = i < n ? to_key<kMax>(__ldcg(a.cand_dists + first + i)) : 0.0f;
    }
#pragma unroll 1
    for (int u = 0; u < kAhead; ++u) {
      if (base + uint64_t(u) * kThreads >= n) break;  // block-uniform
      step(keys[0], slots[0], keys[1], u + 1 < kAhead);  // (keys[1]: the next step's key, where loaded)
#pragma unroll
      for (int v = 0; v + 1 < kAhead; ++v) {
        keys[v] = keys[v + 1];
        slots[v] = slots[v + 1];
      }
    }
  }
}

// A bound on query q's result: each of its rows holds the k best of its
// candidates, sorted (+inf past the row's candidates), so at least k
// candidates are at or below the smallest of the rows' k-th keys and no
// candidate above it is among the k best.  The merge offers only those at
// or below it: of the thousands of candidates of a few-query batch (32
// probes of tiles), a few dozen.  The same result as offering all.
template <bool kMax> __device__ __forceinline__ float merge_bound(const udf_ivf_merge_args_v1& a, uint32_t q) {
  __shared__ float warp_min[kWarps];
  const uint64_t first = a.query_rows[q], n = a.query_rows[q + 1] - first;
  float b = __int_as_float(0x7f800000);
  // Block-uniform bounds (the shuffles below; see warp_topk.cuh), kAhead
  // loads in flight.  fminf: a NaN key bounds nothing.
  constexpr int kAhead = kMergeAhead;
  for (uint64_t base = 0; base < n; base += uint64_t(kAhead) * kThreads) {
    float keys[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const uint64_t i = base + uint64_t(u) * kThreads + threadIdx.x;
      keys[u] = i < n ? to_key<kMax>(__ldcg(a.cand_dists + (first + i) * a.k + a.k - 1)) : b;
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) b = fminf(b, keys[u]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) b = fminf(b, wt_shfl_xor(b, o));
  if ((threadIdx.x & 31) == 0) warp_min[threadIdx.x >> 5] = b;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kWarps; ++w) b = fminf(b, warp_min[w]);
  __syncthreads();  // every thread has read warp_min before another query's bound
  return b;
}

// A second bound for the block merge (k above 32): the k-th smallest of the
// rows' first keys.  Each row is sorted and holds candidates of its own (an
// item's), so the first keys of k rows are k candidates at or under it.
// Where the best candidates spread over many rows -- uniform data, one or
// two of the k best a row -- it is close to the k-th best itself, far under
// the smallest k-th key of a row (merge_bound), which lets thousands of
// candidates through, and a few-query search then spends its time in the
// merge's sorts.  Found by bisection on the keys' order-preserving words (rounds of
// a block-wide count), with each thread's rows in registers: up to
// kRowsPerThread * kThreads rows (more: `other` as it is).  Returns the
// smaller of it and `other` (merge_bound's or the query bound): where the
// best candidates crowd into a few rows (clustered data) that one is the
// tighter, and a first round says so.
constexpr int kRowsPerThread = 8;
template <bool kMax>
__device__ __forceinline__ float first_keys_bound(const udf_ivf_merge_args_v1& a, uint32_t q, float other) {
  __shared__ uint32_t warp_count[kWarps];
  const uint64_t first = a.query_rows[q], n = a.query_rows[q + 1] - first;
  if (n < a.k || n > uint64_t(kRowsPerThread) * kThreads) return other;  // block-uniform
  uint32_t e[kRowsPerThread];  // the words of the thread's rows' first keys (NaN: +inf's); past the rows: none
#pragma unroll
  for (int u = 0; u < kRowsPerThread; ++u) {
    const uint64_t i = uint64_t(u) * kThreads + threadIdx.x;
    const float key = i < n ? to_key<kMax>(__ldcg(a.cand_dists + (first + i) * a.k)) : 0.0f;
    e[u] = i >= n ? 0xFFFFFFFFu : bound_encode(key == key ? key : __int_as_float(0x7f800000));
  }
  // The first round counts the first keys at or under the other bound: fewer
  // than k (the best candidates crowd into a few rows) and that one is the
  // tighter.  Otherwise the smallest word with at least k first keys at or
  // under it lies in [0, the other's word], and 16 rounds of bisection put
  // `hi` within 1 / 65536 of that span above it: close to its
  // key, and still a bound (k first keys at or under hi).  A fixed number
  // of rounds, no early exit: a loop or branch on the counts (from shared
  // memory) made ptxas check for divergence at every vote and shuffle after
  // it, with its helpers' calls before sm_90.
  const uint32_t top = bound_encode(other == other ? other : __int_as_float(0x7f800000));
  uint32_t lo = 0, hi = top;
  bool tighter = false;
#pragma unroll 1
  for (int round = -1; round < 16; ++round) {
    const uint32_t mid = round < 0 ? top : lo + (hi - lo) / 2;
    uint32_t c = 0;
#pragma unroll
    for (int u = 0; u < kRowsPerThread; ++u) c += e[u] <= mid ? 1u : 0u;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) c += wt_shfl_xor(c, o);
    if ((threadIdx.x & 31) == 0) warp_count[threadIdx.x >> 5] = c;
    __syncthreads();
    c = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) c += warp_count[w];
    __syncthreads();  // every thread has read warp_count before the next round writes it
    if (round < 0) tighter = c >= a.k;
    else if (c >= a.k) hi = mid;
    else lo = mid + 1;
  }
  return tighter ? bound_decode(hi) : other;
}

// Result i of query q.
template <bool kMax>
__device__ __forceinline__ void write_merged(const udf_ivf_merge_args_v1& a, uint32_t q, uint32_t i, float key, uint32_t slot) {
  a.out_dists[static_cast<uint64_t>(q) * a.k + i] = kMax ? -key : key;
  a.out_ids[static_cast<uint64_t>(q) * a.k + i] = slot == UDF_IVF_V1_NO_SLOT ? -1LL : a.ids[slot];
}

// KMAX 32: each warp keeps the k best of its share of the candidates in
// registers (warp_topk.cuh), then the warps' lists (in smem: kWarps * 32
// keys and slots) are merged.
template <bool kMax>
__device__ __forceinline__ void merge_warps(const udf_ivf_merge_args_v1& a, uint32_t q, uint4* smem, const uint32_t* qbound) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* list_keys = reinterpret_cast<float*>(smem);
  uint32_t* list_slots = reinterpret_cast<uint32_t*>(list_keys + kWarps * 32);
  WarpEntry best{__int_as_float(0x7f800000), UDF_IVF_V1_NO_SLOT};
  const float bound = qbound != nullptr ? bound_decode(__ldcg(qbound)) : merge_bound<kMax>(a, q);
  for_each_candidate_step<kMax>(a, q, [&](float key, uint32_t slot, float, bool) {
    const bool offered = slot != UDF_IVF_V1_NO_SLOT && key < __int_as_float(0x7f800000) && key <= bound;
    if (wt_ballot(offered) == 0) return;  // most steps, under the bound: no shuffle of the list for them
    warp_topk_offer(best, a.k, offered, key, slot, lane);
  });
  list_keys[warp * 32 + lane] = best.key;
  list_slots[warp * 32 + lane] = best.val;
  __syncthreads();
  // Every warp merges the lists (no warp-dependent branch around the
  // shuffles: inlined into a scan's tail merge, ptxas would otherwise call
  // its shuffle helpers before sm_90); warp 0 writes.
  best = warp_merge_lists<kWarps>(list_keys, list_slots, lane);
  if (warp == 0 && static_cast<uint32_t>(lane) < a.k) write_merged<kMax>(a, q, lane, best.key, best.val);
}

// KMAX above 32: the block-wide top-k in smem (UDF_IVF_MERGE_V1_SMEM_BYTES).
template <bool kMax, int K>
__device__ __forceinline__ void merge_block(const udf_ivf_merge_args_v1& a, uint32_t q, uint4* smem, const uint32_t* qbound) {
  constexpr int S = UDF_IVF_V1_SORT_CAPACITY(K);
  const uint32_t k = a.k;
  const TopK t{reinterpret_cast<float*>(smem), reinterpret_cast<uint32_t*>(smem) + S, reinterpret_cast<uint32_t*>(smem) + 2 * S};
  topk_init<S>(t);
  __syncthreads();  // topk_init before the first offer
  const float bound = first_keys_bound<kMax>(a, q, qbound != nullptr ? bound_decode(__ldcg(qbound)) : merge_bound<kMax>(a, q));
  // A step's candidates go into the buffer after the sorted k, which is
  // sorted when the next step's could overflow it: those of its keys under
  // the bound (all of them where the next step's keys are not loaded yet,
  // one step in kMergeAhead).  With the bounds above: a few sorts a query
  // instead of one at every step that offers a candidate (S entries each).
  for_each_candidate_step<kMax>(a, q, [&](float key, uint32_t slot, float next_key, bool next_known) {
    const bool pass = slot != UDF_IVF_V1_NO_SLOT && topk_beats(t, k, key, slot) && key <= bound;
    topk_offer<K>(t, pass, key, slot);
    const uint32_t next = static_cast<uint32_t>(__syncthreads_count(!next_known || next_key <= bound));  // after the appends
    if (t.state[0] + next > uint32_t(S - K)) topk_flush<K, S>(t, k);
    __syncthreads();  // every thread has read the count before the next step appends
  });
  if (t.state[0] != 0) topk_flush<K, S>(t, k);
  for (uint32_t i = threadIdx.x; i < k; i += kThreads) write_merged<kMax>(a, q, i, t.keys[i], t.slots[i]);
}

// Query q's k best of its rows, by the whole block; smem: at least
// UDF_IVF_MERGE_V1_SMEM_BYTES(sort capacity), 16-byte aligned.  bound: the
// query's QUERY BOUND word once every row is written (the smallest of the
// rows' k-th keys), or null to find that bound from the rows.
template <bool kMax, int K>
__device__ __forceinline__ void merge_query(const udf_ivf_merge_args_v1& a, uint32_t q, uint4* smem, const uint32_t* bound = nullptr) {
  if constexpr (K == 32)
    merge_warps<kMax>(a, q, smem, bound);
  else
    merge_block<kMax, K>(a, q, smem, bound);
}

template <bool kMax, int K> __device__ __forceinline__ void merge(const udf_ivf_merge_args_v1& a) {
  const uint32_t q = blockIdx.x;
  if (q >= a.n_queries) return;
  extern __shared__ uint4 smem_raw[];
  merge_query<kMax, K>(a, q, smem_raw);
}

// TAIL MERGE's queries of one row (ivf_flat_v1.h): the row, sorted and
// padded as the merge's result is, is the query's result, so the item that
// writes it writes the result instead (ids for slots) and the query takes
// no count, no fence and no merge.  Block-uniform (global memory at a
// block-uniform address; see tail_merge).
__device__ __forceinline__ bool tail_merge_single_row(const udf_ivf_scan_args_v1* args, uint32_t query) {
  if (args->query_done == nullptr) return false;
  const uint32_t* range = args->query_row_ranges + 2 * static_cast<uint64_t>(query);
  return range[1] - range[0] == 1u;
}

// Whether the item's query q (`query`) is one of one row: single0 is query
// 0's, read at the item's start; the others' are read here.
__device__ __forceinline__ bool item_query_single_row(const udf_ivf_scan_args_v1* args, uint32_t q, uint32_t query, bool single0) {
  return q == 0 ? single0 : tail_merge_single_row(args, query);
}

// Result i of a one-row query, where and as the merge writes it (write_merged).
template <bool kMax>
__device__ __forceinline__ void write_single_row(const udf_ivf_scan_args_v1* args, uint32_t query, uint32_t i, float key, uint32_t slot) {
  const uint64_t at = static_cast<uint64_t>(query) * args->k + i;
  args->out_dists[at] = kMax ? -key : key;
  args->out_ids[at] = slot == UDF_IVF_V1_NO_SLOT ? -1LL : args->ids[slot];
}

// TAIL MERGE (ivf_flat_v1.h): after the item's rows are written, it counts
// itself for each of its queries of more than one row; the block that
// completes a query merges its rows (smem: the scan's, no longer used).
// single0: tail_merge_single_row of the item's query 0.
template <bool kMax, int K>
__device__ __forceinline__ void tail_merge(const udf_ivf_scan_args_v1* args, const udf_ivf_work_item_v1& item, uint4* smem,
                                           bool single0) {
  bool counts = !single0;  // some query of the item has other rows (block-uniform)
  for (uint32_t q = 1; q < item.pair_count && !counts; ++q)
    counts = !tail_merge_single_row(args, args->pairs[item.pair_begin + q].query);
  if (!counts) return;  // every query's result is written already
  __threadfence();  // this thread's rows are visible device-wide before the block counts itself
  __syncthreads();
  // The block that completes a query's count writes its own mark there
  // (above any count); every thread of a block then compares the word with
  // its block's mark, so exactly the last block merges, all of its threads
  // alike, whenever the others read the word.  Every bound and branch comes
  // from global memory at a block-uniform address (the item, the ranges, the
  // word): ptxas then sees them uniform and keeps the merge's shuffles
  // inline before sm_90 (warp_topk.cuh); a flag in shared memory or a
  // barrier reduction made them calls.
  const uint32_t mark = 0x80000000u | blockIdx.x;
  for (uint32_t q = 0; q < item.pair_count; ++q) {
    const uint32_t query = args->pairs[item.pair_begin + q].query;
    if (item_query_single_row(args, q, query, single0)) continue;  // written by the agent
    const uint32_t* range = args->query_row_ranges + 2 * static_cast<uint64_t>(query);
    uint32_t* done = args->query_done + query;
    if (threadIdx.x == 0 && atomicAdd(done, 1u) + 1u == range[1] - range[0]) *done = mark;
    __syncthreads();
    if (__ldcg(done) == mark) {
      __threadfence();
      udf_ivf_merge_args_v1 ma;
      ma.cand_dists = args->cand_dists;
      ma.cand_slots = args->cand_slots;
      ma.query_rows = range;
      ma.ids = args->ids;
      ma.out_dists = args->out_dists + static_cast<uint64_t>(query) * args->k;
      ma.out_ids = args->out_ids + static_cast<uint64_t>(query) * args->k;
      ma.n_queries = 1;
      ma.k = args->k;
      // With query bounds, the query's word is the smallest of its rows'
      // k-th keys already (every item published its row before counting):
      // the merge's bound without reading the rows for it.
      uint32_t* const bound = args->query_bound != nullptr ? args->query_bound + query : nullptr;
      merge_query<kMax, K>(ma, 0, smem, bound);
      __syncthreads();  // every thread has read the mark (and the bound)
      if (threadIdx.x == 0) {  // for the next launch
        *done = 0;
        if (bound != nullptr) *bound = UDF_IVF_V1_BOUND_NONE;
      }
    }
  }
}

}  // namespace udf_kernels

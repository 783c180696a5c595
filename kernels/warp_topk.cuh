// A warp's k best (key, value) entries, k <= 32, kept sorted across the
// lanes: lane i holds the i-th best (ascending key, ties to the smaller
// value; entry_less), unused places +inf / kNone.  A warp offers 32
// candidates at a time (one a lane) and no barrier beyond the warp is
// needed, so the k best of a stream cost no block-wide sorts.  Callers keep
// the branches around these calls uniform in a way ptxas can see (not
// derived from threadIdx or loaded values): before sm_90 it otherwise
// calls out-of-line helpers for every shuffle (udf-link/archs.test checks).  Used by the
// scan and the merge for KMAX 32 (kernels/ivf_flat_scan.cuh).  Every
// function is called by all 32 lanes of a warp, with warp-uniform k.
#pragma once

#include "block_sort.cuh"

namespace {  // internal to each kernel file

constexpr unsigned kWarpAll = 0xFFFFFFFFu;

// Full-warp shuffles and ballot as inline PTX: the CUDA intrinsics compile
// (for compute_75) to calls of internal helpers that nvJitLink may leave
// out of line in these loops, which then run as real calls.  volatile: never
// moved into a branch that only some lanes take.
__device__ __forceinline__ uint32_t wt_shfl_xor(uint32_t v, int m) {
  uint32_t r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(m));
  return r;
}
__device__ __forceinline__ uint32_t wt_shfl(uint32_t v, int src) {
  uint32_t r;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(src));
  return r;
}
__device__ __forceinline__ uint32_t wt_shfl_up1(uint32_t v) {
  uint32_t r;
  asm volatile("shfl.sync.up.b32 %0, %1, 1, 0x0, 0xffffffff;" : "=r"(r) : "r"(v));
  return r;
}
__device__ __forceinline__ float wt_shfl_xor(float v, int m) { return __uint_as_float(wt_shfl_xor(__float_as_uint(v), m)); }
__device__ __forceinline__ float wt_shfl(float v, int src) { return __uint_as_float(wt_shfl(__float_as_uint(v), src)); }
__device__ __forceinline__ float wt_shfl_up1(float v) { return __uint_as_float(wt_shfl_up1(__float_as_uint(v))); }
__device__ __forceinline__ unsigned wt_ballot(bool p) {
  unsigned r;
  asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %1, 0;\n\tvote.sync.ballot.b32 %0, q, 0xffffffff;\n\t}" : "=r"(r) : "r"(p ? 1u : 0u));
  return r;
}

// The OR of v over the warp, in every lane.
__device__ __forceinline__ uint32_t warp_or(uint32_t v) {
#if __CUDA_ARCH__ >= 800
  uint32_t r;
  asm volatile("redux.sync.or.b32 %0, %1, 0xffffffff;" : "=r"(r) : "r"(v));
  return r;
#else
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v |= wt_shfl_xor(v, m);
  return v;
#endif
}

struct WarpEntry {
  float key;
  uint32_t val;
};

// Swaps in the partner's entry (lane ^ stride) when it belongs here: the
// smaller of the pair in the lower lane when the run is ascending.
__device__ __forceinline__ void warp_exchange(WarpEntry& e, int lane, int stride, bool up) {
  const float ok = wt_shfl_xor(e.key, stride);
  const uint32_t ov = wt_shfl_xor(e.val, stride);
  const bool lower = (lane & stride) == 0;
  const bool take = lower == up ? entry_less(ok, ov, e.key, e.val) : entry_less(e.key, e.val, ok, ov);
  if (take) {
    e.key = ok;
    e.val = ov;
  }
}

// Sorts the warp's 32 entries ascending (bitonic).
__device__ __forceinline__ void warp_sort(WarpEntry& e, int lane) {
#pragma unroll
  for (int size = 2; size <= 32; size <<= 1)
#pragma unroll
    for (int stride = size >> 1; stride > 0; stride >>= 1) warp_exchange(e, lane, stride, (lane & size) == 0 || size == 32);
}

// best (sorted) := the 32 best of best and c (c sorted ascending too): the
// lane-wise better of best[i] and c[31 - i] is a bitonic sequence holding
// the 32 best, which a bitonic merge sorts.
__device__ __forceinline__ void warp_merge_sorted(WarpEntry& best, WarpEntry c, int lane) {
  const float rk = wt_shfl(c.key, 31 - lane);
  const uint32_t rv = wt_shfl(c.val, 31 - lane);
  if (entry_less(rk, rv, best.key, best.val)) {
    best.key = rk;
    best.val = rv;
  }
#pragma unroll
  for (int stride = 16; stride > 0; stride >>= 1) warp_exchange(best, lane, stride, true);
}

// The best of kLists sorted lists laid out one after another in shared
// memory (list w at keys[32 w ..], vals[32 w ..]), sorted across the lanes:
// the end of the per-warp top-k of a block, merged by one warp.
template <int kLists>
__device__ __forceinline__ WarpEntry warp_merge_lists(const float* keys, const uint32_t* vals, int lane) {
  WarpEntry best{keys[lane], vals[lane]};
#pragma unroll 1
  for (int w = 1; w < kLists; ++w) warp_merge_sorted(best, WarpEntry{keys[w * 32 + lane], vals[w * 32 + lane]}, lane);
  return best;
}

// The 32 best of best and the warp's candidates c (unsorted).
__device__ __forceinline__ WarpEntry warp_merge_unsorted(WarpEntry best, WarpEntry c, int lane) {
  warp_sort(c, lane);
  warp_merge_sorted(best, c, lane);
  return best;
}

// Offers each lane's candidate (when `offered`) to the warp's k best.  Only
// candidates better than the current k-th are taken: a few are inserted one
// at a time, more by a sort and a merge.
__device__ __forceinline__ void warp_topk_offer(WarpEntry& best, uint32_t k, bool offered, float key, uint32_t val, int lane) {
  float tk = wt_shfl(best.key, static_cast<int>(k - 1));
  uint32_t tv = wt_shfl(best.val, static_cast<int>(k - 1));
  unsigned mask = wt_ballot(offered && entry_less(key, val, tk, tv));
  if (mask == 0) return;
  if (__popc(mask) > 4) {
    const bool in = (mask >> lane) & 1u;
    best = warp_merge_unsorted(best, WarpEntry{in ? key : __int_as_float(0x7f800000), in ? val : 0xFFFFFFFFu}, lane);
    return;
  }
  while (mask != 0) {
    const int src = __ffs(mask) - 1;
    mask &= mask - 1;
    const float nk = wt_shfl(key, src);
    const uint32_t nv = wt_shfl(val, src);
    // No branch around the shuffles on `ins` (the same in every lane): ptxas
    // before sm_90 cannot tell, and calls helpers for shuffles it must
    // assume divergent.
    const bool ins = entry_less(nk, nv, tk, tv);  // false when the k-th has moved since
    // The entries before the new one are a prefix of the lanes.
    const int pos = __popc(wt_ballot(entry_less(best.key, best.val, nk, nv)));
    const float uk = wt_shfl_up1(best.key);
    const uint32_t uv = wt_shfl_up1(best.val);
    if (ins && lane == pos) {
      best.key = nk;
      best.val = nv;
    } else if (ins && lane > pos) {
      best.key = uk;
      best.val = uv;
    }
    tk = wt_shfl(best.key, static_cast<int>(k - 1));
    tv = wt_shfl(best.val, static_cast<int>(k - 1));
  }
}

// The same for a list kept in shared memory (keys[0, 32), vals[0, 32)),
// read and written back only when a candidate beats its k-th.
__device__ __forceinline__ void warp_list_offer(float* keys, uint32_t* vals, uint32_t k, bool offered, float key, uint32_t val,
                                                int lane) {
  if (wt_ballot(offered && entry_less(key, val, keys[k - 1], vals[k - 1])) == 0) return;
  WarpEntry best{keys[lane], vals[lane]};
  warp_topk_offer(best, k, offered, key, val, lane);
  keys[lane] = best.key;
  vals[lane] = best.val;
  __syncwarp();
}

}  // namespace

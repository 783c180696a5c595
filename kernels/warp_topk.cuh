// A warp's k best (key, value) entries, k <= 32, kept sorted across the
// lanes: lane i holds the i-th best (ascending key, ties to the smaller
// value; entry_less), unused places +inf / kNone.  A warp offers 32
// candidates at a time (one a lane) and no barrier beyond the warp is
// needed, so the k best of a stream cost no block-wide sorts.  Used by the
// scan and the merge for KMAX 32 (kernels/ivf_flat_scan.cuh).  Every
// function is called by all 32 lanes of a warp, with warp-uniform k.
#pragma once

#include "block_sort.cuh"

namespace {  // internal to each kernel file

constexpr unsigned kWarpAll = 0xFFFFFFFFu;

struct WarpEntry {
  float key;
  uint32_t val;
};

// Swaps in the partner's entry (lane ^ stride) when it belongs here: the
// smaller of the pair in the lower lane when the run is ascending.
__device__ __forceinline__ void warp_exchange(WarpEntry& e, int lane, int stride, bool up) {
  const float ok = __shfl_xor_sync(kWarpAll, e.key, stride);
  const uint32_t ov = __shfl_xor_sync(kWarpAll, e.val, stride);
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
  const float rk = __shfl_sync(kWarpAll, c.key, 31 - lane);
  const uint32_t rv = __shfl_sync(kWarpAll, c.val, 31 - lane);
  if (entry_less(rk, rv, best.key, best.val)) {
    best.key = rk;
    best.val = rv;
  }
#pragma unroll
  for (int stride = 16; stride > 0; stride >>= 1) warp_exchange(best, lane, stride, true);
}

// Offers each lane's candidate (when `offered`) to the warp's k best.  Only
// candidates better than the current k-th are taken: a few are inserted one
// at a time, more by a sort and a merge.
__device__ __forceinline__ void warp_topk_offer(WarpEntry& best, uint32_t k, bool offered, float key, uint32_t val, int lane) {
  float tk = __shfl_sync(kWarpAll, best.key, k - 1);
  uint32_t tv = __shfl_sync(kWarpAll, best.val, k - 1);
  unsigned mask = __ballot_sync(kWarpAll, offered && entry_less(key, val, tk, tv));
  if (mask == 0) return;
  if (__popc(mask) > 4) {
    WarpEntry c{(mask >> lane) & 1u ? key : __int_as_float(0x7f800000), (mask >> lane) & 1u ? val : 0xFFFFFFFFu};
    warp_sort(c, lane);
    warp_merge_sorted(best, c, lane);
    return;
  }
  while (mask != 0) {
    const int src = __ffs(mask) - 1;
    mask &= mask - 1;
    const float nk = __shfl_sync(kWarpAll, key, src);
    const uint32_t nv = __shfl_sync(kWarpAll, val, src);
    if (!entry_less(nk, nv, tk, tv)) continue;  // the k-th has moved since
    // The entries before the new one are a prefix of the lanes.
    const int pos = __popc(__ballot_sync(kWarpAll, entry_less(best.key, best.val, nk, nv)));
    const float uk = __shfl_up_sync(kWarpAll, best.key, 1);
    const uint32_t uv = __shfl_up_sync(kWarpAll, best.val, 1);
    if (lane == pos) {
      best.key = nk;
      best.val = nv;
    } else if (lane > pos) {
      best.key = uk;
      best.val = uv;
    }
    tk = __shfl_sync(kWarpAll, best.key, k - 1);
    tv = __shfl_sync(kWarpAll, best.val, k - 1);
  }
}

// The same for a list kept in shared memory (keys[0, 32), vals[0, 32)),
// read and written back only when a candidate beats its k-th.
__device__ __forceinline__ void warp_list_offer(float* keys, uint32_t* vals, uint32_t k, bool offered, float key, uint32_t val,
                                                int lane) {
  if (!__any_sync(kWarpAll, offered && entry_less(key, val, keys[k - 1], vals[k - 1]))) return;
  WarpEntry best{keys[lane], vals[lane]};
  warp_topk_offer(best, k, offered, key, val, lane);
  keys[lane] = best.key;
  vals[lane] = best.val;
  __syncwarp();
}

}  // namespace

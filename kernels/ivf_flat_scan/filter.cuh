// The scan's filter policy: which queries keep each slot (the launch's UDF
// filter), and each warp's queue of kept slots, so that a warp whose group
// of 32 slots keeps only some scores full batches of 32 kept slots.
#pragma once
#include "layout.cuh"

namespace udf_kernels {

struct ScanFilter {
  udf_filter_v1_fn fn;  // null: an unfiltered launch
  udf_ctx_v1& ctx;
  uint32_t queued;   // entries in the queue (warp-uniform), < 32 between steps

  // Bit q: query q keeps the lane's slot (none where the slot is not valid).
  template <class Tile> __device__ __forceinline__ uint64_t keep_mask(const Tile& t, bool valid, uint32_t slot) {
    uint64_t keep = 0;
    if (valid) {
      const int64_t id = static_cast<int64_t>(t.it.args->ids[slot]);
      for (uint32_t q = 0; q < t.it.nq; ++q)
        if (fn(t.sm.state[4 * q + 2], id, &ctx)) keep |= 1ull << q;
    }
    return keep;
  }

  // Appends the warp's kept slots (`kept`: the lanes whose `keep` is not 0).
  template <class Tile> __device__ __forceinline__ void push(const Tile& t, uint32_t kept, uint64_t keep, uint32_t slot) {
    if (keep != 0) {
      const uint32_t pos = queued + __popc(kept & ((1u << t.it.lane) - 1u));
      t.sm.queue_slot[pos] = slot;
      t.sm.queue_keep[pos] = keep;
    }
    queued += __popc(kept);
    __syncwarp();
  }

  // Takes the queue's first 32 entries, one a lane (queued >= 32).
  template <class Tile> __device__ __forceinline__ void pop(const Tile& t, uint32_t& slot, uint64_t& keep) {
    const int lane = t.it.lane;
    slot = t.sm.queue_slot[lane];
    keep = t.sm.queue_keep[lane];
    __syncwarp();
    if (lane + 32 < queued) {
      t.sm.queue_slot[lane] = t.sm.queue_slot[lane + 32];
      t.sm.queue_keep[lane] = t.sm.queue_keep[lane + 32];
    }
    queued -= 32;
    __syncwarp();
  }
};

}  // namespace udf_kernels

// Block top-k in shared memory (the scan's buffers for k above 32 and the
// block merge), and the order-preserving words of QUERY BOUND.
#pragma once
#include "../block_sort.cuh"
#include "types.cuh"

namespace udf_kernels {

// Block top-k in shared memory: a sorted "best" prefix of KMAX entries and a
// buffer behind it, filled with candidates that beat the current threshold
// (the k-th best key).  When the buffer could overflow on the next step of
// 128 candidates, the whole array is bitonic-sorted and the threshold
// tightens.  Keys are distances under min and negated distances under max,
// so smaller keys are always better; ties go to the smaller slot.

struct TopK {
  float* keys;
  uint32_t* slots;
  uint32_t* state;  // [0] buffered count, [1] threshold bits
};

template <int S> __device__ __forceinline__ void topk_init(const TopK& t) {
  for (int i = threadIdx.x; i < S; i += kThreads) {
    t.keys[i] = __int_as_float(0x7f800000);
    t.slots[i] = UDF_IVF_V1_NO_SLOT;
  }
  if (threadIdx.x == 0) {
    t.state[0] = 0;
    t.state[1] = 0x7f800000u;  // +inf: accept anything finite
  }
}

// Called by every thread of every warp (warp-aggregated append).
template <int K> __device__ __forceinline__ void topk_offer(const TopK& t, bool pass, float key, uint32_t slot) {
  const unsigned mask = __ballot_sync(kFull, pass);
  if (mask == 0) return;
  const int lane = threadIdx.x & 31;
  uint32_t base = 0;
  if (lane == 0) base = atomicAdd(&t.state[0], static_cast<uint32_t>(__popc(mask)));
  base = __shfl_sync(kFull, base, 0);
  if (pass) {
    const uint32_t pos = K + base + __popc(mask & ((1u << lane) - 1u));
    t.keys[pos] = key;
    t.slots[pos] = slot;
  }
}

// Whether (key, slot) beats the k-th of the sorted prefix, the threshold:
// a smaller key, or the same key and a smaller slot (ties go to the smaller
// slot, whatever order the candidates come in).  +inf and NaN never do.
// Until the first flush the threshold is +inf with no slot: any finite key.
__device__ __forceinline__ bool topk_beats(const TopK& t, uint32_t k, float key, uint32_t slot) {
  const float th = __uint_as_float(t.state[1]);
  if (key < th) return true;  // (th <= +inf: key is finite)
  return key == th && key < __int_as_float(0x7f800000) && slot < t.slots[k - 1];
}

// Sorts the first K + count entries (rounded up to a power of two, at most
// S), then publishes the new threshold keys[k - 1].  Block-wide; starts and
// ends with a barrier.
template <int K, int S> __device__ void topk_flush(const TopK& t, uint32_t k) {
  __syncthreads();
  const uint32_t used = K + t.state[0];
  uint32_t n = 2 * kThreads < S ? 2 * kThreads : S;
  while (n < used) n <<= 1;
  for (uint32_t i = used + threadIdx.x; i < n; i += kThreads) {
    t.keys[i] = __int_as_float(0x7f800000);
    t.slots[i] = UDF_IVF_V1_NO_SLOT;
  }
  __syncthreads();
  block_bitonic_sort<kThreads>(t.keys, t.slots, n);
  if (threadIdx.x == 0) {
    t.state[0] = 0;
    t.state[1] = __float_as_uint(t.keys[k - 1]);
  }
  __syncthreads();
}

template <bool kMax> __device__ __forceinline__ float to_key(float d) { return kMax ? -d : d; }

// QUERY BOUND (ivf_flat_v1.h): keys <-> the order-preserving words of
// args.query_bound.
__device__ __forceinline__ uint32_t bound_encode(float key) { return UDF_IVF_V1_BOUND_ENCODE(__float_as_uint(key)); }
__device__ __forceinline__ float bound_decode(uint32_t e) { return __uint_as_float(UDF_IVF_V1_BOUND_DECODE(e)); }
// Lowers query q's bound to `key` (a row's k-th key; nothing when it is not finite).
__device__ __forceinline__ void bound_publish(uint32_t* bounds, uint32_t query, float key) {
  if (key < __int_as_float(0x7f800000)) atomicMin(bounds + query, bound_encode(key));
}

}  // namespace udf_kernels

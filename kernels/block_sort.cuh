// Block-wide bitonic sort of (key, value) pairs in shared memory, shared by
// the scan kernels (kernel pack) and the index kernels (runtime).
#pragma once

namespace {  // internal to each kernel file

// Ascending by key, ties by the smaller value.
__device__ __forceinline__ bool entry_less(float ka, uint32_t va, float kb, uint32_t vb) {
  return ka < kb || (ka == kb && va < vb);
}

// Sorts keys[0, n) with their values; n is a power of two.  All THREADS
// threads of the block call it; it ends with a barrier.
template <int THREADS>
__device__ void block_bitonic_sort(float* keys, uint32_t* vals, uint32_t n) {
  for (uint32_t size = 2; size <= n; size <<= 1) {
    for (uint32_t stride = size >> 1; stride > 0; stride >>= 1) {
      for (uint32_t i = threadIdx.x; i < n / 2; i += THREADS) {
        const uint32_t lo = 2 * i - (i & (stride - 1));
        const uint32_t hi = lo + stride;
        const bool up = (lo & size) == 0;
        const float klo = keys[lo], khi = keys[hi];
        const uint32_t vlo = vals[lo], vhi = vals[hi];
        if (entry_less(khi, vhi, klo, vlo) == up) {
          keys[lo] = khi;
          keys[hi] = klo;
          vals[lo] = vhi;
          vals[hi] = vlo;
        }
      }
      __syncthreads();
    }
  }
}

}  // namespace

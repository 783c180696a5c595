// The IVF index kernels' shared constants and helpers (every stage file uses
// them; kernels/ivf_index_v1.cu includes this file first).
#pragma once
#include <cuda_fp16.h>

#include <udf/kernels/ivf_index_v1.h>

namespace {

constexpr int kThreads = UDF_IVF_INDEX_V1_THREADS;
constexpr unsigned kFull = 0xFFFFFFFFu;

__device__ __forceinline__ float load_elem(const void* p, uint32_t elem, uint64_t i) {
  switch (elem) {
    case 0: return static_cast<const float*>(p)[i];
    case 1: return __half2float(static_cast<const __half*>(p)[i]);
    case 2: return static_cast<float>(static_cast<const signed char*>(p)[i]);
    default: return static_cast<float>(static_cast<const unsigned char*>(p)[i]);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// Inclusive prefix sum over the lanes of a full warp.
__device__ __forceinline__ uint32_t warp_inclusive_scan(uint32_t v) {
  const uint32_t lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t x = __shfl_up_sync(kFull, v, o);
    if (lane >= o) v += x;
  }
  return v;
}

__device__ __forceinline__ uint32_t div_up(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

__device__ __forceinline__ uint64_t grid_thread() { return uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ uint64_t grid_threads() { return uint64_t(gridDim.x) * blockDim.x; }

}  // namespace

// IVF index kernels v1 (see include/udf/kernels/ivf_index_v1.h): element
// conversion and normalization, the coarse probe / k-means assignment (exact
// distances to every centroid, then a block bitonic sort), and the k-means
// accumulation.  Built with nvcc into a fatbin embedded in libudf_runtime.so.
#include <cuda_fp16.h>

#include <udf/kernels/ivf_index_v1.h>

#include "block_sort.cuh"

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

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_convert(udf_ivf_convert_args_v1 a) {
  const uint32_t r = blockIdx.x;
  if (r >= a.rows) return;
  __shared__ float partial[kThreads / 32];
  const uint64_t sbase = static_cast<uint64_t>(r) * a.src_stride;
  const uint64_t dbase = static_cast<uint64_t>(r) * a.dst_stride;
  float scale = 1.0f;
  if (a.normalize) {
    float s = 0.0f;
    for (uint32_t d = threadIdx.x; d < a.dim; d += kThreads) {
      const float x = load_elem(a.src, a.src_elem, sbase + d);
      s = fmaf(x, x, s);
    }
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = s;
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
    scale = total > 0.0f ? rsqrtf(total) : 0.0f;
  }
  for (uint32_t d = threadIdx.x; d < a.dim; d += kThreads) {
    const float x = load_elem(a.src, a.src_elem, sbase + d) * scale;
    if (a.dst_elem == 0)
      static_cast<float*>(a.dst)[dbase + d] = x;
    else
      static_cast<__half*>(a.dst)[dbase + d] = __float2half_rn(x);
  }
}

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_nearest(udf_ivf_nearest_args_v1 a) {
  const uint32_t r = blockIdx.x;
  if (r >= a.n_rows) return;
  extern __shared__ uint4 smem_raw[];
  float* keys = reinterpret_cast<float*>(smem_raw);
  uint32_t* idx = reinterpret_cast<uint32_t*>(keys + a.sort_size);
  float* q = reinterpret_cast<float*>(idx + a.sort_size);
  const float* row = a.rows + static_cast<uint64_t>(r) * a.dim;
  for (uint32_t d = threadIdx.x; d < a.dim; d += kThreads) q[d] = row[d];
  for (uint32_t c = a.n_lists + threadIdx.x; c < a.sort_size; c += kThreads) {
    keys[c] = __int_as_float(0x7f800000);
    idx[c] = 0xFFFFFFFFu;
  }
  __syncthreads();
  const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool l2 = a.metric == UDF_IVF_INDEX_V1_L2;
  for (uint32_t c = warp; c < a.n_lists; c += kThreads / 32) {
    const float* cp = a.centroids + static_cast<uint64_t>(c) * a.dim;
    float s = 0.0f;
    for (uint32_t d = lane; d < a.dim; d += 32) {
      const float x = cp[d];
      if (l2) {
        const float t = x - q[d];
        s = fmaf(t, t, s);
      } else {
        s = fmaf(x, q[d], s);
      }
    }
    s = warp_sum(s);
    if (lane == 0) {
      float key = l2 ? s : -s;
      if (key != key) key = __int_as_float(0x7f800000);  // NaN sorts last
      keys[c] = key;
      idx[c] = c;
    }
  }
  __syncthreads();
  const uint32_t n = a.sort_size;
  block_bitonic_sort<kThreads>(keys, idx, n);
  const uint64_t obase = static_cast<uint64_t>(r) * a.n_out;
  for (uint32_t i = threadIdx.x; i < a.n_out; i += kThreads) {
    a.out_lists[obase + i] = idx[i];
    if (a.out_dists) a.out_dists[obase + i] = l2 ? keys[i] : -keys[i];
  }
}

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_accumulate(udf_ivf_accumulate_args_v1 a) {
  const uint32_t r = blockIdx.x;
  if (r >= a.n_rows) return;
  const uint32_t l = a.labels[r];
  const float* row = a.rows + static_cast<uint64_t>(r) * a.dim;
  float* sum = a.sums + static_cast<uint64_t>(l) * a.dim;
  for (uint32_t d = threadIdx.x; d < a.dim; d += kThreads) atomicAdd(sum + d, row[d]);
  if (threadIdx.x == 0) atomicAdd(a.counts + l, 1u);
}

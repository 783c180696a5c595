// Stage convert: element conversion, normalization and coarse scaling of
// the rows (or of a gather of them).
#pragma once
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_convert(udf_ivf_convert_args_v1 a) {
  const uint32_t r = blockIdx.x;
  if (r >= a.rows) return;
  __shared__ float partial[kThreads / 32];
  const uint64_t sbase = (a.src_rows ? a.src_rows[r] : static_cast<uint64_t>(r)) * a.src_stride;
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
    float x = load_elem(a.src, a.src_elem, sbase + d) * scale;
    if (a.scale) x *= a.scale[d];
    if (a.dst_elem == 0)
      static_cast<float*>(a.dst)[dbase + d] = x;
    else
      static_cast<__half*>(a.dst)[dbase + d] = __float2half_rn(x);
  }
}

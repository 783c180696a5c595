// udfc: --shape vector --order max --coarse-metric inner_product
// Inner product as an ABI v2 vector UDF, larger is nearer (--order max).
extern "C" __device__ float dot_vector(const float *x, const float *y, uint32_t n_dims, const udf_ctx_v2 *ctx) {
  float acc = 0.0f;
  for (uint32_t d = 0; d < n_dims; ++d) acc = fmaf(x[d], y[d], acc);
  return acc;
}

// udfc: --shape vector --capture w:f32[]
// Weighted squared L2, ABI v2 vector: sum over d of w[d] (x[d] - y[d])^2,
// reading the capture w (length dim) in the UDF's own loop.
extern "C" __device__ float weighted_l2_vector(const float *x, const float *y, uint32_t n_dims, const udf_ctx_v2 *ctx) {
  const float *w = udf_capture_w(ctx);
  float acc = 0.0f;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const float t = x[d] - y[d];
    acc = fmaf(w[d] * t, t, acc);
  }
  return acc;
}

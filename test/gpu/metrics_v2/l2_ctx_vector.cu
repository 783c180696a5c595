// udfc: --shape vector --capture bias:f32
// l2_ctx.cu as an ABI v2 vector UDF: (squared L2 + bias * (id % 7)) * (1 + query % 3).
extern "C" __device__ float l2_ctx_vector(const float *x, const float *y, uint32_t n_dims, const udf_ctx_v2 *ctx) {
  float acc = 0.0f;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const float t = x[d] - y[d];
    acc = fmaf(t, t, acc);
  }
  const float bias = UDF_CAPTURE(ctx, bias) * static_cast<float>(ctx->id % 7);
  return (acc + bias) * static_cast<float>(1u + ctx->query % 3u);
}

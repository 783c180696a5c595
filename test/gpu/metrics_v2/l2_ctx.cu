// udfc: --shape state --finalize l2_ctx_finalize --capture bias:f32
// Reads the context: (squared L2 + bias * (id % 7)) * (1 + query % 3), with
// id the stored vector's id and query its row in the caller's batch.  ABI v2
// state.
extern "C" __device__ void l2_ctx(float x, float y, udf_state_v2 *s, const udf_ctx_v2 *ctx) {
  const float d = x - y;
  s->f[0] = fmaf(d, d, s->f[0]);
}

extern "C" __device__ float l2_ctx_finalize(const udf_state_v2 *s, const udf_ctx_v2 *ctx) {
  const float bias = UDF_CAPTURE(ctx, bias) * static_cast<float>(ctx->id % 7);
  return (s->f[0] + bias) * static_cast<float>(1u + ctx->query % 3u);
}

// udfc: --shape state --finalize weighted_cosine_finalize --capture w:f32[]
// Weighted cosine distance, ABI v2 state: per-dimension weights w (a capture
// of length dim) in the dot product and both norms:
//   1 - sum w x y / sqrt(sum w x^2 * sum w y^2).
extern "C" __device__ void weighted_cosine(float x, float y, udf_state_v2 *s, const udf_ctx_v2 *ctx) {
  const float w = UDF_CAPTURE(ctx, w)[ctx->dim];
  s->f[0] = fmaf(w * x, y, s->f[0]);
  s->f[1] = fmaf(w * x, x, s->f[1]);
  s->f[2] = fmaf(w * y, y, s->f[2]);
}

extern "C" __device__ float weighted_cosine_finalize(const udf_state_v2 *s, const udf_ctx_v2 *ctx) {
  return 1.0f - s->f[0] * rsqrtf(s->f[1] * s->f[2]);
}

// Cosine distance without stored norms, as an ABI v2 state UDF: dot, |x|^2
// and |y|^2 in three state words, 1 - dot / sqrt(|x|^2 |y|^2) at the end.
// cosine_<elem>.
#define V2_CAT2(a, b) a##b
#define V2_CAT(a, b) V2_CAT2(a, b)
#define V2_NAME(n) V2_CAT(n, SFX)

extern "C" __device__ void V2_NAME(cosine)(ACC x, ACC y, udf_state_v2 *s, const udf_ctx_v2 *ctx) {
#if ACC_I32
  s->i[0] += x * y;
  s->i[1] += x * x;
  s->i[2] += y * y;
#else
  s->f[0] = fmaf(x, y, s->f[0]);
  s->f[1] = fmaf(x, x, s->f[1]);
  s->f[2] = fmaf(y, y, s->f[2]);
#endif
}

extern "C" __device__ float V2_CAT(V2_NAME(cosine), _finalize)(const udf_state_v2 *s, const udf_ctx_v2 *ctx) {
#if ACC_I32
  return static_cast<float>(1.0 - double(s->i[0]) / sqrt(double(s->i[1]) * double(s->i[2])));
#else
  return 1.0f - s->f[0] * rsqrtf(s->f[1] * s->f[2]);
#endif
}

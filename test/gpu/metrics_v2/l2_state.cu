// Squared L2 as an ABI v2 state UDF: s->f[0] (s->i[0] for an i32
// accumulator) += (x - y)^2 per coordinate, finalize returns it.  Built per
// element type (test/gpu/metrics_v2/README.md): l2_state_<elem>.
#define V2_CAT2(a, b) a##b
#define V2_CAT(a, b) V2_CAT2(a, b)
#define V2_NAME(n) V2_CAT(n, SFX)

extern "C" __device__ void V2_NAME(l2_state)(ACC x, ACC y, udf_state_v2 *s, const udf_ctx_v2 *ctx) {
#if ACC_I32
  const int32_t d = x - y;
  s->i[0] += d * d;
#else
  const float d = x - y;
  s->f[0] = fmaf(d, d, s->f[0]);  // as the built-in v1 l2
#endif
}

extern "C" __device__ float V2_CAT(V2_NAME(l2_state), _finalize)(const udf_state_v2 *s, const udf_ctx_v2 *ctx) {
#if ACC_I32
  return static_cast<float>(s->i[0]);
#else
  return s->f[0];
#endif
}

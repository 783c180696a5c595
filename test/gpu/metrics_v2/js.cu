// Jensen-Shannon divergence as an ABI v2 vector UDF: p = x / sum(x), q = y / sum(y)
// (nonnegative vectors), m = (p + q) / 2,
//   JS = 0.5 KL(p || m) + 0.5 KL(q || m),  with 0 log 0 = 0.
// Natural logarithm.  js_<elem> (f32 accumulator).
#define V2_CAT2(a, b) a##b
#define V2_CAT(a, b) V2_CAT2(a, b)
#define V2_NAME(n) V2_CAT(n, SFX)

extern "C" __device__ float V2_NAME(js)(const ACC *x, const ACC *y, uint32_t n_dims, const udf_ctx_v2 *ctx) {
  float sx = 0.0f, sy = 0.0f;
  for (uint32_t d = 0; d < n_dims; ++d) {
    sx += x[d];
    sy += y[d];
  }
  const float ix = 1.0f / sx, iy = 1.0f / sy;
  float js = 0.0f;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const float p = x[d] * ix, q = y[d] * iy;
    const float m = 0.5f * (p + q);
    if (p > 0.0f) js += p * logf(p / m);
    if (q > 0.0f) js += q * logf(q / m);
  }
  return 0.5f * js;
}

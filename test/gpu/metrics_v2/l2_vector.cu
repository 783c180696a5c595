// Squared L2 as an ABI v2 vector UDF: one loop over both staged vectors.
// Built per element type (README.md): l2_vector_<elem>.
#define V2_CAT2(a, b) a##b
#define V2_CAT(a, b) V2_CAT2(a, b)
#define V2_NAME(n) V2_CAT(n, SFX)

extern "C" __device__ float V2_NAME(l2_vector)(const ACC *x, const ACC *y, uint32_t n_dims, const udf_ctx_v2 *ctx) {
#if ACC_I32
  int32_t acc = 0;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const int32_t t = x[d] - y[d];
    acc += t * t;
  }
  return static_cast<float>(acc);
#else
  float acc = 0.0f;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const float t = x[d] - y[d];
    acc = fmaf(t, t, acc);  // as the built-in v1 l2, in the same order
  }
  return acc;
#endif
}

// 1-D Earth mover's distance as an ABI v2 vector UDF: both vectors (nonnegative)
// normalised to unit mass over the whole vector, then the sum over d of
// |P_x(d) - P_y(d)| (P: the prefix sums of the normalised vectors).  Two
// passes over the staged vectors: the masses, then the prefixes.  With an i32
// accumulator it works on the integer prefixes, exactly:
//   sum |C_x(d) S_y - C_y(d) S_x| / (S_x S_y).
// emd_<elem>.
#define V2_CAT2(a, b) a##b
#define V2_CAT(a, b) V2_CAT2(a, b)
#define V2_NAME(n) V2_CAT(n, SFX)

extern "C" __device__ float V2_NAME(emd)(const ACC *x, const ACC *y, uint32_t n_dims, const udf_ctx_v2 *ctx) {
#if ACC_I32
  long long sx = 0, sy = 0;
  for (uint32_t d = 0; d < n_dims; ++d) {
    sx += x[d];
    sy += y[d];
  }
  long long cx = 0, cy = 0, e = 0;
  for (uint32_t d = 0; d < n_dims; ++d) {
    cx += x[d];
    cy += y[d];
    const long long t = cx * sy - cy * sx;
    e += t < 0 ? -t : t;
  }
  return static_cast<float>(double(e) / (double(sx) * double(sy)));
#else
  float sx = 0.0f, sy = 0.0f;
  for (uint32_t d = 0; d < n_dims; ++d) {
    sx += x[d];
    sy += y[d];
  }
  const float ix = 1.0f / sx, iy = 1.0f / sy;
  float cx = 0.0f, cy = 0.0f, e = 0.0f;
  for (uint32_t d = 0; d < n_dims; ++d) {
    cx += x[d];
    cy += y[d];
    e += fabsf(cx * ix - cy * iy);
  }
  return e;
#endif
}

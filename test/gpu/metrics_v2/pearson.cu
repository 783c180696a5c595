// Pearson correlation as an ABI v2 state UDF: five running sums
// (sx, sy, sxx, syy, sxy), then r = cov / sqrt(var_x var_y) from
//   n sxy - sx sy,  n sxx - sx^2,  n syy - sy^2.
// The distance is 1 - r (--order min); with -D PEARSON_SIMILARITY=1 it is r
// itself (--order max).  With an i32 accumulator the sums are exact and the
// finalize works in 64-bit integers and double.  pearson_<elem>, pearson_sim_<elem>.
#define V2_CAT2(a, b) a##b
#define V2_CAT(a, b) V2_CAT2(a, b)
#define V2_NAME(n) V2_CAT(n, SFX)
#if PEARSON_SIMILARITY
#define PEARSON V2_NAME(pearson_sim)
#else
#define PEARSON V2_NAME(pearson)
#endif

extern "C" __device__ void PEARSON(ACC x, ACC y, udf_state_v2 *s, const udf_ctx_v2 *ctx) {
#if ACC_I32
  s->i[0] += x;
  s->i[1] += y;
  s->i[2] += x * x;
  s->i[3] += y * y;
  s->i[4] += x * y;
#else
  s->f[0] += x;
  s->f[1] += y;
  s->f[2] = fmaf(x, x, s->f[2]);
  s->f[3] = fmaf(y, y, s->f[3]);
  s->f[4] = fmaf(x, y, s->f[4]);
#endif
}

extern "C" __device__ float V2_CAT(PEARSON, _finalize)(const udf_state_v2 *s, const udf_ctx_v2 *ctx) {
#if ACC_I32
  const long long n = ctx->n_dims;
  const long long sx = s->i[0], sy = s->i[1];
  const double cov = double(n * s->i[4] - sx * sy);
  const double vx = double(n * s->i[2] - sx * sx), vy = double(n * s->i[3] - sy * sy);
  const float r = static_cast<float>(cov / sqrt(vx * vy));
#else
  const float n = static_cast<float>(ctx->n_dims);
  const float sx = s->f[0], sy = s->f[1];
  const float cov = n * s->f[4] - sx * sy;
  const float vx = n * s->f[2] - sx * sx, vy = n * s->f[3] - sy * sy;
  const float r = cov * rsqrtf(vx * vy);
#endif
#if PEARSON_SIMILARITY
  return r;
#else
  return 1.0f - r;
#endif
}

// udfc: --order min --coarse-metric l2 --monotone
// Built-in squared Euclidean distance: sum over d of (x_d - y_d)^2.
extern "C" __device__ float udf_builtin_l2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return fmaf(d, d, acc);
}

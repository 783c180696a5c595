// udfc: --order max --coarse-metric inner_product
// Built-in inner product: sum over d of x_d * y_d; larger is nearer.
extern "C" __device__ float udf_builtin_inner_product(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  return fmaf(x, y, acc);
}

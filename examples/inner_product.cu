// udfc: --order max --coarse-metric inner_product
// Inner product: sum over d of x[d] * y[d].  Larger is nearer (--order max),
// and the coarse (centroid) probe uses the built-in inner product too.
extern "C" __device__ float inner_product(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  return acc + x * y;
}

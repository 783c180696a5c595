// udfc: --order max --coarse-metric inner_product --capture scale:f32 --finalize scaled_ip_finalize
// Inner product times a scalar capture, applied by a finalize step: runtime GPU tests.
extern "C" __device__ float scaled_ip(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  return fmaf(x, y, acc);
}
extern "C" __device__ float scaled_ip_finalize(float acc, const udf_ctx_v1 *ctx) {
  return acc * UDF_CAPTURE(ctx, scale);
}

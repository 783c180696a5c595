// udfc: --capture weights:f32[]
// Weighted squared L2: sum over d of weights[d] * (x[d] - y[d])^2.
// The per-dimension weights are a device array handed to each search as
// capture 0; UDF_CAPTURE(ctx, weights) returns it as `const float *`.
extern "C" __device__ float weighted_l2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + UDF_CAPTURE(ctx, weights)[ctx->dim] * d * d;
}

// udfc: --elem f16
// Squared L2 over f16 vectors (f32 accumulator): runtime GPU tests.
extern "C" __device__ float f16_l2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + d * d;
}

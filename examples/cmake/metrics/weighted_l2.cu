// Weighted squared L2 with a per-dimension weight capture; scaled by a
// constant from a header (consumer/scale.h, found through -I).
#include <consumer/scale.h>

extern "C" __device__ float weighted_l2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + CONSUMER_SCALE * UDF_CAPTURE(ctx, weights)[ctx->dim] * d * d;
}

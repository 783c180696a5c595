// udfc: --symbol l2_sum --finalize l2_sqrt_finalize
// True Euclidean distance: sqrt of the sum of squared differences.  The
// metric accumulates the sum; the finalize function, called once per vector
// with the final accumulator, takes the square root.  The ordering is the
// same as squared L2, but the reported distances are Euclidean.
extern "C" __device__ float l2_sum(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + d * d;
}

extern "C" __device__ float l2_sqrt_finalize(float acc, const udf_ctx_v1 *ctx) {
  return sqrtf(acc);
}

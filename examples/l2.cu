// udfc:
// Squared Euclidean (L2) distance: sum over d of (x[d] - y[d])^2.
// Smaller is nearer (the default --order min); no finalize, so the distance
// is the accumulator itself.  Compile: udfc l2.cu -o l2.udfa --arch sm_90
extern "C" __device__ float l2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + d * d;
}

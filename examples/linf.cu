// udfc: --order min
// L-infinity (Chebyshev) distance: max over d of |x[d] - y[d]|.
// The accumulator keeps the largest difference seen so far; it starts at 0
// (the default --initial), which is below every |x - y|.  Smaller is nearer.
extern "C" __device__ float linf(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  return fmaxf(acc, fabsf(x - y));
}

// udfc: --order max
// Negated L1 under max order (the largest value is the nearest vector): its
// accumulator only falls, so with --monotone (the prune module,
// test/unit/runtime_gpu.cmake) the scan may stop folding a vector early.
extern "C" __device__ float neg_l1(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  return acc - fabsf(x - y);
}

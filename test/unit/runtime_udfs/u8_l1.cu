// udfc: --elem u8 --acc i32
// L1 over u8 vectors in 32-bit integers: runtime GPU tests.
extern "C" __device__ int32_t u8_l1(int32_t x, int32_t y, int32_t acc, const udf_ctx_v1 *ctx) {
  int32_t d = x - y;
  return acc + (d < 0 ? -d : d);
}

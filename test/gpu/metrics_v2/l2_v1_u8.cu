// udfc: --elem u8 --acc i32
// Squared L2 over u8 vectors, ABI v1: the v1 reference the u8 v2 L2 UDFs are
// compared with (the f32, f16 and i8 ones are udf_builtin_l2, f16_l2 and int8_l2).
extern "C" __device__ int32_t l2_v1_u8(int32_t x, int32_t y, int32_t acc, const udf_ctx_v1 *ctx) {
  int32_t d = x - y;
  return acc + d * d;
}

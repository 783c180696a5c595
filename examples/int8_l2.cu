// udfc: --elem i8 --acc i32
// Squared L2 over int8 vectors (e.g. scalar-quantized embeddings), exact in
// 32-bit integers: each coordinate arrives already widened to int32_t, and
// (x - y)^2 <= 255^2, so a 32-bit sum is exact for up to 33025 dimensions.
// Use --elem u8 for uint8 vectors; the code is the same.
extern "C" __device__ int32_t int8_l2(int32_t x, int32_t y, int32_t acc, const udf_ctx_v1 *ctx) {
  int32_t d = x - y;
  return acc + d * d;
}

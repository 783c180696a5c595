/* Source of clang14_wl2.ll / .bc: an "older producer" input (clang 14 -O0,
 * typed pointers, noundef/optnone attributes).  Regenerate with
 *   clang-14 -target nvptx64-nvidia-cuda -O0 -S -emit-llvm clang14_wl2.c
 *   clang-14 -target nvptx64-nvidia-cuda -O0 -c -emit-llvm clang14_wl2.c */
float wl2_clang14(float x, float y, float acc, const void *ctx) {
  const float *w = *(const float *const *)((const char *)ctx + 16);
  unsigned dim = *(const unsigned *)ctx;
  float d = x - y;
  return acc + w[dim] * d * d;
}

define float @m(float %x, float %y, float %acc, ptr %ctx) {
  %p = getelementptr i8, ptr %ctx, i64 9223372036854775807
  %q = getelementptr i8, ptr %p, i64 9223372036854775807
  %v = load float, ptr %q
  ret float %v
}

target triple = "x86_64-unknown-linux-gnu"
define float @f(float %x, float %y, float %acc, ptr %ctx) {
  ret float %acc
}

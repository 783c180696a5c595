; udfc: --elem i8
define float @g(float %x, float %y, float %acc, ptr %ctx) {
  ret float %acc
}

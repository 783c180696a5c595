define float @f(float %x, float %y, float %acc, ptr %ctx) {
  %old = atomicrmw fadd ptr %ctx, float 1.0 seq_cst
  ret float %acc
}

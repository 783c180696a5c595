; udfc: --order min
; L-infinity (Chebyshev) distance in LLVM IR: max over d of |x[d] - y[d]|.
; The accumulator starts at 0 (the default --initial); smaller is nearer.
define float @linf(float %x, float %y, float %acc, ptr %ctx) {
entry:
  %d = fsub float %x, %y
  %a = call float @llvm.fabs.f32(float %d)
  %r = call float @llvm.maxnum.f32(float %acc, float %a)
  ret float %r
}

declare float @llvm.fabs.f32(float)
declare float @llvm.maxnum.f32(float, float)

// udfc: --order min
// L-infinity (Chebyshev) distance in MLIR: max over d of |x[d] - y[d]|.
// The accumulator starts at 0 (the default --initial); smaller is nearer.
func.func @linf(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  %d = arith.subf %x, %y : f32
  %a = math.absf %d : f32
  %r = arith.maximumf %acc, %a : f32
  return %r : f32
}

// udfc: --capture p:f32
// Minkowski-like: |x - y|^p with p a scalar f32 capture; cf for the sign.
func.func @minkowski(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  %slot = llvm.getelementptr inbounds %ctx[16] : (!llvm.ptr) -> !llvm.ptr, i8
  %p = llvm.load %slot : !llvm.ptr -> f32
  %d = arith.subf %x, %y : f32
  %zero = arith.constant 0.0 : f32
  %neg = arith.cmpf olt, %d, %zero : f32
  cf.cond_br %neg, ^flip, ^done(%d : f32)
^flip:
  %n = arith.negf %d : f32
  cf.br ^done(%n : f32)
^done(%a: f32):
  %t = math.powf %a, %p : f32
  %e = math.sqrt %t : f32
  %r = arith.addf %acc, %e : f32
  return %r : f32
}

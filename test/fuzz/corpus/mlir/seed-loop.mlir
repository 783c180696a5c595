// udfc: --symbol sum_pow --finalize root
func.func @sum_pow(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  %d = arith.subf %x, %y : f32
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  %cube = scf.for %i = %c0 to %c3 step %c1 iter_args(%v = %one) -> (f32) {
    %m = arith.mulf %v, %d : f32
    scf.yield %m : f32
  }
  %a = math.absf %cube : f32
  %r = arith.addf %acc, %a : f32
  return %r : f32
}
func.func @root(%acc: f32, %ctx: !llvm.ptr) -> f32 {
  %r = math.cbrt %acc : f32
  return %r : f32
}

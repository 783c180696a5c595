func.func @f(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  %one = arith.constant 1.0 : f32
  %old = llvm.atomicrmw fadd %ctx, %one seq_cst : !llvm.ptr, f32
  return %acc : f32
}

func.func @f(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  %d = arith.subf %x, %q : f32
  return %d : f32
}

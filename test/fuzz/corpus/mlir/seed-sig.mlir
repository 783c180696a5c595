func.func @f(%x: f64, %y: f64, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  return %acc : f32
}

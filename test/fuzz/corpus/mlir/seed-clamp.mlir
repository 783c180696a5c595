func.func @f(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  %c = math.clampf %x to [%y, %acc] : f32
  return %c : f32
}

func.func @f(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  %t = tensor.empty() : tensor<4xf32>
  return %acc : f32
}

// udfc: --capture w:f32[] --capture v:f32[]
func.func @f(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  %slot = llvm.getelementptr inbounds %ctx[24] : (!llvm.ptr) -> !llvm.ptr, i8
  %s = llvm.load %slot : !llvm.ptr -> f32
  %r = arith.addf %acc, %s : f32
  return %r : f32
}

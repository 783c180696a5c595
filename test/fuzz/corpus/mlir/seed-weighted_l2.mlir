// udfc: --capture weights:f32[]
// Weighted squared L2 in MLIR: sum over d of weights[d] * (x[d] - y[d])^2.
// The ABI in MLIR: func.func @NAME(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32.
// ctx->dim is the i32 at byte 0 of ctx; capture i sits at byte 16 + 8*i, and
// an array capture is the pointer stored there (docs/frontends.md).
func.func @weighted_l2(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  %dim = llvm.load %ctx : !llvm.ptr -> i32
  %slot = llvm.getelementptr inbounds %ctx[16] : (!llvm.ptr) -> !llvm.ptr, i8
  %weights = llvm.load %slot : !llvm.ptr -> !llvm.ptr
  %i = arith.extui %dim : i32 to i64
  %wp = llvm.getelementptr inbounds %weights[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %w = llvm.load %wp : !llvm.ptr -> f32
  %d = arith.subf %x, %y : f32
  %dd = arith.mulf %d, %d : f32
  %wdd = arith.mulf %w, %dd : f32
  %r = arith.addf %acc, %wdd : f32
  return %r : f32
}

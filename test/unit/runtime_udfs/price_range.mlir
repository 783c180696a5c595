// udfc: --kind filter --capture prices:f32[] --capture lo:f32 --capture hi:f32 --capture n_ids:i32
// A filter in MLIR for the GPU tests: keep ids in [0, n_ids) whose price is in [lo, hi].
// The filter ABI in MLIR: func.func @NAME(%query: i32, %id: i64, %ctx: !llvm.ptr) -> i1.
func.func @price_range(%query: i32, %id: i64, %ctx: !llvm.ptr) -> i1 {
  %p_slot = llvm.getelementptr inbounds %ctx[16] : (!llvm.ptr) -> !llvm.ptr, i8
  %prices = llvm.load %p_slot : !llvm.ptr -> !llvm.ptr
  %lo_slot = llvm.getelementptr inbounds %ctx[24] : (!llvm.ptr) -> !llvm.ptr, i8
  %lo = llvm.load %lo_slot : !llvm.ptr -> f32
  %hi_slot = llvm.getelementptr inbounds %ctx[32] : (!llvm.ptr) -> !llvm.ptr, i8
  %hi = llvm.load %hi_slot : !llvm.ptr -> f32
  %n_slot = llvm.getelementptr inbounds %ctx[40] : (!llvm.ptr) -> !llvm.ptr, i8
  %n = llvm.load %n_slot : !llvm.ptr -> i32
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant 0 : i64
  %ge0 = arith.cmpi sge, %id, %zero : i64
  %ltn = arith.cmpi slt, %id, %n64 : i64
  %inb = arith.andi %ge0, %ltn : i1
  %r = scf.if %inb -> (i1) {
    %pp = llvm.getelementptr inbounds %prices[%id] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %p = llvm.load %pp : !llvm.ptr -> f32
    %a = arith.cmpf oge, %p, %lo : f32
    %b = arith.cmpf ole, %p, %hi : f32
    %ab = arith.andi %a, %b : i1
    scf.yield %ab : i1
  } else {
    %f = arith.constant false
    scf.yield %f : i1
  }
  return %r : i1
}

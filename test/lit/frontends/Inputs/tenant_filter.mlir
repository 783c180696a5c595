// udfc: --kind filter --capture tenants:i32[] --capture n_ids:i32 --capture tenant:i32
// A filter in MLIR: keep the ids in [0, n_ids) whose tenant, tenants[id], is
// the tenant searched for.  The filter ABI in MLIR:
// func.func @NAME(%query: i32, %id: i64, %ctx: !llvm.ptr) -> i1.
// Capture i sits at byte 16 + 8*i of ctx; an array capture is the pointer
// stored there, a scalar one the value (docs/frontends.md).
func.func @same_tenant(%query: i32, %id: i64, %ctx: !llvm.ptr) -> i1 {
  %t_slot = llvm.getelementptr inbounds %ctx[16] : (!llvm.ptr) -> !llvm.ptr, i8
  %tenants = llvm.load %t_slot : !llvm.ptr -> !llvm.ptr
  %n_slot = llvm.getelementptr inbounds %ctx[24] : (!llvm.ptr) -> !llvm.ptr, i8
  %n = llvm.load %n_slot : !llvm.ptr -> i32
  %want_slot = llvm.getelementptr inbounds %ctx[32] : (!llvm.ptr) -> !llvm.ptr, i8
  %want = llvm.load %want_slot : !llvm.ptr -> i32
  %n64 = arith.extsi %n : i32 to i64
  %zero = arith.constant 0 : i64
  %ge0 = arith.cmpi sge, %id, %zero : i64
  %ltn = arith.cmpi slt, %id, %n64 : i64
  %inb = arith.andi %ge0, %ltn : i1
  %r = scf.if %inb -> (i1) {
    %tp = llvm.getelementptr inbounds %tenants[%id] : (!llvm.ptr, i64) -> !llvm.ptr, i32
    %t = llvm.load %tp : !llvm.ptr -> i32
    %eq = arith.cmpi eq, %t, %want : i32
    scf.yield %eq : i1
  } else {
    %f = arith.constant false
    scf.yield %f : i1
  }
  return %r : i1
}

; udfc: --kind filter --capture tenants:i32[] --capture n_ids:i32 --capture tenant:i32
; A filter in LLVM IR: keep the ids in [0, n_ids) whose tenant, tenants[id],
; is the tenant searched for.  The filter ABI in LLVM IR:
; i1 @NAME(i32 %query, i64 %id, ptr %ctx).  Capture i sits at byte 16 + 8*i
; of ctx; an array capture is the pointer stored there, a scalar one the value.
target triple = "nvptx64-nvidia-cuda"

define i1 @same_tenant(i32 %query, i64 %id, ptr %ctx) {
entry:
  %n_slot = getelementptr inbounds i8, ptr %ctx, i64 24
  %n = load i32, ptr %n_slot, align 4
  %n64 = sext i32 %n to i64
  %ge0 = icmp sge i64 %id, 0
  %ltn = icmp slt i64 %id, %n64
  %inb = and i1 %ge0, %ltn
  br i1 %inb, label %read, label %out

read:
  %t_slot = getelementptr inbounds i8, ptr %ctx, i64 16
  %tenants = load ptr, ptr %t_slot, align 8
  %tp = getelementptr inbounds i32, ptr %tenants, i64 %id
  %t = load i32, ptr %tp, align 4
  %want_slot = getelementptr inbounds i8, ptr %ctx, i64 32
  %want = load i32, ptr %want_slot, align 4
  %eq = icmp eq i32 %t, %want
  br label %out

out:
  %r = phi i1 [ false, %entry ], [ %eq, %read ]
  ret i1 %r
}

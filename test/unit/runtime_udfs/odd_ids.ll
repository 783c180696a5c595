; udfc: --kind filter
; A filter in LLVM IR for the GPU tests: keep odd ids.
; The filter ABI in LLVM IR: i1 @NAME(i32 %query, i64 %id, ptr %ctx).
target triple = "nvptx64-nvidia-cuda"

define i1 @odd_ids(i32 %query, i64 %id, ptr %ctx) {
entry:
  %bit = and i64 %id, 1
  %odd = icmp ne i64 %bit, 0
  ret i1 %odd
}

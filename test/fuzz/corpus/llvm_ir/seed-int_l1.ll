; udfc: --elem i8
; L1 over i8 elements with an i32 accumulator (llvm.abs -> __nv_abs).
define i32 @int_l1(i32 %x, i32 %y, i32 %acc, ptr %ctx) {
  %d = sub i32 %x, %y
  %a = call i32 @llvm.abs.i32(i32 %d, i1 false)
  %r = add i32 %acc, %a
  ret i32 %r
}
declare i32 @llvm.abs.i32(i32, i1)

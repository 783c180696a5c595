; udfc: --capture weights:f32[]
; Weighted squared L2 in LLVM IR: sum over d of weights[d] * (x[d] - y[d])^2.
; The ABI in LLVM IR: float @NAME(float %x, float %y, float %acc, ptr %ctx).
; ctx->dim is the i32 at byte 0 of ctx; capture i sits at byte 16 + 8*i, and
; an array capture is the pointer stored there (docs/frontends.md).
target triple = "nvptx64-nvidia-cuda"

define float @weighted_l2(float %x, float %y, float %acc, ptr %ctx) {
entry:
  %dim = load i32, ptr %ctx, align 4
  %slot = getelementptr inbounds i8, ptr %ctx, i64 16
  %weights = load ptr, ptr %slot, align 8
  %i = zext i32 %dim to i64
  %wp = getelementptr inbounds float, ptr %weights, i64 %i
  %w = load float, ptr %wp, align 4
  %d = fsub float %x, %y
  %dd = fmul float %d, %d
  %wdd = fmul float %w, %dd
  %r = fadd float %acc, %wdd
  ret float %r
}

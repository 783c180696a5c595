// udfc: --order min
// Log-cosh distance in MLIR: sum over d of log(cosh(x[d] - y[d])), a smooth
// L1 that is quadratic near 0.  math ops become libdevice calls (__nv_coshf,
// __nv_logf); scf.if skips them for equal coordinates.
func.func @log_cosh(%x: f32, %y: f32, %acc: f32, %ctx: !llvm.ptr) -> f32 {
  %d = arith.subf %x, %y : f32
  %zero = arith.constant 0.0 : f32
  %same = arith.cmpf oeq, %d, %zero : f32
  %term = scf.if %same -> (f32) {
    scf.yield %zero : f32
  } else {
    %c = math.cosh %d : f32
    %l = math.log %c : f32
    scf.yield %l : f32
  }
  %r = arith.addf %acc, %term : f32
  return %r : f32
}

// udfc: --symbol undef_helper_metric
// A metric calling a function no artifact defines: it compiles (udfc makes
// LTO-IR), and every link of it fails with "undefined symbol: missing_helper".
// The GPU test OnDemandLinkFailureFailsTheSearchOnly links it on demand.
extern "C" __device__ float missing_helper(float);
extern "C" __device__ float undef_helper_metric(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  return acc + missing_helper(x - y);
}

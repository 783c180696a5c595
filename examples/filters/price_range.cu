// udfc: --kind filter --capture prices:f32[] --capture lo:f32 --capture hi:f32 --capture n_ids:i32
// Range filter on a numeric attribute: keep the vectors whose price lies in
// [lo, hi].  prices[id] is the price of the vector with user id `id` (an f32
// array of n_ids entries, indexed by id); ids outside 0 .. n_ids - 1 are
// rejected, which also keeps the read in bounds.  A NaN price is never in
// range (both comparisons are false).
extern "C" __device__ bool price_in_range(uint32_t query, int64_t id, const udf_ctx_v1 *ctx) {
  (void)query;
  if (id < 0 || id >= UDF_CAPTURE(ctx, n_ids)) return false;
  const float p = UDF_CAPTURE(ctx, prices)[id];
  return p >= UDF_CAPTURE(ctx, lo) && p <= UDF_CAPTURE(ctx, hi);
}

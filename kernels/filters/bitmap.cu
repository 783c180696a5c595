// udfc: --kind filter --capture bitmap:u8[] --capture n_ids:i32
// Built-in bitmap filter (ABI ivf_flat.filter.v1): an allow-list over ids,
// one bit per id -- id i is kept when bit i % 8 of byte i / 8 is set.  Ids
// below 0 or at least n_ids (the bitmap's length in bits) are rejected, so
// the bitmap is never read out of bounds.  The same bitmap applies to every
// query; see docs/filters.md.
extern "C" __device__ bool udf_builtin_bitmap(uint32_t query, int64_t id, const udf_ctx_v1 *ctx) {
  if (id < 0 || id >= static_cast<int64_t>(UDF_CAPTURE(ctx, n_ids))) return false;
  const unsigned char *bits = UDF_CAPTURE(ctx, bitmap);
  return (bits[id >> 3] >> (id & 7)) & 1u;
}

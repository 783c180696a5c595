// udfc: --kind filter --capture tenants:i32[] --capture n_ids:i32 --capture tenant:i32
// Multi-tenant search: keep only the vectors that belong to one tenant.
// tenants[id] is the tenant of the vector with user id `id` (an i32 array of
// n_ids entries, indexed by id, not by dimension: a filter's arrays may have
// any length); `tenant` is the tenant searched for.  Ids outside
// 0 .. n_ids - 1 have no tenant entry and are rejected, which also keeps the
// read in bounds.  The same tenant is used for every query of the batch
// (`query` is unused); see price_range.cu and docs/filters.md for filters
// that depend on the query.
extern "C" __device__ bool same_tenant(uint32_t query, int64_t id, const udf_ctx_v1 *ctx) {
  (void)query;
  if (id < 0 || id >= UDF_CAPTURE(ctx, n_ids)) return false;
  return UDF_CAPTURE(ctx, tenants)[id] == UDF_CAPTURE(ctx, tenant);
}

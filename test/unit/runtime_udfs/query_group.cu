// udfc: --kind filter --capture n_groups:i32
// A per-query filter for the GPU tests: query q keeps the ids in its residue
// class, id % n_groups == q % n_groups.
extern "C" __device__ bool query_group(uint32_t query, int64_t id, const udf_ctx_v1 *ctx) {
  const int32_t g = UDF_CAPTURE(ctx, n_groups);
  return g > 0 && id % g == static_cast<int64_t>(query % static_cast<uint32_t>(g));
}

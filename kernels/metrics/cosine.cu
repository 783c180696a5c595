// udfc: --order min --coarse-metric cosine --finalize udf_builtin_cosine_finalize
// Built-in cosine distance, 1 - <x, y>, for L2-normalized vectors: ABI v1's
// accumulator is one scalar, so the norms cannot be folded in per coordinate.
// The runtime normalizes the dataset and the queries when an artifact's
// coarse metric is cosine.
extern "C" __device__ float udf_builtin_cosine(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  return fmaf(x, y, acc);
}

extern "C" __device__ float udf_builtin_cosine_finalize(float acc, const udf_ctx_v1 *ctx) {
  return 1.0f - acc;
}

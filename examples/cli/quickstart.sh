# A weighted squared-L2 metric, written as CUDA C++: acc = f(x, y, acc, ctx) per coordinate.
cat > wl2.cu <<'CU'
extern "C" __device__ float weighted_l2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + UDF_CAPTURE(ctx, weights)[ctx->dim] * d * d;
}
CU
# Compile it to an artifact (LTO-IR for two archs + a manifest) and print the manifest: no GPU needed.
udfc wl2.cu --capture 'weights:f32[]' --arch sm_80,sm_90 -o wl2.udfa
udfc --inspect wl2.udfa
# Link it into the IVF-Flat scan kernels: a module for four GPU generations, still no GPU needed.
udf-link wl2.udfa --arch sm_80,sm_90,sm_100,sm_120 -o wl2.udfm
# With a GPU: index 20,000 clustered vectors, search 100 queries, print recall against exact search.
if nvidia-smi -L >/dev/null 2>&1; then
  python3 -c 'import numpy as np; r = np.random.default_rng(7); c = r.standard_normal((64, 32), dtype=np.float32)
for name, n in ("base", 20000), ("queries", 100):
    np.save(name + ".npy", c[r.integers(64, size=n)] + 0.3 * r.standard_normal((n, 32), dtype=np.float32))
np.save("weights.npy", np.linspace(0.5, 1.5, 32, dtype=np.float32))'
  udf-run wl2.udfm --dataset base.npy --queries queries.npy --capture weights=weights.npy \
          --n-lists 64 --n-probes 8 --k 10 --out result.npy --check
fi

"""The roofline of refine's reads: a kernel that only gathers the candidates' rows (random rows of
512 bytes, 10k x 256 of a 1M x 128 f32 dataset) and sums them, against a copy of the dataset."""
import cupy as cp, numpy as np
n, dim, b, m = 1_000_000, 128, 10000, 256
rs = cp.random.RandomState(1234)
x = rs.standard_normal((n, dim), dtype=cp.float32)
idx = rs.randint(0, n, (b, m)).astype(cp.int64)
src = r'''
extern "C" __global__ void gather(const float4* __restrict__ x, const long long* __restrict__ idx, long long nidx, float* out) {
  const int lane = threadIdx.x & 31;
  long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  const long long nw = ((long long)gridDim.x * blockDim.x) >> 5;
  float s = 0.f;
  for (long long r0 = w * U; r0 < nidx; r0 += nw * U) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { long long r = r0 + u; v[u] = r < nidx ? __ldg(x + idx[r] * 32 + lane) : make_float4(0,0,0,0); }
#pragma unroll
    for (int u = 0; u < U; ++u) s += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  if (s == 12345.f) out[0] = s;
}
'''
def timeit(f, reps=30):
    f(); cp.cuda.Device().synchronize()
    e0, e1 = cp.cuda.Event(), cp.cuda.Event(); ts = []
    for _ in range(reps):
        e0.record(); f(); e1.record(); e1.synchronize(); ts.append(cp.cuda.get_elapsed_time(e0, e1))
    return float(np.median(ts))
y = cp.empty_like(x)
tc = timeit(lambda: cp.copyto(y, x))
bw = 2 * x.nbytes / tc / 1e9
need = b * m * dim * 4
print(f"copy: {tc:.3f} ms, {bw:.2f} TB/s; one read of the candidates {need / bw / 1e9:.3f} ms")
out = cp.zeros(1, cp.float32)
for U in (1, 2, 4, 8):
    k = cp.RawKernel(src.replace("U", str(U)).replace("__restrict__", "__restrict__"), "gather", options=("-DU=%d" % U,))
    for blocks_per_sm in (4, 8, 16):
        grid = 132 * blocks_per_sm
        t = timeit(lambda: k((grid,), (256,), (x, idx, cp.int64(b * m), out)))
        print(f"gather U={U} grid={grid}x256: {t:.3f} ms, {need / t / 1e9:.2f} TB/s, {t / (need / bw / 1e9):.2f}x one read")
# a sorted gather (same rows, in order) for comparison
idx_s = cp.sort(idx.ravel())
k = cp.RawKernel(src.replace("U", "4"), "gather")
t = timeit(lambda: k((132 * 8,), (256,), (x, idx_s, cp.int64(b * m), out)))
print(f"sorted ids, U=4: {t:.3f} ms")

"""Refine's reads in the scan's order against whole rows: 10k x 256 random rows of 512 bytes.
whole: a warp reads a row with one load (32 lanes x 16 B), U rows in flight.
quarters: a warp takes 32 rows and reads them a 128-byte quarter at a time (8 lanes a row, 4 rows a load,
8 loads a quarter), the four quarters one after another (the scan's batches)."""
import cupy as cp, numpy as np
n, dim, b, m = 1_000_000, 128, 10000, 256
rs = cp.random.RandomState(1234)
x = rs.standard_normal((n, dim), dtype=cp.float32)
idx = rs.randint(0, n, (b, m)).astype(cp.int64)
src = r'''
extern "C" __global__ void whole(const float4* __restrict__ x, const long long* __restrict__ idx, long long nidx, float* out) {
  const int lane = threadIdx.x & 31;
  long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  const long long nw = ((long long)gridDim.x * blockDim.x) >> 5;
  float s = 0.f;
  for (long long r0 = w * 8; r0 < nidx; r0 += nw * 8) {
    float4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = __ldg(x + idx[r0 + u] * 32 + lane);
#pragma unroll
    for (int u = 0; u < 8; ++u) s += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  if (s == 12345.f) out[0] = s;
}
extern "C" __global__ void quarters(const float4* __restrict__ x, const long long* __restrict__ idx, long long nidx, float* out, int together) {
  const int lane = threadIdx.x & 31, part = lane & 7, sub = lane >> 3;
  long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  const long long nw = ((long long)gridDim.x * blockDim.x) >> 5;
  float s = 0.f;
  for (long long r0 = w * 32; r0 < nidx; r0 += nw * 32) {
    const long long myrow = idx[r0 + lane];
    if (together) {
      float4 v[32];
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int i = 0; i < 8; ++i) { long long r = __shfl_sync(~0u, myrow, 4 * i + sub); v[q * 8 + i] = __ldg(x + r * 32 + q * 8 + part); }
#pragma unroll
      for (int i = 0; i < 32; ++i) s += v[i].x + v[i].y + v[i].z + v[i].w;
    } else {
#pragma unroll 1
      for (int q = 0; q < 4; ++q) {
        float4 v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) { long long r = __shfl_sync(~0u, myrow, 4 * i + sub); v[i] = __ldg(x + r * 32 + q * 8 + part); }
#pragma unroll
        for (int i = 0; i < 8; ++i) s += v[i].x + v[i].y + v[i].z + v[i].w;
        s = __shfl_xor_sync(~0u, s, 1);  // a dependency between quarters, as the fold has
      }
    }
  }
  if (s == 12345.f) out[0] = s;
}
'''
mod = cp.RawModule(code=src)
def timeit(f, reps=30):
    f(); cp.cuda.Device().synchronize()
    e0, e1 = cp.cuda.Event(), cp.cuda.Event(); ts = []
    for _ in range(reps):
        e0.record(); f(); e1.record(); e1.synchronize(); ts.append(cp.cuda.get_elapsed_time(e0, e1))
    return float(np.median(ts))
out = cp.zeros(1, cp.float32); N = cp.int64(b * m)
for wps in (24, 48):
    grid = 132 * wps // 4
    t1 = timeit(lambda: mod.get_function("whole")((grid,), (128,), (x, idx, N, out)))
    t2 = timeit(lambda: mod.get_function("quarters")((grid,), (128,), (x, idx, N, out, cp.int32(0))))
    t3 = timeit(lambda: mod.get_function("quarters")((grid,), (128,), (x, idx, N, out, cp.int32(1))))
    print(f"{wps} warps an SM: whole rows 8 in flight {t1:.3f} ms; quarters one after another {t2:.3f} ms; quarters all in flight {t3:.3f} ms")

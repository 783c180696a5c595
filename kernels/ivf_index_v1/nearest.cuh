// Stage nearest: the build's nearest lists (k-means and the assignment):
// for each row, its n_out nearest centroids and their distances, in one pass
// over the centroids without their keys in memory.  Two kernels give the
// same result, bit for bit: `nearest` (64-centroid tiles) for a few lists,
// `nearest_wide` (128-centroid tiles, twice the work a thread) for many.
#pragma once
#include "coarse.cuh"

// The build's nearest lists (udf_ivf_index_v1_nearest): a block of 64 rows
// scans every centroid, a tile of 64 at a time.  Each thread folds 8 rows
// (ty + 8i) x 4 centroids (tx + 16j) exactly as the coarse tile folds its
// 4 x 4, so every key is the same bits.  The 16 lanes of a half-warp share
// ty and so hold all 64 candidates of a row in a tile; they keep the row's
// n_out best as a sorted list, entry h in lane h, and insert the tile's
// candidates that beat the n_out-th one at a time.  The loops that insert
// are warp-uniform (both half-warps step together), so the shuffles never
// diverge.
namespace {

constexpr int kNearRowsPerThread = UDF_IVF_NEAREST_V1_ROWS / 8;

struct NearStage {
  float4 r[4];  // rows: 64 x 8 chunks, 4 a thread
  float4 c[4];  // centroids: 64 x 8 chunks, 4 a thread
};

__device__ __forceinline__ void near_load(const udf_ivf_coarse_keys_args_v1& a, uint32_t r0, uint32_t c0, uint32_t d0, bool vec,
                                          NearStage& st) {
  constexpr int W = kCoarseDK / 4;
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const uint32_t i = threadIdx.x + u * kThreads;
    st.r[u] = row_chunk(a, r0 + i / W, d0 + 4 * (i % W), vec);
    st.c[u] = centroid_chunk(a, c0 + i / W, d0 + 4 * (i % W), vec);
  }
}

__device__ __forceinline__ void near_store(const NearStage& st, float4* sr, float4* sc) {
  constexpr int W = kCoarseDK / 4, RW = kCoarseRow / 4;
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const uint32_t i = threadIdx.x + u * kThreads;
    sr[(i / W) * RW + i % W] = st.r[u];
    sc[(i / W) * RW + i % W] = st.c[u];
  }
}

// The squared norms of the thread's rows over this step's dimensions (the
// expanded L2's |x|^2), in the coarse tile's order.
__device__ __forceinline__ void near_row_norms(const float4* sr, int ty, float (&rn)[kNearRowsPerThread]) {
  constexpr int RW = kCoarseRow / 4;
#pragma unroll 2
  for (int q = 0; q < kCoarseDK / 4; ++q) {
#pragma unroll
    for (int i = 0; i < kNearRowsPerThread; ++i) {
      const float4 x = sr[(ty + 8 * i) * RW + q];
      rn[i] = fmaf(x.x, x.x, rn[i]);
      rn[i] = fmaf(x.y, x.y, rn[i]);
      rn[i] = fmaf(x.z, x.z, rn[i]);
      rn[i] = fmaf(x.w, x.w, rn[i]);
    }
  }
}

// Offers N candidates of one row (keys ck, lists cv; a list past n_lists is
// none) to the row's sorted list (lk, lv: entry lane & 15 of the half-warp),
// one candidate a half-warp a round: those that precede the list's n_out-th
// entry in (key, list) order at first, then, after each round, those whose
// keys are not over its key (a candidate is inserted only if it still
// precedes that entry when its turn comes).  The result does not depend on
// the order: (key, list) is a total order.
template <int N>
__device__ __forceinline__ void near_offer(float& lk, uint32_t& lv, const float (&ck)[N], const uint32_t (&cv)[N],
                                           uint32_t n_lists, uint32_t n_out, int lane) {
  static_assert(N <= 32, "a bit a candidate");
  const int h = lane & 15;
  const unsigned half = 0xFFFFu << (lane & 16);
  float tk = __shfl_sync(kFull, lk, static_cast<int>(n_out - 1), 16);
  uint32_t tv = __shfl_sync(kFull, lv, static_cast<int>(n_out - 1), 16);
  uint32_t pend = 0;
#pragma unroll
  for (int j = 0; j < N; ++j)
    if (cv[j] < n_lists && entry_less(ck[j], cv[j], tk, tv)) pend |= 1u << j;
  while (__any_sync(kFull, pend != 0)) {
    const unsigned mine = __ballot_sync(kFull, pend != 0) & half;
    const int src = mine ? __ffs(mine) - 1 : lane;
    const int j = pend ? __ffs(pend) - 1 : 0;
    float my_k = ck[0];
    uint32_t my_v = cv[0];
#pragma unroll
    for (int jj = 1; jj < N; ++jj)
      if (j == jj) my_k = ck[jj], my_v = cv[jj];
    const float nk = __shfl_sync(kFull, my_k, src);
    const uint32_t nv = __shfl_sync(kFull, my_v, src);
    if (lane == src && mine) pend &= pend - 1;
    const bool ins = mine != 0 && entry_less(nk, nv, tk, tv);
    const int pos = __popc(__ballot_sync(kFull, h < static_cast<int>(n_out) && entry_less(lk, lv, nk, nv)) & half);
    const float uk = __shfl_up_sync(kFull, lk, 1, 16);
    const uint32_t uv = __shfl_up_sync(kFull, lv, 1, 16);
    if (ins && h == pos) {
      lk = nk;
      lv = nv;
    } else if (ins && h > pos) {
      lk = uk;
      lv = uv;
    }
    tk = __shfl_sync(kFull, lk, static_cast<int>(n_out - 1), 16);
    tv = __shfl_sync(kFull, lv, static_cast<int>(n_out - 1), 16);
#pragma unroll
    for (int jj = 0; jj < N; ++jj)
      if (ck[jj] > tk) pend &= ~(1u << jj);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_nearest(udf_ivf_nearest_args_v1 na) {
  constexpr int TR = UDF_IVF_NEAREST_V1_ROWS, TC = UDF_IVF_COARSE_V1_CENTROIDS, RPT = kNearRowsPerThread;
  static_assert(kThreads == 128 && TR == 64 && TC == 64 && kCoarseDK == 32, "a 16 x 8 thread grid, 8 x 4 outputs per thread");
  static_assert(UDF_IVF_NEAREST_V1_MAX_OUT <= 16, "a row's list fits a half-warp");
  const udf_ivf_coarse_keys_args_v1& a = na.k;
  // Two buffers: a step folds one while its next step's chunks are stored in
  // the other, so a step needs one barrier.
  __shared__ float4 sr[2][TR * kCoarseRow / 4];
  __shared__ float4 sc[2][TC * kCoarseRow / 4];
  const uint32_t r0 = blockIdx.x * TR;
  const int lane = threadIdx.x & 31, tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const bool l2 = a.metric == UDF_IVF_INDEX_V1_L2;
  const bool vec = a.row_elem == 0 && a.dim % 4 == 0 && a.row_stride % 4 == 0 && (reinterpret_cast<uintptr_t>(a.rows) & 15) == 0;
  const uint32_t n_tiles = (a.n_lists + TC - 1) / TC, n_chunks = (a.dim + kCoarseDK - 1) / kCoarseDK;
  // Expanded L2 (k-means): dot products, then |x|^2 + |c|^2 - 2 x.c.
  const bool expanded = l2 && na.expanded != 0;
  float rn[RPT] = {};  // the rows' |x|^2, summed in the first tile
  float lk[RPT];
  uint32_t lv[RPT];
#pragma unroll
  for (int i = 0; i < RPT; ++i) lk[i] = __int_as_float(0x7f800000), lv[i] = 0xFFFFFFFFu;
  NearStage st;
  near_load(a, r0, 0, 0, vec, st);
  near_store(st, sr[0], sc[0]);
  __syncthreads();
  uint32_t cur = 0;
  for (uint32_t t = 0; t < n_tiles; ++t) {
    const uint32_t c0 = t * TC;
    float acc[RPT][4] = {};
    for (uint32_t k = 0; k < n_chunks; ++k) {
      // The next step's loads are in flight while this one folds; they go to
      // the other buffer, which every thread finished reading before the
      // last barrier.
      const bool more = k + 1 < n_chunks || t + 1 < n_tiles;
      if (k + 1 < n_chunks)
        near_load(a, r0, c0, (k + 1) * kCoarseDK, vec, st);
      else if (t + 1 < n_tiles)
        near_load(a, r0, c0 + TC, 0, vec, st);
      if (expanded && t == 0) near_row_norms(sr[cur], ty, rn);
      if (l2 && !expanded)
        coarse_tile_step<true>(sr[cur], sc[cur], tx, ty, acc);
      else
        coarse_tile_step<false>(sr[cur], sc[cur], tx, ty, acc);
      if (more) near_store(st, sr[cur ^ 1], sc[cur ^ 1]);
      __syncthreads();
      cur ^= 1;
    }
    float cn[4] = {};
    if (expanded)
#pragma unroll
      for (int j = 0; j < 4; ++j) cn[j] = c0 + tx + 16 * j < a.n_lists ? __ldg(na.centroid_norms + c0 + tx + 16 * j) : 0.0f;
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
      float ck[4];
      uint32_t cv[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        cv[j] = c0 + tx + 16 * j;
        const float d = expanded ? fmaf(-2.0f, acc[i][j], rn[i] + cn[j]) : acc[i][j];
        ck[j] = from_ordered_bits(ordered_bits(coarse_key(d, l2)));
      }
      near_offer(lk[i], lv[i], ck, cv, a.n_lists, na.n_out, lane);
    }
  }
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const uint32_t r = r0 + ty + 8 * i;
    if (r < a.n_rows && static_cast<uint32_t>(tx) < na.n_out) {
      const uint64_t o = uint64_t(r) * na.n_out + tx;
      na.out_lists[o] = lv[i];
      if (na.out_dists) na.out_dists[o] = l2 ? lk[i] : -lk[i];
    }
  }
}

// The build's nearest lists over many centroids
// (udf_ivf_index_v1_nearest_wide): a block of 128 rows scans the centroids
// 128 at a time, each thread folding 8 rows (4ty + i, 64 + 4ty + i) x 8
// centroids (4tx + j, 64 + 4tx + j).  The dimensions go through shared
// memory kWideDK at a time as lines of one dimension (128 rows, then 128
// centroids), so that a thread reads its 8 rows' and 8 centroids' values of
// a dimension in four 16-byte loads for 64 FMAs.  The half-warp of a ty
// holds a row's candidates of a tile and keeps its list as the 64-centroid
// kernel does.  Every key sums its dimensions in order from zero over whole
// kCoarseDK chunks, the padding adding exact zeros, and is formed as that
// kernel forms it: the same bits, so the same lists.
namespace {

constexpr int kWideThreads = UDF_IVF_NEAREST_WIDE_V1_THREADS;
constexpr int kWideTile = UDF_IVF_NEAREST_WIDE_V1_ROWS;  // rows a block, centroids a tile
constexpr int kWideDK = 8;                               // dimensions a step
constexpr int kWideLine = kWideTile + 4;                 // floats a dimension's line: 16-byte aligned lines,
                                                         // and a warp's transposing stores on 32 banks
constexpr int kWideOut = 8;                              // rows (and centroids) a thread
static_assert(kCoarseDK % kWideDK == 0, "steps of whole chunks");
static_assert(kWideThreads == kWideTile * kWideDK / 4, "one 16-byte chunk of a row and of a centroid a thread and step");
static_assert(kWideThreads == 256 && kWideTile == 128, "a 16 x 16 thread grid, 8 x 8 outputs a thread");

// A step's chunk of four dimensions of row / centroid threadIdx.x / 2.
struct WideStage {
  float4 r, c;
};

__device__ __forceinline__ void wide_load(const udf_ivf_coarse_keys_args_v1& a, uint32_t r0, uint32_t c0, uint32_t d0, bool vec,
                                          WideStage& st) {
  const uint32_t i = threadIdx.x, d = d0 + 4 * (i % 2);
  st.r = row_chunk(a, r0 + i / 2, d, vec);
  st.c = centroid_chunk(a, c0 + i / 2, d, vec);
}

// The chunk into the dimensions' lines (sr: rows, sc: centroids).
__device__ __forceinline__ void wide_store(const WideStage& st, float* sr, float* sc) {
  const uint32_t i = threadIdx.x, j = i / 2, d = 4 * (i % 2);
  sr[(d + 0) * kWideLine + j] = st.r.x;
  sr[(d + 1) * kWideLine + j] = st.r.y;
  sr[(d + 2) * kWideLine + j] = st.r.z;
  sr[(d + 3) * kWideLine + j] = st.r.w;
  sc[(d + 0) * kWideLine + j] = st.c.x;
  sc[(d + 1) * kWideLine + j] = st.c.y;
  sc[(d + 2) * kWideLine + j] = st.c.z;
  sc[(d + 3) * kWideLine + j] = st.c.w;
}

// A step's fold: (x - y)^2 (kL2) or x y; with kNorms, lane tx < 8 of a
// half-warp also sums x^2 of the half-warp's row tx into rn.
template <bool kL2, bool kNorms>
__device__ __forceinline__ void wide_step(const float* sr, const float* sc, int tx, int ty, float (&acc)[kWideOut][kWideOut],
                                          float& rn) {
#pragma unroll
  for (int k = 0; k < kWideDK; ++k) {
    const float4 x0 = *reinterpret_cast<const float4*>(sr + k * kWideLine + 4 * ty);
    const float4 x1 = *reinterpret_cast<const float4*>(sr + k * kWideLine + kWideTile / 2 + 4 * ty);
    const float4 y0 = *reinterpret_cast<const float4*>(sc + k * kWideLine + 4 * tx);
    const float4 y1 = *reinterpret_cast<const float4*>(sc + k * kWideLine + kWideTile / 2 + 4 * tx);
    const float x[kWideOut] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    const float y[kWideOut] = {y0.x, y0.y, y0.z, y0.w, y1.x, y1.y, y1.z, y1.w};
    if (kNorms) {
      float v = x[0];
#pragma unroll
      for (int i = 1; i < kWideOut; ++i)
        if (tx == i) v = x[i];
      rn = fmaf(v, v, rn);
    }
#pragma unroll
    for (int i = 0; i < kWideOut; ++i) {
#pragma unroll
      for (int j = 0; j < kWideOut; ++j) {
        if (kL2) {
          const float t = x[i] - y[j];
          acc[i][j] = fmaf(t, t, acc[i][j]);
        } else {
          acc[i][j] = fmaf(x[i], y[j], acc[i][j]);
        }
      }
    }
  }
}

// coarse_key's key of a distance as the selection compares it:
// from_ordered_bits(ordered_bits(coarse_key(d, l2))), bit for bit (NaN as
// +inf, -0 as +0), in three instructions.
__device__ __forceinline__ float near_key(float d, bool l2) {
  const float k = l2 ? d : -d;
  return k != k ? __int_as_float(0x7f800000) : k + 0.0f;
}

// Row (or centroid) i of a thread at grid place t (ty or tx), in its block's tile.
__device__ __forceinline__ uint32_t wide_place(int t, int i) { return (i / 4) * (kWideTile / 2) + 4 * t + i % 4; }

// The block's shared memory: the steps' two buffers (a step folds one while
// its next step's chunks are stored in the other, so a step needs one
// barrier); each row's list (entry h: lane h of the row's half-warp, which
// alone reads and writes it) and |x|^2.
struct WideShared {
  float sr[2][kWideDK * kWideLine], sc[2][kWideDK * kWideLine];
  float lk[kWideTile][16];
  uint32_t lv[kWideTile][16];
  float rn[kWideTile];
};
static_assert(UDF_IVF_NEAREST_V1_MAX_OUT <= 16, "a row's list fits a half-warp");

template <bool kL2>
__device__ __forceinline__ void nearest_wide(const udf_ivf_nearest_args_v1& na, WideShared& sh) {
  const udf_ivf_coarse_keys_args_v1& a = na.k;
  const uint32_t r0 = blockIdx.x * kWideTile;
  const int lane = threadIdx.x & 31, tx = lane & 15, ty = (threadIdx.x >> 5) * 2 + (lane >> 4);
  const bool l2 = a.metric == UDF_IVF_INDEX_V1_L2;
  const bool vec = a.row_elem == 0 && a.dim % 4 == 0 && a.row_stride % 4 == 0 && (reinterpret_cast<uintptr_t>(a.rows) & 15) == 0;
  const uint32_t n_tiles = div_up(a.n_lists, kWideTile), n_steps = div_up(a.dim, kCoarseDK) * (kCoarseDK / kWideDK);
  // Expanded L2 (k-means): dot products, then |x|^2 + |c|^2 - 2 x.c, |x|^2
  // summed in the first tile (kNorms) as the 64-centroid kernel sums it.
  const bool expanded = !kL2 && l2 && na.expanded != 0;
  for (uint32_t i = threadIdx.x; i < kWideTile * 16; i += kWideThreads) {
    sh.lk[i / 16][i % 16] = __int_as_float(0x7f800000);
    sh.lv[i / 16][i % 16] = 0xFFFFFFFFu;
  }
  float rn = 0.0f;  // lane tx < 8: row wide_place(ty, tx)'s |x|^2
  WideStage st;
  wide_load(a, r0, 0, 0, vec, st);
  wide_store(st, sh.sr[0], sh.sc[0]);
  __syncthreads();
  uint32_t cur = 0;
  for (uint32_t t = 0; t < n_tiles; ++t) {
    const uint32_t c0 = t * kWideTile;
    float acc[kWideOut][kWideOut] = {};
    for (uint32_t s = 0; s < n_steps; ++s) {
      // The next step's loads are in flight while this one folds.
      const bool more = s + 1 < n_steps || t + 1 < n_tiles;
      if (s + 1 < n_steps)
        wide_load(a, r0, c0, (s + 1) * kWideDK, vec, st);
      else if (t + 1 < n_tiles)
        wide_load(a, r0, c0 + kWideTile, 0, vec, st);
      if (expanded && t == 0)
        wide_step<kL2, true>(sh.sr[cur], sh.sc[cur], tx, ty, acc, rn);
      else
        wide_step<kL2, false>(sh.sr[cur], sh.sc[cur], tx, ty, acc, rn);
      if (more) wide_store(st, sh.sr[cur ^ 1], sh.sc[cur ^ 1]);
      __syncthreads();
      cur ^= 1;
    }
    if (t == 0) {
      if (tx < kWideOut) sh.rn[wide_place(ty, tx)] = rn;
      __syncwarp();  // the half-warp's rows' norms, for all its lanes
    }
    float cn[kWideOut];
    uint32_t cv[kWideOut];
#pragma unroll
    for (int j = 0; j < kWideOut; ++j) {
      cv[j] = c0 + wide_place(tx, j);
      cn[j] = expanded && cv[j] < a.n_lists ? __ldg(na.centroid_norms + cv[j]) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kWideOut; ++i) {
      const uint32_t row = wide_place(ty, i);
      const float xn = sh.rn[row];
      float ck[kWideOut];
      bool near = false;  // a key at or under the list's last: most tiles offer a row none
      const float last = sh.lk[row][na.n_out - 1];
#pragma unroll
      for (int j = 0; j < kWideOut; ++j) {
        ck[j] = near_key(expanded ? fmaf(-2.0f, acc[i][j], xn + cn[j]) : acc[i][j], l2);
        near = near || (cv[j] < a.n_lists && ck[j] <= last);
      }
      if (!__any_sync(kFull, near)) continue;
      float lk = sh.lk[row][tx];
      uint32_t lv = sh.lv[row][tx];
      near_offer(lk, lv, ck, cv, a.n_lists, na.n_out, lane);
      sh.lk[row][tx] = lk;
      sh.lv[row][tx] = lv;
    }
  }
#pragma unroll
  for (int i = 0; i < kWideOut; ++i) {
    const uint32_t row = wide_place(ty, i), r = r0 + row;
    if (r < a.n_rows && static_cast<uint32_t>(tx) < na.n_out) {
      const uint64_t o = uint64_t(r) * na.n_out + tx;
      const float lk = sh.lk[row][tx];
      na.out_lists[o] = sh.lv[row][tx];
      if (na.out_dists) na.out_dists[o] = l2 ? lk : -lk;
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kWideThreads, 2) udf_ivf_index_v1_nearest_wide(udf_ivf_nearest_args_v1 na) {
  __shared__ __align__(16) WideShared sh;
  if (na.k.metric == UDF_IVF_INDEX_V1_L2 && na.expanded == 0)
    nearest_wide<true>(na, sh);
  else
    nearest_wide<false>(na, sh);
}

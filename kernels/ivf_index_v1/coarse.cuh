// Stage coarse: the coarse probe and k-means' assignment: a tiled distance
// kernel, then a per-row selection (and a tiny batch's direct schedule).
#pragma once
#include "common.cuh"
#include "../block_sort.cuh"
#include "../warp_topk.cuh"


namespace {

// The key of an accumulated distance: smaller is nearer (IP negated), NaN last.
__device__ __forceinline__ float coarse_key(float acc, bool l2) {
  const float key = l2 ? acc : -acc;
  return key != key ? __int_as_float(0x7f800000) : key;
}

// The coarse tile: 32 rows x 64 centroids a block, each thread 4 rows (ty +
// 8i) x 4 centroids (tx + 16j), the dimensions DK at a time through shared
// memory, read 16 bytes (four dimensions of a row or centroid) a load.  Rows
// of DK + 4 floats keep every row's chunks 16-byte aligned and spread a
// warp's 16 centroid chunks over all 32 banks (two wavefronts, the rows' two
// one each): three wavefronts for 32 FP32 instructions, against eight a
// dimension were each value read alone.  The next tile's loads are in flight
// while this one is folded.  Every key sums its dimensions in order from
// zero, the padding past dim adding exact zeros: the same bits as
// coarse_keys_few.
constexpr int kCoarseDK = 32;
constexpr int kCoarseRow = kCoarseDK + 4;  // floats a shared row

// Dimensions d .. d + 3 of row r: one 16-byte load when `vec` (f32 rows and
// centroids of whole 16-byte chunks), else element by element in the rows'
// own type; zeros past the rows or dim.
__device__ __forceinline__ float4 row_chunk(const udf_ivf_coarse_keys_args_v1& a, uint32_t r, uint32_t d, bool vec) {
  if (vec)
    return r < a.n_rows && d < a.dim
               ? __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(a.rows) + uint64_t(r) * a.row_stride + d))
               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float v[4];
#pragma unroll
  for (int w = 0; w < 4; ++w)
    v[w] = r < a.n_rows && d + w < a.dim ? load_elem(a.rows, a.row_elem, uint64_t(r) * a.row_stride + d + w) : 0.0f;
  return make_float4(v[0], v[1], v[2], v[3]);
}

// Dimensions d .. d + 3 of centroid c, as row_chunk.
__device__ __forceinline__ float4 centroid_chunk(const udf_ivf_coarse_keys_args_v1& a, uint32_t c, uint32_t d, bool vec) {
  const float* p = a.centroids + uint64_t(c) * a.dim + d;
  if (vec) return c < a.n_lists && d < a.dim ? __ldg(reinterpret_cast<const float4*>(p)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float v[4];
#pragma unroll
  for (int w = 0; w < 4; ++w) v[w] = c < a.n_lists && d + w < a.dim ? __ldg(p + w) : 0.0f;
  return make_float4(v[0], v[1], v[2], v[3]);
}

// This tile's part of the block's rows and centroids (dims d0 .. d0 + DK),
// in registers; `vec`: f32 rows and centroids of whole 16-byte chunks.
struct CoarseStage {
  float4 r[2];  // rows: 32 x 8 chunks, 2 a thread
  float4 c[4];  // centroids: 64 x 8 chunks, 4 a thread
};

__device__ __forceinline__ void coarse_load(const udf_ivf_coarse_keys_args_v1& a, uint32_t r0, uint32_t c0, uint32_t d0, bool vec,
                                            CoarseStage& st) {
  constexpr int TR = UDF_IVF_COARSE_V1_ROWS, TC = UDF_IVF_COARSE_V1_CENTROIDS, W = kCoarseDK / 4;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const uint32_t i = threadIdx.x + u * kThreads, r = r0 + i / W, d = d0 + 4 * (i % W);
    static_assert(TR * W == 2 * kThreads, "two row chunks a thread");
    float v[4];
    if (vec) {
      const float4 f = r < a.n_rows && d < a.dim ? __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(a.rows) + uint64_t(r) * a.row_stride + d))
                                               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
#pragma unroll
      for (int w = 0; w < 4; ++w)
        v[w] = r < a.n_rows && d + w < a.dim ? load_elem(a.rows, a.row_elem, uint64_t(r) * a.row_stride + d + w) : 0.0f;
    }
    st.r[u] = make_float4(v[0], v[1], v[2], v[3]);
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const uint32_t i = threadIdx.x + u * kThreads, c = c0 + i / W, d = d0 + 4 * (i % W);
    static_assert(TC * W == 4 * kThreads, "four centroid chunks a thread");
    const float* p = a.centroids + uint64_t(c) * a.dim + d;
    if (vec) {
      st.c[u] = c < a.n_lists && d < a.dim ? __ldg(reinterpret_cast<const float4*>(p)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    } else {
      float v[4];
#pragma unroll
      for (int w = 0; w < 4; ++w) v[w] = c < a.n_lists && d + w < a.dim ? __ldg(p + w) : 0.0f;
      st.c[u] = make_float4(v[0], v[1], v[2], v[3]);
    }
  }
}

__device__ __forceinline__ void coarse_store(const CoarseStage& st, float4* sr, float4* sc) {
  constexpr int W = kCoarseDK / 4, RW = kCoarseRow / 4;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const uint32_t i = threadIdx.x + u * kThreads;
    sr[(i / W) * RW + i % W] = st.r[u];
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const uint32_t i = threadIdx.x + u * kThreads;
    sc[(i / W) * RW + i % W] = st.c[u];
  }
}

// One shared-memory tile: the thread's R rows (ty + 8i) against its 4
// centroids (tx + 16j) over DK dimensions, four at a time; L2 sums squared
// differences, IP products.
template <bool kL2, int R>
__device__ __forceinline__ void coarse_tile_step(const float4* sr, const float4* sc, int tx, int ty, float (&acc)[R][4]) {
  constexpr int RW = kCoarseRow / 4;
#pragma unroll 2
  for (int q = 0; q < kCoarseDK / 4; ++q) {
    float4 x[R], y[4];
#pragma unroll
    for (int i = 0; i < R; ++i) x[i] = sr[(ty + 8 * i) * RW + q];
#pragma unroll
    for (int j = 0; j < 4; ++j) y[j] = sc[(tx + 16 * j) * RW + q];
    auto fold = [&](auto xs, auto ys) {
#pragma unroll
      for (int i = 0; i < R; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (kL2) {
            const float t = xs(x[i]) - ys(y[j]);
            acc[i][j] = fmaf(t, t, acc[i][j]);
          } else {
            acc[i][j] = fmaf(xs(x[i]), ys(y[j]), acc[i][j]);
          }
        }
    };
    fold([](const float4& v) { return v.x; }, [](const float4& v) { return v.x; });
    fold([](const float4& v) { return v.y; }, [](const float4& v) { return v.y; });
    fold([](const float4& v) { return v.z; }, [](const float4& v) { return v.z; });
    fold([](const float4& v) { return v.w; }, [](const float4& v) { return v.w; });
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_coarse_keys(udf_ivf_coarse_keys_args_v1 a) {
  constexpr int TR = UDF_IVF_COARSE_V1_ROWS, TC = UDF_IVF_COARSE_V1_CENTROIDS;
  static_assert(kThreads == 128 && TR == 32 && TC == 64 && kCoarseDK == 32, "a 16 x 8 thread grid, 4 x 4 outputs per thread");
  __shared__ float4 sr[TR * kCoarseRow / 4];
  __shared__ float4 sc[TC * kCoarseRow / 4];
  const uint32_t c0 = blockIdx.x * TC, r0 = blockIdx.y * TR;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const bool l2 = a.metric == UDF_IVF_INDEX_V1_L2;
  // Whole 16-byte chunks: f32 rows and centroids, dim and the row stride
  // multiples of 4, the rows 16-byte aligned (the centroids always are).
  const bool vec = a.row_elem == 0 && a.dim % 4 == 0 && a.row_stride % 4 == 0 && (reinterpret_cast<uintptr_t>(a.rows) & 15) == 0;
  float acc[4][4] = {};
  CoarseStage st;
  coarse_load(a, r0, c0, 0, vec, st);
  for (uint32_t d0 = 0; d0 < a.dim; d0 += kCoarseDK) {
    coarse_store(st, sr, sc);
    __syncthreads();
    if (d0 + kCoarseDK < a.dim) coarse_load(a, r0, c0, d0 + kCoarseDK, vec, st);  // in flight while this tile folds
    if (l2)
      coarse_tile_step<true>(sr, sc, tx, ty, acc);
    else
      coarse_tile_step<false>(sr, sc, tx, ty, acc);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t r = r0 + ty + 8 * i;
    if (r >= a.n_rows) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t c = c0 + tx + 16 * j;
      if (c >= a.n_lists) continue;
      a.keys[uint64_t(r) * a.n_lists + c] = coarse_key(acc[i][j], l2);
    }
  }
}

// Dimensions [d0, d0 + dn) of the block's centroids c0 .. c0 + TC - 1 into
// sc (zero past the centroids and dimensions), W floats a load (W 4: every
// row is whole 16-byte chunks, dim % 4 == 0, and dn a multiple of 4), eight
// loads in flight per thread before they are stored.
template <int W, int TC, int DC1>
__device__ __forceinline__ void stage_centroids(const udf_ivf_coarse_keys_args_v1& a, float (&sc)[TC][DC1], uint32_t c0,
                                                uint32_t d0, uint32_t dn) {
  static_assert(W == 1 || W == 4, "a float or a float4 a load");
  const uint32_t dw = dn / W;
  for (uint32_t base = threadIdx.x; base < TC * dw; base += 8 * kThreads) {
    float v[8][W];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const uint32_t i = base + u * kThreads, c = c0 + i / dw, d = d0 + W * (i % dw);
      const bool in = i < TC * dw && c < a.n_lists && d < a.dim;
      const float* p = a.centroids + uint64_t(c) * a.dim + d;
      if constexpr (W == 4) {
        const float4 f = in ? __ldg(reinterpret_cast<const float4*>(p)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        v[u][0] = f.x;
        v[u][1] = f.y;
        v[u][2] = f.z;
        v[u][3] = f.w;
      } else {
        v[u][0] = in ? __ldg(p) : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const uint32_t i = base + u * kThreads;
      if (i >= TC * dw) continue;
#pragma unroll
      for (int w = 0; w < W; ++w) sc[i / dw][W * (i % dw) + w] = v[u][w];
    }
  }
}

// Few rows (a small search batch): a block per 32 centroids x 8 rows, each
// centroid's dimensions staged in chunks of 256, so that every block has
// its data in flight at once.  Each key is summed over the same dimensions
// in the same order (zero padding to a multiple of 32 included) as the
// tiled kernel, so both give the same bits.
__device__ __forceinline__ void coarse_keys_few(const udf_ivf_coarse_keys_args_v1& a, const void* rows) {
  constexpr int TC = UDF_IVF_COARSE_FEW_V1_CENTROIDS, TR = UDF_IVF_COARSE_FEW_V1_ROWS, DC = 256;
  static_assert(kThreads == 128 && TC == 32 && TR == 8, "4 warps: centroid = lane, rows warp and warp + 4");
  __shared__ float sc[TC][DC + 1];
  __shared__ float sr[TR][DC];
  const uint32_t c0 = blockIdx.x * TC, r0 = blockIdx.y * TR;
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t dim_padded = (a.dim + 31) / 32 * 32;
  const bool l2 = a.metric == UDF_IVF_INDEX_V1_L2;
  float acc[2] = {0.0f, 0.0f};
  for (uint32_t d0 = 0; d0 < dim_padded; d0 += DC) {
    const uint32_t dn = min(uint32_t(DC), dim_padded - d0);
    if (a.dim % 4 == 0)  // rows of 16-byte chunks: 32 centroids x 128 dims in flight at once
      stage_centroids<4>(a, sc, c0, d0, dn);
    else
      stage_centroids<1>(a, sc, c0, d0, dn);
    for (uint32_t i = threadIdx.x; i < TR * dn; i += kThreads) {
      const uint32_t r = r0 + i / dn, d = d0 + i % dn;
      sr[i / dn][i % dn] = r < a.n_rows && d < a.dim ? load_elem(rows, a.row_elem, uint64_t(r) * a.row_stride + d) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float* x = sr[warp + 4 * h];
      if (r0 + warp + 4 * h >= a.n_rows) continue;  // warp-uniform
      float s = acc[h];
      if (l2) {
#pragma unroll 8
        for (uint32_t d = 0; d < dn; ++d) {
          const float t = x[d] - sc[lane][d];
          s = fmaf(t, t, s);
        }
      } else {
#pragma unroll 8
        for (uint32_t d = 0; d < dn; ++d) s = fmaf(x[d], sc[lane][d], s);
      }
      acc[h] = s;
    }
    __syncthreads();
  }
  const uint32_t c = c0 + lane;
  if (c >= a.n_lists) return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t r = r0 + warp + 4 * h;
    if (r >= a.n_rows) continue;
    a.keys[uint64_t(r) * a.n_lists + c] = coarse_key(acc[h], l2);
  }
}

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_coarse_keys_few(udf_ivf_coarse_keys_args_v1 a) {
  coarse_keys_few(a, a.rows);
}

// The rows in the parameters (__grid_constant__: read where the launch put
// them, through the constant cache, no per-thread copy).
extern "C" __global__ void __launch_bounds__(kThreads)
    udf_ivf_index_v1_coarse_keys_inline(const __grid_constant__ udf_ivf_coarse_inline_args_v1 a) {
  if (blockIdx.x == 0 && blockIdx.y == 0)
    for (uint32_t i = threadIdx.x; i < a.n_words; i += kThreads) a.rows_out[i] = a.words[i];
  coarse_keys_few(a.k, a.words);
}

// The n_out smallest keys of a row, nearest first, ties to the smaller list.
// n_out <= kSelectFew: a radix select (8 bits a pass, most significant
// first) finds the n_out-th smallest key; the keys below it, and as many of
// those equal to it as needed (the smallest lists first), are sorted.  The
// result is the one a full sort gives.  Larger n_out: a full bitonic sort.
namespace {

constexpr uint32_t kSelectFew = UDF_IVF_SELECT_V1_FEW;

// Ascending unsigned order == ascending float order (-0 == +0, NaN as +inf).
__device__ __forceinline__ uint32_t ordered_bits(float f) {
  if (f != f) f = __int_as_float(0x7f800000);
  const uint32_t u = __float_as_uint(f == 0.0f ? 0.0f : f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float from_ordered_bits(uint32_t u) {
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7FFFFFFFu) : ~u);
}

// Row blockIdx.x's output: the first n_out sorted (key, list) entries.
template <int NT> __device__ void write_selected(const udf_ivf_select_args_v1& a, const float* keys, const uint32_t* lists) {
  const bool l2 = a.metric == UDF_IVF_INDEX_V1_L2;
  const uint64_t obase = uint64_t(blockIdx.x) * a.n_out;
  for (uint32_t i = threadIdx.x; i < a.n_out; i += NT) {
    a.out_lists[obase + i] = lists[i];
    if (a.out_dists) a.out_dists[obase + i] = l2 ? keys[i] : -keys[i];
  }
}

// Exclusive scan of one value per thread over the block; returns the prefix.
template <int NT> __device__ uint32_t block_exclusive_scan(uint32_t v) {
  __shared__ uint32_t warp_tot[NT / 32];
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t incl = warp_inclusive_scan(v);
  if (lane == 31) warp_tot[warp] = incl;
  __syncthreads();
  uint32_t before = 0;
  for (uint32_t w = 0; w < warp; ++w) before += warp_tot[w];
  __syncthreads();
  return before + incl - v;
}

// kBits: `bits` holds n_lists words of shared memory for the row's ordered
// keys; else every pass reads the row itself (the batch kernel's fallback,
// which keeps no dynamic shared memory).
template <int NT, bool kBits> __device__ void select_few(const udf_ivf_select_args_v1& a, const float* row, uint32_t* bits) {
  __shared__ uint32_t hist[256];
  __shared__ uint32_t s_prefix, s_want, s_all, s_n;
  __shared__ float ck[kSelectFew];
  __shared__ uint32_t ci[kSelectFew];
  const uint32_t n = a.n_lists, tid = threadIdx.x, lane = tid & 31;
  if constexpr (kBits) {
    for (uint32_t c = tid; c < n; c += NT) bits[c] = ordered_bits(row[c]);
  }
  auto bits_of = [&](uint32_t c) {
    if constexpr (kBits) return bits[c];
    else return ordered_bits(row[c]);
  };
  // The n_out-th smallest: after each pass the keys whose top bits (mask)
  // equal prefix hold it, `want` of them are needed.
  uint32_t prefix = 0, mask = 0, want = a.n_out;
  bool all = false;  // every key with those top bits is needed
  for (int shift = 24; shift >= 0 && !all; shift -= 8) {
    for (uint32_t i = tid; i < 256; i += NT) hist[i] = 0;
    __syncthreads();
    for (uint32_t c0 = 0; c0 < n; c0 += NT) {
      const uint32_t c = c0 + tid;
      const uint32_t u = c < n ? bits_of(c) : 0u;
      const bool in = c < n && (u & mask) == prefix;
      const uint32_t bin = (u >> shift) & 255u;
      // One atomic per distinct bin of the warp (keys crowd into few bins).
      const unsigned same = __match_any_sync(kFull, in ? bin : 0x100u | bin);
      if (in && lane == __ffs(same) - 1) atomicAdd(&hist[bin], static_cast<uint32_t>(__popc(same)));
    }
    __syncthreads();
    if (tid < 32) {
      uint32_t h[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += (h[j] = hist[lane * 8 + j]);
      const uint32_t incl = warp_inclusive_scan(sum);
      uint32_t before = incl - sum;
      if (before < want && want <= incl) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (before + h[j] >= want) {
            s_prefix = prefix | (uint32_t(lane * 8 + j) << shift);
            s_want = want - before;
            s_all = before + h[j] == want;
            break;
          }
          before += h[j];
        }
      }
    }
    if (tid == 0) s_n = 0;
    __syncthreads();
    prefix = s_prefix;
    want = s_want;
    all = s_all != 0;
    mask |= 255u << shift;
  }
  // Collect: keys below the bucket; the bucket whole (all) or, its keys all
  // equal (mask is full), the `want` with the smallest lists.
  const uint32_t per = (n + NT - 1) / NT, c_begin = min(n, tid * per), c_end = min(n, c_begin + per);
  uint32_t equal = 0;
  for (uint32_t c = c_begin; c < c_end; ++c) {
    const uint32_t u = bits_of(c), m = u & mask;
    if (m < prefix || (all && m == prefix)) {
      const uint32_t pos = atomicAdd(&s_n, 1u);
      ck[pos] = from_ordered_bits(u);
      ci[pos] = c;
    } else if (m == prefix) {
      ++equal;
    }
  }
  if (!all) {  // block-uniform
    uint32_t rank = block_exclusive_scan<NT>(equal);
    for (uint32_t c = c_begin; c < c_end && rank < want; ++c) {
      const uint32_t u = bits_of(c);
      if ((u & mask) != prefix) continue;
      const uint32_t pos = atomicAdd(&s_n, 1u);
      ck[pos] = from_ordered_bits(u);
      ci[pos] = c;
      ++rank;
    }
  }
  // Sort the n_out chosen (padded to a power of two).
  uint32_t size = 2;
  while (size < a.n_out) size <<= 1;
  __syncthreads();
  for (uint32_t i = a.n_out + tid; i < size; i += NT) {
    ck[i] = __int_as_float(0x7f800000);
    ci[i] = 0xFFFFFFFFu;
  }
  __syncthreads();
  block_bitonic_sort<NT>(ck, ci, size);
  write_selected<NT>(a, ck, ci);
}

}  // namespace

namespace {

// n_out <= 32 (the select kernel's; the other kernels' where their bound
// gathers too many keys, many of them equal): each warp keeps the n_out
// best of its runs of 32 keys (every
// kWarps-th) in registers (warp_topk.cuh), then the warps' lists are merged:
// by warp 0 one after another (4 warps), or in a tree (the direct kernel's
// 32 warps: one run each at 1024 lists, so a sort and five merges on the
// critical path instead of eight offers of 32 and three merges).  Keys are
// ordered as the radix select orders them (NaN as +inf, -0 as +0), ties to
// the smaller list, so the result is the same.
template <int NT> __device__ void select_warps(const udf_ivf_select_args_v1& a, const float* row, uint32_t* chosen) {
  constexpr int kWarps = NT / 32;
  __shared__ float list_keys[kWarps * 32];
  __shared__ uint32_t list_vals[kWarps * 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t n = a.n_lists;
  WarpEntry best{__int_as_float(0x7f800000), 0xFFFFFFFFu};
  constexpr int kAhead = 4;  // loads in flight
  // Block-uniform bounds (see warp_topk.cuh): warp w takes keys w * 32 + lane of each NT.
  for (uint32_t base = 0; base < n; base += kAhead * NT) {
    float keys[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const uint32_t c = base + u * NT + threadIdx.x;
      keys[u] = c < n ? from_ordered_bits(ordered_bits(row[c])) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (base + u * NT >= n) break;  // block-uniform
      const uint32_t c = base + u * NT + threadIdx.x;
      warp_topk_offer(best, a.n_out, c < n, keys[u], c, lane);
    }
  }
  list_keys[warp * 32 + lane] = best.key;
  list_vals[warp * 32 + lane] = best.val;
  if constexpr (kWarps <= 4) {  // warp 0 merges the lists one after another
    __syncthreads();
    if (warp != 0) return;
    best = warp_merge_lists<kWarps>(list_keys, list_vals, lane);
  } else {  // a tree: at each level warp w (a multiple of 2 h) takes in warp w + h's list
    for (int h = 1; h < kWarps; h <<= 1) {
      __syncthreads();
      if (warp % (2 * h) != 0) continue;  // warp-uniform
      warp_merge_sorted(best, WarpEntry{list_keys[(warp + h) * 32 + lane], list_vals[(warp + h) * 32 + lane]}, lane);
      list_keys[warp * 32 + lane] = best.key;
      list_vals[warp * 32 + lane] = best.val;
    }
    if (warp != 0) return;
  }
  if (static_cast<uint32_t>(lane) < a.n_out) {
    const uint64_t o = uint64_t(blockIdx.x) * a.n_out + lane;
    a.out_lists[o] = best.val;
    if (chosen) chosen[lane] = best.val;
    if (a.out_dists) a.out_dists[o] = a.metric == UDF_IVF_INDEX_V1_L2 ? best.key : -best.key;
  }
}

// The bounded selections' gather: (key, c) joins the gathered entries when
// `in` (a slot of `cap`; *count counts every offer, so a count above cap
// says some did not fit); a warp's offers take one shared atomic.  Called
// by the whole warp.
__device__ __forceinline__ void gather_entry(bool in, float key, uint32_t c, uint32_t lane, uint32_t* count, float* keys,
                                             uint32_t* lists, uint32_t cap) {
  const unsigned b = __ballot_sync(kFull, in);
  uint32_t base = 0;
  if (lane == 0 && b != 0) base = atomicAdd(count, static_cast<uint32_t>(__popc(b)));
  base = __shfl_sync(kFull, base, 0) + __popc(b & ((1u << lane) - 1u));
  if (in && base < cap) {
    keys[base] = key;
    lists[base] = c;
  }
}

// n_out <= 32 in a block of 32 warps (the direct kernel: one query, where
// the warp path's shuffle networks are a long chain of dependent steps): a
// bound, then the exact rank of the few keys under it.  Key c is in group c % 32; with n >= 32 every group has a
// key, so at least 32 keys are at or below the largest of the 32 group
// minima (tau) and no key above tau is among the n_out best.  The keys at or
// below tau (about a tenth of them for coarse distances) are gathered, and
// each counts the gathered keys before it (key, then list): ranks below
// n_out are the result, the one the other paths give.  false when more than
// kGather are gathered (many equal keys): the caller takes the warp path.
template <int NT> __device__ bool select_bounded(const udf_ivf_select_args_v1& a, const float* row, uint32_t* chosen) {
  constexpr uint32_t kGather = 256;
  static_assert(NT == 1024, "a group minimum per lane of warp 0 over the 32 warps' thread minima");
  __shared__ float thread_min[NT];
  __shared__ float gathered_keys[kGather];
  __shared__ uint32_t gathered_lists[kGather];
  __shared__ float s_tau;
  __shared__ uint32_t s_gathered;
  const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, n = a.n_lists;
  auto key_of = [&](uint32_t c) { return from_ordered_bits(ordered_bits(row[c])); };  // NaN as +inf, -0 as +0
  float m = __int_as_float(0x7f800000);
  for (uint32_t c = tid; c < n; c += NT) m = fminf(m, key_of(c));
  thread_min[tid] = m;
  if (tid == 0) s_gathered = 0;
  __syncthreads();
  if (warp == 0) {
    float g = __int_as_float(0x7f800000);  // group `lane`'s minimum
#pragma unroll 8
    for (uint32_t w = 0; w < NT / 32; ++w) g = fminf(g, thread_min[w * 32 + lane]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) g = fmaxf(g, __shfl_xor_sync(kFull, g, o));
    if (lane == 0) s_tau = g;
  }
  __syncthreads();
  const float tau = s_tau;
  for (uint32_t c0 = 0; c0 < n; c0 += NT) {  // block-uniform (the ballot)
    const uint32_t c = c0 + tid;
    const float key = c < n ? key_of(c) : 0.0f;
    gather_entry(c < n && key <= tau, key, c, lane, &s_gathered, gathered_keys, gathered_lists, kGather);
  }
  __syncthreads();
  const uint32_t total = s_gathered;
  if (total > kGather) return false;
  if (tid < total) {
    const float k = gathered_keys[tid];
    const uint32_t c = gathered_lists[tid];
    uint32_t rank = 0;
    for (uint32_t j = 0; j < total; ++j) rank += entry_less(gathered_keys[j], gathered_lists[j], k, c) ? 1u : 0u;
    if (rank < a.n_out) {
      const uint64_t o = uint64_t(blockIdx.x) * a.n_out + rank;
      a.out_lists[o] = c;
      if (chosen) chosen[rank] = c;
      if (a.out_dists) a.out_dists[o] = a.metric == UDF_IVF_INDEX_V1_L2 ? k : -k;
    }
  }
  return true;
}

// A batch's selection (udf_ivf_index_v1_select_gather, blocks of 128
// threads, a block a row), n_out <= kSelectFew: a bound, then a sort of the
// keys under it (in the launch's dynamic shared memory, `smem`).
// Key c is in group c % G, G the power of two at or above n_out (32 .. 256);
// with n >= G every group has a key, so at least G keys are at or below the
// largest of the G group minima (tau), and no key above it is among the
// n_out best.  The keys at or below tau (a small part of the row when each
// group holds many keys) are gathered and sorted (key, then list): the
// first n_out are the result the other paths give.  Up to 4096
// lists a thread keeps its 32 keys in registers between the two passes.
// false when more than kGather are gathered (many equal keys): the caller
// takes another path.
template <int NT> __device__ bool select_gathered(const udf_ivf_select_args_v1& a, const float* row, uint4* smem) {
  constexpr uint32_t kGather = UDF_IVF_SELECT_V1_GATHER;
  constexpr int kHeld = 32;
  static_assert(NT % 32 == 0 && 2 * NT >= kSelectFew, "a thread's keys in two groups at most");
  float* gathered_keys = reinterpret_cast<float*>(smem);
  uint32_t* gathered_lists = reinterpret_cast<uint32_t*>(gathered_keys + kGather);
  __shared__ float thread_min[2 * NT];  // [t]: thread t's keys c = t + i * NT, i even; [NT + t]: i odd
  __shared__ float warp_max[NT / 32];
  __shared__ uint32_t s_gathered;
  const uint32_t n = a.n_lists, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float inf = __int_as_float(0x7f800000);
  uint32_t G = 32;
  while (G < a.n_out) G <<= 1;
  auto key_of = [&](uint32_t c) { return from_ordered_bits(ordered_bits(row[c])); };  // NaN as +inf, -0 as +0
  const bool held = n <= uint32_t(kHeld) * NT;  // block-uniform
  float keys[kHeld];
  float m[2] = {inf, inf};
  if (held) {
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const uint32_t c = tid + uint32_t(i) * NT;
      keys[i] = c < n ? key_of(c) : inf;
      m[i % 2] = fminf(m[i % 2], keys[i]);
    }
  } else {
    uint32_t i = 0;
    for (uint32_t c = tid; c < n; c += NT, ++i) m[i % 2] = fminf(m[i % 2], key_of(c));
  }
  thread_min[tid] = m[0];
  thread_min[NT + tid] = m[1];
  if (tid == 0) s_gathered = 0;
  __syncthreads();
  // Entry j of thread_min holds keys of group j % G (NT is a multiple of G,
  // or G is 2 * NT); tau: the largest group minimum.
  float t = -inf;
  for (uint32_t g = tid; g < G; g += NT) {
    float gm = inf;
    for (uint32_t j = g; j < 2 * NT; j += G) gm = fminf(gm, thread_min[j]);
    t = fmaxf(t, gm);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(kFull, t, o));
  if (lane == 0) warp_max[warp] = t;
  __syncthreads();
  float tau = warp_max[0];
#pragma unroll
  for (int w = 1; w < NT / 32; ++w) tau = fmaxf(tau, warp_max[w]);
  // Key c (of this thread) when it is at or below tau.  Called by the whole warp.
  auto gather = [&](uint32_t c, float key) {
    gather_entry(c < n && key <= tau, key, c, lane, &s_gathered, gathered_keys, gathered_lists, kGather);
  };
  if (held) {
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      if (uint32_t(i) * NT >= n) break;  // block-uniform
      gather(tid + uint32_t(i) * NT, keys[i]);
    }
  } else {
    for (uint32_t c0 = 0; c0 < n; c0 += NT) {  // block-uniform (the ballot)
      const uint32_t c = c0 + tid;
      gather(c, c < n ? key_of(c) : 0.0f);
    }
  }
  __syncthreads();
  const uint32_t total = s_gathered;
  if (total > kGather) return false;  // block-uniform
  uint32_t size = 2;
  while (size < total) size <<= 1;
  for (uint32_t i = total + tid; i < size; i += NT) {
    gathered_keys[i] = inf;
    gathered_lists[i] = 0xFFFFFFFFu;
  }
  __syncthreads();
  block_bitonic_sort<NT>(gathered_keys, gathered_lists, size);
  write_selected<NT>(a, gathered_keys, gathered_lists);
  return true;
}

// The direct schedule of row blockIdx.x (see the header) from its probes
// (in shared or global memory, visible to the block); scratch: 2 * n_out
// words of shared memory.  Every item is written by its own thread: one
// read of each probe's size, a scan of the probes' tile counts, then the
// items (a thread writing a probe's tiles one after another, and 64-bit
// shared atomics for the counts, were most of a 1-query kernel's time).
template <int NT> __device__ void sched_direct(const udf_ivf_select_args_v1& a, const uint32_t* probes, uint32_t* scratch) {
  __shared__ unsigned long long warp_sums[NT / 32][2];
  __shared__ uint32_t s_total;
  const uint32_t r = blockIdx.x, P = a.n_out, T = a.tiles, tg = a.tile_groups, n = P * T;
  const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const uint64_t base = uint64_t(r) * n;
  auto* items = static_cast<udf_ivf_work_item_v1*>(a.sched_items) + base;
  auto* pairs = static_cast<udf_ivf_pair_v1*>(a.sched_pairs) + base;
  auto put = [&](uint32_t i, uint32_t l, uint32_t t) {
    udf_ivf_work_item_v1 it;
    it.list = l;
    it.group_begin = t * tg;
    it.group_end = (t + 1) * tg;
    it.pair_begin = static_cast<uint32_t>(base + i);
    it.pair_count = 1;
    it.reserved = 0;
    items[i] = it;
    pairs[i] = udf_ivf_pair_v1{r, static_cast<uint32_t>(base + i)};
  };
  unsigned long long scored = 0, groups = 0;
  if (a.row_ranges == nullptr) {
    for (uint32_t i = tid; i < n; i += NT) {
      const uint32_t j = i / T, t = i - j * T;
      const uint32_t l = probes[j];
      const uint32_t size = a.list_sizes[l];
      if (t == 0) {
        scored += size;
        groups += (size + 31) / 32;
      }
      put(i, l, t);
    }
  } else {
    // Probe j has max(1, min(T, ceil(groups / tg))) tiles, its items from first_tile[j].
    uint32_t* first_tile = scratch;
    uint32_t* probe_tiles = scratch + P;
    const uint32_t per = div_up(P, NT), j0 = min(P, tid * per), j1 = min(P, j0 + per);
    uint32_t mine = 0;
    for (uint32_t j = j0; j < j1; ++j) {
      const uint32_t size = a.list_sizes[probes[j]], g = (size + 31) / 32;
      const uint32_t tiles = max(1u, min(T, div_up(g, tg)));
      scored += size;
      groups += g;
      probe_tiles[j] = tiles;
      mine += tiles;
    }
    uint32_t at = block_exclusive_scan<NT>(mine);
    for (uint32_t j = j0; j < j1; ++j) {
      first_tile[j] = at;
      at += probe_tiles[j];
    }
    if (tid == NT - 1) s_total = at;
    __syncthreads();
    const uint32_t total = s_total;
    for (uint32_t i = tid; i < n; i += NT) {
      const uint32_t j = i / T, t = i - j * T;
      if (t < probe_tiles[j]) put(first_tile[j] + t, probes[j], t);
    }
    for (uint32_t i = total + tid; i < n; i += NT) items[i] = udf_ivf_work_item_v1{0, 0, 0, 0, 0, 0};
    if (tid == 0) {
      a.row_ranges[2 * uint64_t(r)] = static_cast<uint32_t>(base);
      a.row_ranges[2 * uint64_t(r) + 1] = static_cast<uint32_t>(base) + total;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    scored += __shfl_xor_sync(kFull, scored, o);
    groups += __shfl_xor_sync(kFull, groups, o);
  }
  if (lane == 0) {
    warp_sums[warp][0] = scored;
    warp_sums[warp][1] = groups;
  }
  __syncthreads();
  if (tid == 0) {
    for (uint32_t w = 1; w < NT / 32; ++w) {
      scored += warp_sums[w][0];
      groups += warp_sums[w][1];
    }
    if (a.row_ranges == nullptr) {
      a.query_rows[r] = static_cast<uint32_t>(base);
      if (r == 0) a.query_rows[a.n_rows] = a.n_rows * n;
    }
    uint32_t* st = a.query_stats + 4 * uint64_t(r);
    st[0] = static_cast<uint32_t>(scored);
    st[1] = static_cast<uint32_t>(scored >> 32);
    st[2] = static_cast<uint32_t>(groups);
    st[3] = static_cast<uint32_t>(groups >> 32);
  }
}

}  // namespace

// The selection, and with kDirect a tiny batch's direct schedule (a kernel
// of its own, so that the schedule's registers do not cost the build's
// selections blocks an SM).
template <int NT, bool kDirect> __device__ __forceinline__ void select_rows(const udf_ivf_select_args_v1& a) {
  const uint32_t r = blockIdx.x;
  if (r >= a.n_rows) return;
  extern __shared__ uint4 smem_raw[];
  const float* row = a.keys + uint64_t(r) * a.n_lists;
  __shared__ uint32_t chosen[kDirect ? 32 : 1];  // n_out <= 32: the probes, for the direct schedule
  if (a.n_out <= 32) {
    if constexpr (NT == 1024) {
      if (!select_bounded<NT>(a, row, kDirect ? chosen : nullptr)) select_warps<NT>(a, row, kDirect ? chosen : nullptr);
    } else {
      select_warps<NT>(a, row, kDirect ? chosen : nullptr);
    }
  } else if (a.n_out <= kSelectFew) {
    select_few<NT, true>(a, row, reinterpret_cast<uint32_t*>(smem_raw));
  } else {
    float* keys = reinterpret_cast<float*>(smem_raw);
    uint32_t* idx = reinterpret_cast<uint32_t*>(keys + a.sort_size);
    for (uint32_t c = threadIdx.x; c < a.sort_size; c += NT) {
      const bool in = c < a.n_lists;
      keys[c] = in ? row[c] : __int_as_float(0x7f800000);
      idx[c] = in ? c : 0xFFFFFFFFu;
    }
    __syncthreads();
    block_bitonic_sort<NT>(keys, idx, a.sort_size);
    write_selected<NT>(a, keys, idx);
  }
  if constexpr (kDirect) {
    __syncthreads();  // the probes written above are visible to the block
    sched_direct<NT>(a, a.n_out <= 32 ? chosen : a.out_lists + uint64_t(r) * a.n_out, reinterpret_cast<uint32_t*>(smem_raw));
  }
}

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_select(udf_ivf_select_args_v1 a) {
  select_rows<kThreads, false>(a);
}
extern "C" __global__ void __launch_bounds__(UDF_IVF_SELECT_DIRECT_V1_THREADS) udf_ivf_index_v1_select_direct(udf_ivf_select_args_v1 a) {
  select_rows<UDF_IVF_SELECT_DIRECT_V1_THREADS, true>(a);
}
// Batches too small to fill the GPU, n_out <= 32: the direct kernel's
// selection without its schedule, a 1024-thread block a row, so that a row's
// keys are read at once rather than a warp's run after another.
extern "C" __global__ void __launch_bounds__(UDF_IVF_SELECT_DIRECT_V1_THREADS) udf_ivf_index_v1_select_wide(udf_ivf_select_args_v1 a) {
  select_rows<UDF_IVF_SELECT_DIRECT_V1_THREADS, false>(a);
}
// A kernel of its own, so that its registers do not cost the other
// selections blocks an SM.
extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_select_gather(udf_ivf_select_args_v1 a) {
  if (blockIdx.x >= a.n_rows) return;
  extern __shared__ uint4 gather_smem[];
  const float* row = a.keys + uint64_t(blockIdx.x) * a.n_lists;
  if (select_gathered<kThreads>(a, row, gather_smem)) return;
  if (a.n_out <= 32)  // too many equal keys
    select_warps<kThreads>(a, row, nullptr);
  else
    select_few<kThreads, false>(a, row, nullptr);
}

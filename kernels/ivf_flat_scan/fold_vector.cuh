// The fold policy of ABI v2 vector metrics: the UDF's distance reads a
// whole stored vector, so each warp stages rows in shared memory and its
// lanes share the (row, query) pairs; a (query, thread) keeps the distance.
#pragma once
#include "fold_chunks.cuh"

namespace udf_kernels {

template <class E, class A, bool kMax, class Udf> struct FoldVector {
  static constexpr int V = E::veclen;
  static constexpr bool kStaged = true;  // each warp's staged rows (ScanSmem)
  static constexpr bool kPrunable = false;
  template <class Tile> static constexpr bool kCanTile = false;  // no TILED FOLD (fold_v1.cuh)

  Udf udf;
  udf_ctx_v2& ctx2;

  // Words a (query, thread): the distance, a float in the accumulator's place.
  static __device__ __forceinline__ uint32_t acc_words_for(const udf_ivf_scan_args_v1*) { return 1u; }

  __device__ __forceinline__ FoldVector(Udf u, udf_ctx_v1&, udf_ctx_v2& c2, uint32_t, const udf_ivf_scan_args_v1*)
      : udf(u), ctx2(c2) {}

  // Stages a row (at src_vp; src_load: it is in the list) at dst, the lane
  // taking chunks lq, lq + per_pass, ...: kBatch loads in flight per lane,
  // then their stores.
  template <class Tile>
  __device__ __forceinline__ void stage(const Tile& t, const uint4* src_vp, bool src_load, A* dst, uint32_t lq, uint32_t per_pass) {
    const uint32_t chunks = t.vec.chunks;
#pragma unroll 1
    for (uint32_t c0 = lq; c0 < chunks; c0 += kBatch * per_pass) {
      uint4 r[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const uint32_t c = c0 + j * per_pass;
        r[j] = src_load && c < chunks ? __ldg(src_vp + static_cast<uint64_t>(c) * Tile::kChunkStride) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const uint32_t c = c0 + j * per_pass;
        if (c < chunks) {
          A x[V];
          unpack<E, A, true>(r[j], x);
#pragma unroll
          for (int v = 0; v < V; ++v) dst[c * V + v] = x[v];
        }
      }
    }
  }

  // The distances of the lanes' vectors (at vp) to every query whose bit is
  // set in the lane's `keep`, in rounds of R rows: the warp stages R of its
  // 32 vectors, then every lane calls distance for one (row, query) pair:
  // row r0 + lane % R, query lane / R (+ 32 / R a pass).  R * (queries
  // rounded up to a power of two) = 32 keeps every lane busy while shared
  // memory holds only R rows a warp (32 rows a warp would cost most of the
  // blocks an SM could hold).  Lanes 2i and 2i + 1 share a query: its 16-byte
  // reads are broadcast and packed two lanes a register (LDS.128 at half
  // cost).  ctx2.id is the lane's id.  All 32 lanes of a warp.
  template <class Tile> __device__ void score(const Tile& t, Prune&, const uint4* vp, bool load, uint64_t keep) {
    float* const sm_dist = reinterpret_cast<float*>(t.sm.acc);
    uint32_t nq2 = 1;
    while (nq2 < t.it.nq) nq2 <<= 1;
    const uint32_t fit = nq2 >= 32u ? 1u : 32u / nq2;  // rows that keep 32 lanes busy
    const uint32_t R = t.sm.stage_rows < fit ? t.sm.stage_rows : fit;
    const uint32_t per_pass = 32u / R;  // queries a pass
    const uint32_t row = static_cast<uint32_t>(t.it.lane) & (R - 1u);
    const uint32_t lq = static_cast<uint32_t>(t.it.lane) / R;
    const int64_t my_id = ctx2.id;
    const A* const xr = t.sm.stage + row * t.sm.row_words;
    for (uint32_t r0 = 0; r0 < 32u; r0 += R) {
      const uint32_t src = r0 + row;
      const uint4* src_vp = reinterpret_cast<const uint4*>(
          __shfl_sync(kFull, reinterpret_cast<unsigned long long>(vp), static_cast<int>(src)));
      const bool src_load = __shfl_sync(kFull, load ? 1 : 0, static_cast<int>(src)) != 0;
      const uint64_t src_keep = __shfl_sync(kFull, static_cast<unsigned long long>(keep), static_cast<int>(src));
      ctx2.id = static_cast<int64_t>(__shfl_sync(kFull, static_cast<long long>(my_id), static_cast<int>(src)));
      A* dst = t.sm.stage + row * t.sm.row_words;
      __syncwarp();  // the previous round's rows are read
      stage(t, src_vp, src_load, dst, lq, per_pass);
      __syncwarp();
      ctx2.dim = t.it.dim;
      // A lane whose row is past the end of the list (src_load false)
      // scores nothing: the offer skips invalid slots.
      for (uint32_t q = lq; q < t.it.nq; q += per_pass) {
        if (!src_load || (t.filtered && !((src_keep >> q) & 1u))) continue;
        ctx2.query = t.sm.state[4 * q + 2];
        sm_dist[q * kThreads + t.it.warp * 32 + src] = udf.distance(xr, t.sm.query_row(q), t.it.dim, &ctx2);
      }
    }
    ctx2.id = my_id;
    __syncwarp();  // the offer reads the distances other lanes wrote
  }

  // The lane's distance for query q: a shared load.
  template <class Tile> __device__ __forceinline__ float distance(const Tile& t, uint32_t q) {
    return __uint_as_float(t.sm.words()[q * kThreads + t.it.tid]);
  }
  __device__ __forceinline__ bool distance_calls() const { return false; }
  __device__ __forceinline__ void at_end(uint32_t dim) { ctx2.dim = dim; }
  // The lane's stored-vector id for ctx2.id (a dead load unless the UDF reads it).
  __device__ void set_id(const udf_ivf_scan_args_v1* args, bool valid, uint32_t slot) {
    ctx2.id = valid ? static_cast<int64_t>(args->ids[slot]) : -1;
  }
};

}  // namespace udf_kernels

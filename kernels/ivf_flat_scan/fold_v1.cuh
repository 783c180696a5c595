// The fold policy of ABI v1 metrics: an accumulator a (query, thread) in
// shared memory, folded coordinate by coordinate with the UDF's metric; the
// distance is its finalize (or the accumulator itself).  The rows twins of
// f32 vectors also fold items of 16 queries as a tile, the accumulators in
// registers until the vector's end (TILED FOLD).
#pragma once
#include "fold_chunks.cuh"

namespace udf_kernels {

template <class E, class A, bool kMax, class Udf> struct FoldV1 {
  static constexpr int V = E::veclen;
  static constexpr bool kStaged = false;  // no staged rows
  static constexpr bool kPrunable = true;

  Udf udf;
  udf_ctx_v1& ctx;
  A acc_init;

  // Words a (query, thread): the accumulator.
  static __device__ __forceinline__ uint32_t acc_words_for(const udf_ivf_scan_args_v1*) { return 1u; }

  __device__ __forceinline__ FoldV1(Udf u, udf_ctx_v1& c, udf_ctx_v2&, uint32_t, const udf_ivf_scan_args_v1* args)
      : udf(u), ctx(c), acc_init(AccFns<A>::from_bits(args->acc_init)) {}

  // Folds the lane's vector into every query whose bit is set in `keep`.
  template <class Tile> __device__ void score(const Tile& t, Prune& pr, const uint4* vp, bool load, uint64_t keep) {
    for (uint32_t q = 0; q < t.it.nq; ++q) t.sm.acc[q * kThreads + t.it.tid] = acc_init;
    fold_chunks<E, A, false>(*this, t, pr, vp, load, keep);
  }

  // TILED FOLD (ivf_flat_v1.h, ROWS LAYOUT): the warp folds its 32 rows for
  // the item's queries as one tile, each lane a block of rows x queries with
  // its accumulators in registers for the whole vector, where elsewhere a
  // lane folds its own row for every query with the accumulators in shared
  // memory.  A 16-byte read of a row's chunk then serves four queries, and
  // one of a query's chunk four rows.  The rows twins of f32 vectors with
  // the copied stage (LTO-IR for compute_80 or newer; the runtime gives that
  // stage where it wants the tile) take it for unfiltered items of exactly
  // kTileQueries queries.  The same bits as the other folds: each
  // accumulator folds its coordinates in order from acc_init.
  static constexpr uint32_t kTileQueries = UDF_IVF_SCAN_ROWS_TILE_QUERIES;
  template <class Tile> static constexpr bool kCanTile = Tile::kRowStage && V == 4 && sizeof(A) == 4 && can_copy_async();
  // The lane's block of a tile (acc[r][i]: row rq + 8 r, query 4 qq + i):
  // a local of the agent's step (ScanAgent::step_tiled), in registers.
  using TileAcc = A[4][4];
  // Whether the item folds as a tile (unfiltered, kTileQueries queries).
  template <class Tile> static __device__ __forceinline__ bool tiles(const Tile& t) {
    return t.sm.copied && !t.filtered && t.it.nq == kTileQueries;
  }

  // Lane (qq, rq) = (lane / 8, lane % 8) keeps rows rq + 8 r (r < 4) for
  // queries 4 qq + i (i < 4).  The warp's copied stage holds two halves of a
  // batch: a row's chunks c0 .. c0 + 3 at its stage chunks 0 .. 3 for even
  // c0 / 4 and 4 .. 7 for odd (of kStageRowChunks); the next half's copy is
  // in flight while one folds.  The accumulators end in `acc`: the offer
  // filter reads them there (tile_candidates), and untile() puts them in
  // sm.acc for the rest (an offer, K above 32); a vector that ends in a
  // partial chunk folds it from sm.acc (fold_tail) and reads them back.
  template <class Tile> __device__ __forceinline__ void fold_tile(const Tile& t, const uint4* vp, TileAcc& acc) {
    fold_whole_chunks(t, vp, acc);
    if (t.vec.tail != 0) {
      untile(t, acc);
      fold_tail<E, A, false>(*this, t, vp, true, ~0ull);
      __syncwarp();  // the other lanes' rows' last coordinates are folded
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[r][i] = t.sm.acc[tile_slot(t, r, i)];
    }
  }
  // The vector's whole chunks (t.vec.full), folded into acc from acc_init.
  template <class Tile> __device__ __forceinline__ void fold_whole_chunks(const Tile& t, const uint4* vp, TileAcc& acc) {
    const int lane = t.it.lane;
    const int rq = lane & 7, qq = lane >> 3;
    const int part = lane & 3, sub = lane >> 2;  // the copies: chunk `part` of rows sub + 8 i
    const uint4* src[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      src[i] = reinterpret_cast<const uint4*>(__shfl_sync(kFull, reinterpret_cast<unsigned long long>(vp), sub + 8 * i)) + part;
    // Shared addresses, 32-bit: the lane's copies into the half that is
    // not folded (+ 8 i rows) and its reads of the half that is (+ 8 r
    // rows, + j chunks), which trade places every half, and its first
    // query's chunks (the others qstride bytes apart), 64 bytes on every
    // half.  Carried from half to half rather than recomputed from the
    // half's index.
    const uint32_t put = smem_address(t.sm.row_stage + sub * kStageRowChunks + part);
    const uint32_t get = smem_address(t.sm.row_stage + rq * kStageRowChunks);
    uint32_t put_other = put + 64u, get_this = get, get_other = get + 64u;
    uint32_t qa = smem_address(t.sm.query_row(4 * qq));
    const uint32_t qstride = t.sm.q4 * 16u;
    const uint32_t full = t.vec.full, halves = (full + 3) / 4;
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][i] = acc_init;
    copy_async_wait();  // nothing of the stage in flight, and every read of it done
    __syncwarp();
    copy_half(put, src, 0, full, part);
#pragma unroll 1
    for (uint32_t h = 0; h < halves; ++h, qa += 64u) {
      if (h + 1 < halves) {
        __syncwarp();  // the other half's reads (half h - 1) are done
        copy_half(put_other, src, 4 * (h + 1), full, part);
        copy_async_wait_but_one();
      } else {
        copy_async_wait();
      }
      __syncwarp();
      if (4 * h + 4 <= full)
        fold_half<true>(acc, get_this, qa, qstride, 4 * h, full);
      else
        fold_half<false>(acc, get_this, qa, qstride, 4 * h, full);
      const uint32_t g = get_this, p = put_other;
      get_this = get_other;
      get_other = g;
      put_other = p ^ put ^ (put + 64u);
    }
  }

  // The sm.acc slot of the lane's acc[r][i]: query 4 qq + i, the thread of
  // lane rq + 8 r (whose row it is).
  template <class Tile> static __device__ __forceinline__ auto tile_slot(const Tile& t, int r, int i) {
    const int rq = t.it.lane & 7, qq = t.it.lane >> 3;
    return (4 * qq + i) * kThreads + t.it.warp * 32 + rq + 8 * r;
  }

  // A tile's accumulators to sm.acc, where fold_tail, distance() and the
  // offers of every other score read them.
  template <class Tile> __device__ __forceinline__ void untile(const Tile& t, const TileAcc& acc) {
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i) t.sm.acc[tile_slot(t, r, i)] = acc[r][i];
    __syncwarp();
  }

  // OFFER FILTER (agent.cuh) of a tile, from its registers (`tacc`): bit q
  // is set when some valid row's key for query q is at or under the
  // threshold that lane q holds (`thr`); the same bits as the filter over
  // sm.acc.
  template <class Tile> __device__ __forceinline__ uint32_t tile_candidates(const Tile& t, float thr, bool valid, const TileAcc& tacc) {
    const int rq = t.it.lane & 7, qq = t.it.lane >> 3;
    const uint32_t rows = wt_ballot(valid);
    uint32_t cand = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float th = wt_shfl(thr, 4 * qq + i);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float key = to_key<kMax>(udf.finalize ? udf.finalize(tacc[r][i], &ctx) : static_cast<float>(tacc[r][i]));
        if (((rows >> (rq + 8 * r)) & 1u) && key <= th) cand |= 1u << (4 * qq + i);
      }
    }
    return warp_or(cand);
  }

  // The copies of chunks c0 .. c0 + 3 (those below `full`) of the warp's 32
  // rows into a half of the stage (`put`: the lane's first copy there; src:
  // the lane's chunk `part` of its 4 rows), committed as one group.
  __device__ __forceinline__ void copy_half(uint32_t put, const uint4* const (&src)[4], uint32_t c0, uint32_t full, int part) const {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (c0 + part < full) copy_async16_to(put + i * 8 * kStageRowChunks * 16, src[i] + c0);
    copy_async_commit();
  }

  // Chunks c0 .. c0 + 3 (kWhole) or those below `full`, folded into the
  // lane's accumulators; `get`: the lane's first row's chunk c0 in the
  // stage, `qa`: its first query's chunk c0 (the others qstride bytes apart).
  template <bool kWhole>
  __device__ __forceinline__ void fold_half(A (&acc)[4][4], uint32_t get, uint32_t qa, uint32_t qstride, uint32_t c0,
                                            uint32_t full) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (kWhole || c0 + j < full) {
        A y[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint4 u = load_shared16(qa + i * qstride + j * 16);
          y[i][0] = AccFns<A>::from_bits(u.x);
          y[i][1] = AccFns<A>::from_bits(u.y);
          y[i][2] = AccFns<A>::from_bits(u.z);
          y[i][3] = AccFns<A>::from_bits(u.w);
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          A x[4];
          unpack<E, A, false>(load_shared16(get + (8 * r * kStageRowChunks + j) * 16), x);
#pragma unroll
          for (int v = 0; v < 4; ++v) {
            ctx.dim = (c0 + j) * 4 + v;
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[r][i] = udf.metric(x[v], y[i][v], acc[r][i], &ctx);
          }
        }
      }
    }
  }

  // One batch (fold_chunks.cuh).  Four queries at a time, then two
  // (unfiltered): one unpack of the batch and one load of a UDF's
  // per-coordinate capture for all of them, at the cost of registers.
  // Whole batches only: a vector's last, partial batch (a dim that is no
  // multiple of kBatch chunks) folds one query at a time, so that the grouped
  // folds are compiled once instead of twice.
  template <bool kWhole, class Tile>
  __device__ void batch(const Tile& t, Prune& pr, uint32_t c0, const uint4* bp, bool load, uint64_t keep) {
    uint4 r[kBatch];
    load_batch<kWhole>(r, t, bp, c0, load);
#pragma unroll 1
    for (uint32_t q = 0; q < t.it.nq; ++q) {
      if (kWhole && !t.filtered && q + 3 < t.it.nq) {
        if (pr.group_alive(q, 4)) fold<4, kWhole>(t, pr, q, c0, r);
        q += 3;
        continue;
      }
      if (kWhole && !t.filtered && q + 1 < t.it.nq) {  // two queries at a time (unfiltered)
        if (pr.group_alive(q, 2)) fold<2, kWhole>(t, pr, q, c0, r);
        ++q;
        continue;
      }
      const bool run = !t.filtered || ((keep >> q) & 1u);
      if (t.filtered && !__any_sync(kFull, run)) continue;  // no lane scores this query
      if (run) {
        if (pr.group_alive(q, 1)) fold<1, kWhole>(t, pr, q, c0, r);
      }
    }
  }

  // The batch folded into the accumulators of queries q .. q + N - 1, one
  // unpack of each chunk for all of them and N independent chains of metric
  // calls the scheduler can interleave; each accumulator folds its
  // coordinates in order (the same bits for any N).
  //
  // Each chunk's query coordinates are read as 16-byte words (V / 4 a query:
  // one LDS.128 for f32 vectors, 2 for f16, 4 for i8 / u8), written out
  // rather than left to the compiler, whose load vectorizer gives up part of
  // the way into a batch and reads the rest one coordinate at a time.
  template <int N, bool kWhole, class Tile>
  __device__ void fold(const Tile& t, Prune& pr, uint32_t q, uint32_t c0, const uint4 (&r)[kBatch]) {
    static_assert(sizeof(A) == 4 && V % 4 == 0, "query chunks are whole 16-byte words");
    A acc[N];
    const uint4* qv[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
      qv[i] = reinterpret_cast<const uint4*>(t.sm.query_row(q + i) + c0 * V);
      acc[i] = t.sm.acc[(q + i) * kThreads + t.it.tid];
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (kWhole || c0 + j < t.vec.full) {
        A x[V];
        unpack<E, A, false>(r[j], x);
        A y[N][V];
#pragma unroll
        for (int i = 0; i < N; ++i) {
#pragma unroll
          for (int w = 0; w < V / 4; ++w) {
            const uint4 u = qv[i][j * (V / 4) + w];
            const uint32_t b[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int l = 0; l < 4; ++l) y[i][4 * w + l] = AccFns<A>::from_bits(b[l]);
          }
        }
#pragma unroll
        for (int v = 0; v < V; ++v) {
          ctx.dim = (c0 + j) * V + v;
#pragma unroll
          for (int i = 0; i < N; ++i) acc[i] = udf.metric(x[v], y[i][v], acc[i], &ctx);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < N; ++i) t.sm.acc[(q + i) * kThreads + t.it.tid] = acc[i];
    // PRUNE: a query whose partial key (finalized) is above its bound stops
    // for this lane.  The check runs after every batch: checking less often
    // costs the fold registers.
    if (pr.on) {
      ctx.dim = t.it.dim;
#pragma unroll
      for (int i = 0; i < N; ++i) {
        if (q + i < 32u) {
          const float key = to_key<kMax>(udf.finalize ? udf.finalize(acc[i], &ctx) : static_cast<float>(acc[i]));
          if (key > bound_decode(t.sm.state[4 * (q + i) + 1])) pr.alive &= ~(1u << (q + i));
        }
      }
    }
  }

  // The last chunk's coordinates of query q (tail < V of them).
  template <class Tile> __device__ __forceinline__ void tail(const Tile& t, uint32_t q, const A (&x)[V]) {
    A acc = t.sm.acc[q * kThreads + t.it.tid];
    const A* qv = t.sm.query_row(q) + t.vec.full * V;
#pragma unroll
    for (int v = 0; v < V - 1; ++v) {  // tail < V
      if (v < static_cast<int>(t.vec.tail)) {
        ctx.dim = t.vec.full * V + v;
        acc = udf.metric(x[v], qv[v], acc, &ctx);
      }
    }
    t.sm.acc[q * kThreads + t.it.tid] = acc;
  }

  // The lane's distance for query q, after its vector is folded.
  template <class Tile> __device__ __forceinline__ float distance(const Tile& t, uint32_t q) {
    const A acc = t.sm.acc[q * kThreads + t.it.tid];
    return udf.finalize ? udf.finalize(acc, &ctx) : static_cast<float>(acc);
  }
  // Whether distance() calls the UDF (v1 with a finalize), rather than being
  // a shared load that every lane may read unconditionally.
  __device__ __forceinline__ bool distance_calls() const { return udf.finalize != nullptr; }
  // The context's coordinate for the finalize calls of an offer.
  __device__ __forceinline__ void at_end(uint32_t dim) { ctx.dim = dim; }
  // v1 metrics see no stored-vector id.
  __device__ void set_id(const udf_ivf_scan_args_v1*, bool, uint32_t) {}
};

}  // namespace udf_kernels

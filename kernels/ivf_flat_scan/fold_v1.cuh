// The fold policy of ABI v1 metrics: an accumulator a (query, thread) in
// shared memory, folded coordinate by coordinate with the UDF's metric; the
// distance is its finalize (or the accumulator itself).  The rows twins of
// f32 vectors also fold items of 16 queries as a tile, the accumulators in
// registers until the vector's end (TILED FOLD).
#pragma once
#include "fold_chunks.cuh"

namespace udf_kernels {

// TILED FOLD: the copied stage of G groups (G = 1 or 2: 32 G rows) holds
// two halves of a batch, tile_half_chunks(G) chunks of every row each; the
// next half's copy is in flight while one folds.  One group: row R's half h
// at stage chunks R * kStageRowChunks + 4 h .. + 3, as in the untiled stage.
// Two groups: half h from chunk 144 h, row R's chunks at 2 R + R / 4 there,
// so that the 8 lanes of a quarter warp (rows rq + 8 r, rq < 8) read 8
// different 16-byte bank groups.  Every address a lane uses is its base
// plus a constant.
__host__ __device__ constexpr uint32_t tile_half_chunks(int G) { return G == 1 ? 4u : 2u; }
__host__ __device__ constexpr uint32_t tile_stage_row(int G, uint32_t row) { return G == 1 ? row * kStageRowChunks : 2u * row + row / 4u; }
__host__ __device__ constexpr uint32_t tile_half_bytes(int G) { return G == 1 ? 64u : 144u * 16u; }
static_assert(tile_stage_row(2, 63) + 1 + 144 <= kCopiedStageChunks, "two halves of 64 rows' two chunks fit the copied stage");
// The item's query of accumulator i of lane (qq, rq): qq + 4 i, so that the
// four query rows a quarter warp reads at once (qq = 0 .. 3, q4 odd) fall in
// different 16-byte bank groups.
__host__ __device__ constexpr int tile_query(int qq, int i) { return qq + 4 * i; }
// A lane's place (qq, rq) in a tile: rows rq + 8 r, queries tile_query(qq, i).
__host__ __device__ constexpr int tile_rq(int lane) { return lane & 7; }
__host__ __device__ constexpr int tile_qq(int lane) { return lane >> 3; }

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
  // The lane's block of a tile (acc[r][i]: row rq + 8 r, query tile_query(qq, i)):
  // a local of the agent's step (ScanAgent::step_tiled), in registers.
  using TileAcc = A[4][4];
  // Whether the item folds as a tile (unfiltered, kTileQueries queries).
  template <class Tile> static __device__ __forceinline__ bool tiles(const Tile& t) {
    return t.sm.copied && !t.filtered && t.it.nq == kTileQueries;
  }

  // Lane (qq, rq) = (tile_qq, tile_rq) keeps rows rq + 8 r (r < 4) for
  // queries qq + 4 i (i < 4, tile_query).  The accumulators end in acc[0]
  // (one group's, as fold_whole_chunks<1> leaves them): the offer filter
  // reads them there (tile_candidates), and untile() puts them in sm.acc for
  // the rest (an offer, K above 32); a vector that ends in a partial chunk
  // folds it from sm.acc (fold_tail) and reads them back.
  template <class Tile> __device__ __forceinline__ void fold_tile(const Tile& t, const uint4* vp, TileAcc (&acc)[1]) {
    const uint4* const vps[1] = {vp};
    fold_whole_chunks<1>(t, vps, acc);
    if (t.vec.tail != 0) {
      untile(t, acc[0]);
      fold_tail<E, A, false>(*this, t, vp, true, ~0ull);
      __syncwarp();  // the other lanes' rows' last coordinates are folded
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[0][r][i] = t.sm.acc[tile_slot(t, r, i)];
    }
  }
  // TILED PAIR: two groups of 32 rows (vp0's and vp1's, a lane's slot of
  // each) folded at once as one tile of 64 rows, acc[g] the lane's block of
  // group g as fold_tile leaves it.  A lane's read of a query's chunk then
  // serves eight rows, and the step's own work (the rows' addresses, the
  // loop) is paid once for both.  Vectors of whole chunks only (no tail).
  template <class Tile> __device__ __forceinline__ void fold_tile_pair(const Tile& t, const uint4* vp0, const uint4* vp1, TileAcc (&acc)[2]) {
    const uint4* const vps[2] = {vp0, vp1};
    fold_whole_chunks<2>(t, vps, acc);
  }

  // The vector's whole chunks (t.vec.full) of the G groups at vp[g],
  // folded into acc[g] from acc_init.  Lane (qq, rq) keeps rows rq + 8 r of
  // every group; the copies: chunk `part` of rows sub + 8 G i (i < 4).
  template <int G, class Tile>
  __device__ __forceinline__ void fold_whole_chunks(const Tile& t, const uint4* const (&vp)[G], TileAcc (&acc)[G]) {
    constexpr int kParts = 4 / G;  // lanes copying a row's half
    const int lane = t.it.lane;
    const int rq = tile_rq(lane), qq = tile_qq(lane);
    const int part = lane % kParts, sub = lane / kParts;
    const uint4* src[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = sub + 8 * G * i;
      src[i] = reinterpret_cast<const uint4*>(__shfl_sync(kFull, reinterpret_cast<unsigned long long>(vp[(8 * G * i) / 32]), row % 32)) + part;
    }
    // Shared addresses, 32-bit: the lane's copies into the half that is
    // not folded and its reads of the half that is, which trade places
    // every half, and its first query's chunks (the others qstride bytes
    // apart), 16 tile_half_chunks(G) bytes on every half.  Carried from
    // half to half rather than recomputed from the half's index.
    const uint32_t put = smem_address(t.sm.row_stage + tile_stage_row(G, sub) + part);
    const uint32_t get = smem_address(t.sm.row_stage + tile_stage_row(G, rq));
    uint32_t put_other = put + tile_half_bytes(G), get_this = get, get_other = get + tile_half_bytes(G);
    uint32_t qa = smem_address(t.sm.query_row(tile_query(qq, 0)));
    const uint32_t qstride = t.sm.q4 * 16u * (tile_query(0, 1) - tile_query(0, 0));
    constexpr uint32_t kHalf = tile_half_chunks(G);
    const uint32_t full = t.vec.full;
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[g][r][i] = acc_init;
    copy_async_wait();  // nothing of the stage in flight, and every read of it done
    __syncwarp();
    copy_half<G>(put, src, 0, full, part);
    // The whole halves: each issues the next half's copies (past the
    // vector's end they read nothing: a group all the same) and folds its
    // own; then the partial last half, if any.
    const uint32_t whole = full / kHalf;
#pragma unroll 1
    for (uint32_t h = 0; h < whole; ++h, qa += 16u * kHalf) {
      __syncwarp();  // the other half's reads (half h - 1) are done
      copy_half<G>(put_other, src, kHalf * (h + 1), full, part);
      A y0[4][4];  // the half's first query chunk, read before the wait (fold_half)
      load_query_chunk(y0, qa, qstride, 0);
      copy_async_wait_but_one();
      __syncwarp();
      fold_half<true, G>(acc, get_this, qa, qstride, kHalf * h, full, y0);
      const uint32_t g = get_this, p = put_other;
      get_this = get_other;
      get_other = g;
      put_other = p ^ put ^ (put + tile_half_bytes(G));
    }
    if (whole * kHalf < full) {
      A y0[4][4];
      load_query_chunk(y0, qa, qstride, 0);
      copy_async_wait();
      __syncwarp();
      fold_half<false, G>(acc, get_this, qa, qstride, kHalf * whole, full, y0);
    }
  }

  // The sm.acc slot of the lane's acc[r][i]: query tile_query(qq, i), the thread of
  // lane rq + 8 r (whose row it is).
  template <class Tile> static __device__ __forceinline__ auto tile_slot(const Tile& t, int r, int i) {
    const int rq = tile_rq(t.it.lane), qq = tile_qq(t.it.lane);
    return tile_query(qq, i) * kThreads + t.it.warp * 32 + rq + 8 * r;
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
    const int rq = tile_rq(t.it.lane), qq = tile_qq(t.it.lane);
    const uint32_t rows = wt_ballot(valid);
    float key[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i) key[r][i] = to_key<kMax>(udf.finalize ? udf.finalize(tacc[r][i], &ctx) : static_cast<float>(tacc[r][i]));
    uint32_t cand = 0;
    if (rows == kFull) {  // every row valid (all groups but a list's last): the least key against the threshold
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // fminf passes over a NaN key, which no comparison takes either.
        const float least = fminf(fminf(key[0][i], key[1][i]), fminf(key[2][i], key[3][i]));
        if (least <= wt_shfl(thr, tile_query(qq, i))) cand |= 1u << tile_query(qq, i);
      }
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float th = wt_shfl(thr, tile_query(qq, i));
#pragma unroll
        for (int r = 0; r < 4; ++r)
          if (((rows >> (rq + 8 * r)) & 1u) && key[r][i] <= th) cand |= 1u << tile_query(qq, i);
      }
    }
    return warp_or(cand);
  }

  // The copies of chunks c0 .. c0 + tile_half_chunks(G) - 1 (those below
  // `full`) of the warp's 32 G rows into a half of the stage (`put`: the
  // lane's first copy there; src: the lane's chunk `part` of its 4 rows),
  // committed as one group.
  template <int G>
  __device__ __forceinline__ void copy_half(uint32_t put, const uint4* const (&src)[4], uint32_t c0, uint32_t full, int part) const {
    constexpr uint32_t kStep = (tile_stage_row(G, 8 * G) - tile_stage_row(G, 0)) * 16u;  // bytes from row sub to row sub + 8 G
#pragma unroll
    for (int i = 0; i < 4; ++i)
      copy_async16_or_zero(put + i * kStep, src[i] + c0, c0 + part >= full);
    copy_async_commit();
  }

  // The lane's four queries' coordinates of chunk j of a half (`qa`: its
  // first query's chunk 0 there, the others qstride bytes apart).
  static __device__ __forceinline__ void load_query_chunk(A (&y)[4][4], uint32_t qa, uint32_t qstride, int j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 u = load_shared16(qa + i * qstride + j * 16);
      y[i][0] = AccFns<A>::from_bits(u.x);
      y[i][1] = AccFns<A>::from_bits(u.y);
      y[i][2] = AccFns<A>::from_bits(u.z);
      y[i][3] = AccFns<A>::from_bits(u.w);
    }
  }

  // Chunks c0 .. c0 + tile_half_chunks(G) - 1 (kWhole) or those below `full`,
  // folded into the lane's accumulators; `get`: the lane's first row's
  // chunk c0 in the stage, `qa`: its first query's chunk c0 (the others
  // qstride bytes apart), y0: that chunk's query coordinates.  Row rq + 8 r
  // is group r / 4's row rq + 8 (r % 4).  The caller reads y0 before it
  // waits for the half's copy (the queries are in shared memory from the
  // item's start), so that the fold does not start on a wait for them.
  template <bool kWhole, int G>
  __device__ __forceinline__ void fold_half(TileAcc (&acc)[G], uint32_t get, uint32_t qa, uint32_t qstride, uint32_t c0,
                                            uint32_t full, const A (&y0)[4][4]) {
    constexpr uint32_t kRowStep = (tile_stage_row(G, 8) - tile_stage_row(G, 0)) * 16u;  // bytes from row rq to row rq + 8
#pragma unroll
    for (int j = 0; j < static_cast<int>(tile_half_chunks(G)); ++j) {
      if (kWhole || c0 + j < full) {
        A y[4][4];
        if (j == 0) {
#pragma unroll
          for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int v = 0; v < 4; ++v) y[i][v] = y0[i][v];
        } else {
          load_query_chunk(y, qa, qstride, j);
        }
#pragma unroll
        for (int r = 0; r < 4 * G; ++r) {
          A x[4];
          unpack<E, A, false>(load_shared16(get + r * kRowStep + j * 16), x);
#pragma unroll
          for (int v = 0; v < 4; ++v) {
            ctx.dim = (c0 + j) * 4 + v;
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[r / 4][r % 4][i] = udf.metric(x[v], y[i][v], acc[r / 4][r % 4][i], &ctx);
          }
        }
      }
    }
  }

  // Whether some lane of the warp keeps one of queries q, q + 1, .. (the
  // bits of `group`); always, unfiltered.
  template <class Tile> static __device__ __forceinline__ bool kept_by_some(const Tile& t, uint64_t keep, uint32_t q, uint32_t group) {
    return !t.filtered || __any_sync(kFull, ((keep >> q) & group) != 0);
  }

  // One batch (fold_chunks.cuh).  Four queries at a time, then two: one
  // unpack of the batch and one load of a UDF's per-coordinate capture for
  // all of them, at the cost of registers.  Whole batches only: a vector's
  // last, partial batch (a dim that is no multiple of kBatch chunks) folds
  // one query at a time, so that the grouped folds are compiled once instead
  // of twice (and not at all in an entry of ONE QUERY, ivf_flat_v1.h).  A
  // filtered launch folds the same groups, but skips one that no
  // lane keeps; a lane folds the group's queries it does not keep too, and
  // offers none of them (ScanAgent::scored_for).
  template <bool kWhole, class Tile>
  __device__ void batch(const Tile& t, Prune& pr, uint32_t c0, const uint4* bp, bool load, uint64_t keep) {
    uint4 r[kBatch];
    load_batch<kWhole>(r, t, bp, c0, load);
    const uint32_t nq = t.it.nq;
#pragma unroll 1
    for (uint32_t q = 0; q < nq; ++q) {
      if (kWhole && !t.it.one_query && q + 3 < nq) {
        if (kept_by_some(t, keep, q, 15u) && pr.group_alive(q, 4)) fold<4, kWhole>(t, pr, q, c0, r);
        q += 3;
        continue;
      }
      if (kWhole && !t.it.one_query && q + 1 < nq) {
        if (kept_by_some(t, keep, q, 3u) && pr.group_alive(q, 2)) fold<2, kWhole>(t, pr, q, c0, r);
        ++q;
        continue;
      }
      const bool run = !t.filtered || ((keep >> q) & 1u);
      if (!kept_by_some(t, keep, q, 1u)) continue;  // no lane scores this query
      // The vote first: with PRUNE every lane takes part in it.
      if (pr.group_alive(q, 1) && run) fold<1, kWhole>(t, pr, q, c0, r);
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

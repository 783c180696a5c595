// The fold policy of ABI v1 metrics: an accumulator a (query, thread) in
// shared memory, folded coordinate by coordinate with the UDF's metric; the
// distance is its finalize (or the accumulator itself).
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

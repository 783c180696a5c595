// The fold policy of ABI v2 state metrics: a state of up to
// UDF_ABI_METRIC_V2_STATE_WORDS words a (query, thread) in shared memory,
// updated coordinate by coordinate with the UDF's update; the distance is its
// finalize.
#pragma once
#include "fold_chunks.cuh"

namespace udf_kernels {

template <class E, class A, bool kMax, class Udf> struct FoldState {
  static constexpr int V = E::veclen;
  static constexpr int kMaxWords = UDF_ABI_METRIC_V2_STATE_WORDS;
  static constexpr bool kStaged = false;  // no staged rows
  static constexpr bool kPrunable = false;
  template <class Tile> static constexpr bool kCanTile = false;  // no TILED FOLD (fold_v1.cuh)

  Udf udf;
  udf_ctx_v2& ctx2;
  uint32_t acc_words;  // the words the UDF uses

  // Words a (query, thread): the state's words the UDF uses,
  // args->state_words (1..8; 0: all 8).
  static __device__ __forceinline__ uint32_t acc_words_for(const udf_ivf_scan_args_v1* args) {
    return args->state_words - 1u < uint32_t(kMaxWords) ? args->state_words : uint32_t(kMaxWords);
  }

  __device__ __forceinline__ FoldState(Udf u, udf_ctx_v1&, udf_ctx_v2& c2, uint32_t words, const udf_ivf_scan_args_v1*)
      : udf(u), ctx2(c2), acc_words(words) {}

  // The state of (query q, this thread): word w < acc_words at
  // words[(q * acc_words + w) * kThreads + tid]; the words past acc_words
  // are ones the UDF never touches (udfc found so), zero.
  template <class Tile> __device__ void load_state(const Tile& t, uint32_t q, udf_state_v2& st) const {
    uint32_t* const words = t.sm.words();
#pragma unroll
    for (int w = 0; w < kMaxWords; ++w) st.u[w] = uint32_t(w) < acc_words ? words[(q * acc_words + w) * kThreads + t.it.tid] : 0u;
  }
  // Writes back only the words that changed: once update is inlined, a word
  // it never writes compares equal to itself, so neither its load nor its
  // store is left (L2 as a state UDF then costs what v1's accumulator does).
  template <class Tile> __device__ void store_state(const Tile& t, uint32_t q, const udf_state_v2& st, const udf_state_v2& was) const {
    uint32_t* const words = t.sm.words();
#pragma unroll
    for (int w = 0; w < kMaxWords; ++w)
      if (uint32_t(w) < acc_words && st.u[w] != was.u[w]) words[(q * acc_words + w) * kThreads + t.it.tid] = st.u[w];
  }

  // Updates the states of every query whose bit is set in `keep` with the
  // lane's vector.
  template <class Tile> __device__ void score(const Tile& t, Prune& pr, const uint4* vp, bool load, uint64_t keep) {
    uint32_t* const words = t.sm.words();
    for (uint32_t q = 0; q < t.it.nq; ++q) {
#pragma unroll
      for (int w = 0; w < kMaxWords; ++w)
        if (uint32_t(w) < acc_words) words[(q * acc_words + w) * kThreads + t.it.tid] = t.it.args->state_init[w];
    }
    fold_chunks<E, A, true>(*this, t, pr, vp, load, keep);
  }

  // One batch (fold_chunks.cuh), one query at a time.
  template <bool kWhole, class Tile>
  __device__ void batch(const Tile& t, Prune&, uint32_t c0, const uint4* bp, bool load, uint64_t keep) {
    uint4 r[kBatch];
    load_batch<kWhole>(r, t, bp, c0, load);
    // body(e, x) for each real coordinate of the batch, in order: e its
    // offset from c0 * V, x the vector's element (each chunk unpacked once
    // a query).  The chunk's words pass through an empty asm first, so that
    // the unpack stays in the query loop: hoisted out of it, the batch's
    // kBatch * V unpacked values would all be live across the loop (byte
    // elements: a register each).
    auto each_coordinate = [&](const auto& body) {
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (kWhole || c0 + j < t.vec.full) {
          uint4 w = r[j];
          asm volatile("" : "+r"(w.x), "+r"(w.y), "+r"(w.z), "+r"(w.w));
          A x[V];
          unpack<E, A, true>(w, x);
#pragma unroll
          for (int v = 0; v < V; ++v) body(j * V + v, x[v]);
        }
      }
    };
#pragma unroll 1
    for (uint32_t q = 0; q < t.it.nq; ++q) {
      const bool run = !t.filtered || ((keep >> q) & 1u);
      if (t.filtered && !__any_sync(kFull, run)) continue;  // no lane scores this query
      if (run) {
        const A* qv = t.sm.query_row(q) + c0 * V;
        udf_state_v2 st;
        load_state(t, q, st);
        const udf_state_v2 was = st;
        ctx2.query = t.sm.state[4 * q + 2];
        each_coordinate([&](int e, A x) {
          ctx2.dim = c0 * V + e;
          udf.update(x, qv[e], &st, &ctx2);
        });
        store_state(t, q, st, was);
      }
    }
  }

  // The last chunk's coordinates of query q (tail < V of them).
  template <class Tile> __device__ __forceinline__ void tail(const Tile& t, uint32_t q, const A (&x)[V]) {
    const A* qv = t.sm.query_row(q) + t.vec.full * V;
    udf_state_v2 st;
    load_state(t, q, st);
    const udf_state_v2 was = st;
    ctx2.query = t.sm.state[4 * q + 2];
#pragma unroll
    for (int v = 0; v < V - 1; ++v) {
      if (v < static_cast<int>(t.vec.tail)) {
        ctx2.dim = t.vec.full * V + v;
        udf.update(x[v], qv[v], &st, &ctx2);
      }
    }
    store_state(t, q, st, was);
  }

  // The lane's distance for query q: the finalize of its state.
  template <class Tile> __device__ __forceinline__ float distance(const Tile& t, uint32_t q) {
    udf_state_v2 st;
    load_state(t, q, st);
    ctx2.query = t.sm.state[4 * q + 2];
    return udf.finalize(&st, &ctx2);
  }
  __device__ __forceinline__ bool distance_calls() const { return true; }
  __device__ __forceinline__ void at_end(uint32_t dim) { ctx2.dim = dim; }
  // The lane's stored-vector id for ctx2.id (a dead load unless the UDF reads it).
  __device__ void set_id(const udf_ivf_scan_args_v1* args, bool valid, uint32_t slot) {
    ctx2.id = valid ? static_cast<int64_t>(args->ids[slot]) : -1;
  }
};

}  // namespace udf_kernels

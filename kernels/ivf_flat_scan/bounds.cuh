// The scan's query bounds (QUERY BOUND, ivf_flat_v1.h) and the pruning
// they allow (PRUNE): a key above a query's bound cannot enter its result.
#pragma once
#include "../warp_topk.cuh"
#include "block_topk.cuh"
#include "layout.cuh"

namespace udf_kernels {

// PRUNE (ivf_flat_v1.h): a monotone metric's partial key only grows, so a
// lane stops folding a query once that key is above the query's bound.  on:
// the variant prunes, the fold may (the v1 shape) and K is 32; false at
// compile time in the plain variants, whose code then has no trace of it.
// A filtered launch starts each scored slot with the queries that keep it
// alive, so a query's bound comes from its kept candidates only.
struct Prune {
  bool on;
  uint32_t alive;  // bit q (q < 32) while this lane still folds query q

  // Whether any lane still folds one of queries q .. q + n - 1 (the vote as
  // inline PTX: warp_topk.cuh).  A branch on a vote makes ptxas before
  // sm_90 call its shuffle helpers out of line: udf-link takes the prune
  // variants for sm_90 and newer only.
  __device__ bool group_alive(uint32_t q, uint32_t n) const {
    if (!on || q + n > 32u) return true;
    return wt_ballot(((alive >> q) & ((1u << n) - 1u)) != 0) != 0;
  }
  // Whether no lane folds any of the item's nq queries any more.
  __device__ __forceinline__ bool none_alive(uint32_t nq) const {
    return wt_ballot((alive & (nq == 32u ? ~0u : (1u << nq) - 1u)) != 0) == 0;
  }
};

// QUERY BOUND (ivf_flat_v1.h): lane q < 32 holds query q's word, read
// through L2 once a step (other blocks lower it); queries from 32 on go
// unbounded.
struct QueryBounds {
  uint32_t* words;  // args.query_bound: a word a query, or null
  uint32_t lane_word;

  __device__ __forceinline__ explicit QueryBounds(const udf_ivf_scan_args_v1* args)
      : words(args->query_bound), lane_word(UDF_IVF_V1_BOUND_NONE) {}

  // Reads lane q's word; with PRUNE, lowers the block's bound to it.
  template <class Tile> __device__ void read(const Tile& t, const Prune& pr) {
    if (words != nullptr && static_cast<uint32_t>(t.it.lane) < t.it.nq) {
      lane_word = __ldcg(words + t.sm.state[4 * t.it.lane + 3]);
      if (pr.on) atomicMin(t.sm.state + 4 * t.it.lane + 1, lane_word);
    }
  }

  // PRUNE: lane q < 32 lowers query q's block bound, and its global one, to
  // this warp's k-th key (k candidates of the query at or under it).
  template <int S, class Tile> __device__ void share(const Tile& t) {
    if (static_cast<uint32_t>(t.it.lane) < t.it.nq && t.it.lane < 32) {
      const float kth = t.sm.keys[t.it.lane * S + t.it.warp * 32 + t.it.k - 1];
      if (kth < __int_as_float(0x7f800000)) {
        const uint32_t e = bound_encode(kth);
        atomicMin(t.sm.state + 4 * t.it.lane + 1, e);
        if (words != nullptr && e < lane_word) {
          atomicMin(words + t.sm.state[4 * t.it.lane + 3], e);
          lane_word = e;
        }
      }
    }
  }
};

}  // namespace udf_kernels

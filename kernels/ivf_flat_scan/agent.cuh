// The scan agent: one work item's scan, composed of a fold policy (the
// metric's shape: fold_v1.cuh, fold_state.cuh, fold_vector.cuh), the filter
// policy (filter.cuh), the query bounds and PRUNE (bounds.cuh), and the
// top-k of each query: K 32 keeps each warp's list (warp_topk.cuh), larger K
// a block-wide buffer (block_topk.cuh).
//
// Each step, every warp takes a group of 32 slots of the item's list, a
// slot a lane; the fold scores the lane's vector for the item's queries and
// the agent offers each score to its query's top-k.  At the end the item's
// rows of candidates are written (scan() then runs TAIL MERGE).
//
// The agent holds what its per-lane operations share (the tile, the fold,
// PRUNE's state, the query bounds); the step bookkeeping (ScanSteps, the
// filter's queue count, the work item) stays in the caller's locals, which
// the compiler keeps in registers from the start.
#pragma once
#include "bounds.cuh"
#include "filter.cuh"
#include "merge.cuh"

namespace udf_kernels {

template <class E, class A, bool kMax, int K, class Fold, Layout L = Layout::Lists> struct ScanAgent {
  static constexpr int S = UDF_IVF_V1_SORT_CAPACITY(K);
  using Tile = ScanTile<A, S, Fold::kStaged, typename VectorsFor<L, E::veclen>::type>;

  Tile t;
  Fold fold;
  Prune pr;
  QueryBounds bounds;

  // Whether the lane scored its vector for query q (with PRUNE, queries
  // from 32 on always).
  __device__ bool scored_for(bool valid, uint64_t keep, uint32_t q) {
    return valid && (!t.filtered || ((keep >> q) & 1u)) && (!pr.on || q >= 32u || ((pr.alive >> q) & 1u));
  }
  // The lane's key for query q (its vector's distance).
  __device__ float key_of(uint32_t q) { return to_key<kMax>(fold.distance(t, q)); }

  // Offers the lane's slot to query q.  All 32 lanes.
  __device__ void offer_one(uint32_t q, bool valid, uint64_t keep, uint32_t slot) {
    const TopK tk{t.sm.keys + q * S, t.sm.slots + q * S, t.sm.state + 4 * q};
    const uint32_t qb = wt_shfl(bounds.lane_word, static_cast<int>(q & 31u));
    const float bound = q < 32u ? bound_decode(qb) : __int_as_float(0x7f800000);
    const bool scored = scored_for(valid, keep, q);
    const float key = scored ? key_of(q) : 0.0f;
    if constexpr (K == 32) {  // this warp's list for query q
      warp_list_offer(tk.keys + t.it.warp * 32, tk.slots + t.it.warp * 32, t.it.k,
                      scored && key < __int_as_float(0x7f800000) && key <= bound, key, slot, t.it.lane);
    } else {
      const bool pass = scored && topk_beats(tk, t.it.k, key, slot) && key <= bound;
      topk_offer<K>(tk, pass, key, slot);
    }
  }

  // Offers the lane's slot to every query that scored it.  All 32 lanes.
  //
  // OFFER FILTER (K 32): a key enters query q's warp list only when it is at
  // or under both the query's bound and the list's k-th key.  Lane q (< 32)
  // takes their minimum once a step, after the fold (nothing more is live
  // across it); every lane compares its keys with it, and only the queries
  // where some lane passes take the list's exact test (a tiled score's keys
  // are compared where they are, in registers: step_tiled).  The others cost a
  // shuffle, a shared load and a compare instead of a bound decode, the
  // list's k-th entry, a vote and the address arithmetic; most (query, step)
  // pairs insert nothing.  The test never drops a key the list would take:
  // the same results.
  __device__ void offer(bool valid, uint64_t keep, uint32_t slot) {
    fold.at_end(t.it.dim);
    if constexpr (K == 32) {
      const uint32_t nq = t.it.nq;
      const int lane = t.it.lane;
      const float thr = threshold();
      const uint32_t nq32 = nq < 32u ? nq : 32u;
      uint32_t cand = 0;  // bit q: this lane's key may enter query q's list
      for (uint32_t q = 0; q < nq32; ++q) {
        const float th = wt_shfl(thr, static_cast<int>(q));
        // A key that is a shared load (v1 without a finalize, the vector
        // shape) is read by every lane, with no branch: a lane that scored
        // nothing reads a stale one.
        const bool pass = fold.distance_calls() ? scored_for(valid, keep, q) && key_of(q) <= th
                                                : key_of(q) <= th && scored_for(valid, keep, q);
        if (pass) cand |= 1u << q;
      }
#pragma unroll
      for (int m = 16; m > 0; m >>= 1) cand |= wt_shfl_xor(cand, m);  // the warp's, in every lane
      // Bit q: some lane's key may enter query q's list (a vote, so that
      // ptxas sees the loop below uniform: warp_topk.cuh); every query from
      // 32 on (unfiltered: no bound there).
      uint64_t some = wt_ballot((cand >> lane) & 1u);
      if (nq > 32u) some |= (nq == 64u ? ~0ull : (1ull << nq) - 1u) & ~0xFFFFFFFFull;
      while (some != 0) {
        const uint32_t q = static_cast<uint32_t>(__ffsll(static_cast<long long>(some))) - 1u;
        some &= some - 1u;
        offer_one(q, valid, keep, slot);
      }
    } else {
      for (uint32_t q = 0; q < t.it.nq; ++q) offer_one(q, valid, keep, slot);
    }
  }

  // K 32: lane q's (< nq) threshold of the OFFER FILTER, the smaller of its
  // query's bound and its warp list's k-th key; +inf in the other lanes.
  __device__ __forceinline__ float threshold() {
    float thr = __int_as_float(0x7f800000);
    if (static_cast<uint32_t>(t.it.lane) < t.it.nq)
      thr = fminf(bound_decode(bounds.lane_word), t.sm.keys[static_cast<uint32_t>(t.it.lane) * S + t.it.warp * 32 + t.it.k - 1]);
    return thr;
  }

  // A step of a tiled item (fold_v1.cuh, TILED FOLD: unfiltered, fewer than
  // 32 queries): the warp's group folded as a tile (`scored`: the warp has
  // one), its accumulators in this step's registers, and offered.
  __device__ __forceinline__ void step_tiled(bool scored, bool valid, uint32_t slot, const uint4* vp) {
    typename Fold::TileAcc acc[1];
    if (scored) {
      fold.fold_tile(t, vp, acc);
    } else {
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[0][r][i] = fold.acc_init;  // no valid row: nothing is offered
    }
    fold.at_end(t.it.dim);
    offer_tile(acc[0], valid, slot);
  }

  // Two steps of a tiled item whose vectors have no partial chunk (TILED
  // PAIR): the warp's groups g0 and g0 + kWarps folded at once, then
  // offered one after the other.  g0 is in the item's run; a warp whose
  // second group is past it folds the first one's rows twice and offers
  // nothing of the second (its lanes are not valid).
  __device__ __forceinline__ void step_tiled_pair(const ScanSteps& steps, uint32_t g0) {
    const uint32_t g1 = g0 + kWarps;
    const uint32_t rel0 = g0 * 32 + t.it.lane, rel1 = g1 * 32 + t.it.lane;
    const bool valid0 = rel0 < steps.size, valid1 = g1 < steps.g_end && rel1 < steps.size;
    const uint4* const vp0 = t.vec.vector_of(steps.first + rel0);
    const uint4* const vp1 = g1 < steps.g_end ? t.vec.vector_of(steps.first + rel1) : vp0;
    typename Fold::TileAcc acc[2];
    fold.fold_tile_pair(t, vp0, vp1, acc);
    fold.at_end(t.it.dim);
    offer_tile(acc[0], valid0, static_cast<uint32_t>(steps.first + rel0));
    if constexpr (K != 32) flush_full();
    __syncwarp();  // the first group's offers have read sm.acc
    offer_tile(acc[1], valid1, static_cast<uint32_t>(steps.first + rel1));
    if constexpr (K != 32) flush_full();
  }

  // A tile's accumulators offered (the lane's rows rq + 8 r of its warp's
  // group, `valid` and `slot` its own row's).  The OFFER FILTER compares
  // them in registers; they go to sm.acc for offer_one only when some query
  // may take a key (K 32) or always (K above 32).
  template <class TileAcc> __device__ __forceinline__ void offer_tile(const TileAcc& acc, bool valid, uint32_t slot) {
    uint32_t some = (1u << t.it.nq) - 1u;
    if constexpr (K == 32) {
      some = fold.tile_candidates(t, threshold(), valid, acc);
      if (some == 0) return;
    }
    fold.untile(t, acc);
    while (some != 0) {
      const uint32_t q = static_cast<uint32_t>(__ffs(static_cast<int>(some))) - 1u;
      some &= some - 1u;
      offer_one(q, valid, ~0ull, slot);
    }
  }

  // An unfiltered step's group, a slot a lane (`scored`: the warp has
  // one; the lane's vector is that of slot `at`), scored and offered.
  __device__ __forceinline__ void score_and_offer_group(bool scored, bool valid, uint32_t slot, uint64_t at) {
    if (scored) fold.score(t, pr, t.vec.vector_of(at), true, ~0ull);  // warp-uniform
    offer(valid, ~0ull, slot);
  }

  // Scores the vector of the lane's slot (`load`: the lane reads it) for the
  // queries whose bit is set in `keep`, and offers it.
  __device__ __forceinline__ void score_and_offer(bool valid, uint32_t slot, bool load, uint64_t keep) {
    fold.set_id(t.it.args, valid, slot);
    fold.score(t, pr, t.vec.vector_of(slot), load, keep);
    offer(valid, keep, slot);
  }

  // What a filtered launch's warp scores at a step: its lanes' slots, vectors
  // and keep masks (`score`: it scores any; warp-uniform).
  struct FilteredPick {
    bool score, valid, load;
    uint32_t slot;
    uint64_t keep;
  };

  // A step of a filtered launch: a group whose every slot is kept is scored
  // in place; otherwise its kept slots are queued, and 32 of them scored
  // once the queue holds as many.
  __device__ __forceinline__ FilteredPick pick_filtered(ScanFilter& filter, bool valid, uint32_t slot) {
    const uint64_t keep = filter.keep_mask(t, valid, slot);  // bit q: query q keeps this slot
    const unsigned in_list = __ballot_sync(kFull, valid);
    const unsigned kept = __ballot_sync(kFull, keep != 0);
    if (in_list == 0) return {};  // past the list: nothing to do
    if (kept == in_list) return {true, valid, true, slot, keep};  // every slot of the group is kept: scan it in place
    filter.push(t, kept, keep, slot);
    if (filter.queued < 32) return {};
    FilteredPick p{true, true, true, 0u, 0ull};
    filter.pop(t, p.slot, p.keep);
    return p;
  }

  // After the last step: the rest of the queue, at most 31 slots, at most 128
  // candidates a query.
  __device__ __forceinline__ FilteredPick pick_rest(const ScanFilter& filter) {
    const int lane = t.it.lane;
    const bool mine = lane < static_cast<int>(filter.queued);
    return {filter.queued != 0, mine, mine, mine ? t.sm.queue_slot[lane] : 0u, mine ? t.sm.queue_keep[lane] : 0ull};
  }

  // K above 32: flushes the block-wide buffers that the next step could
  // overflow (the warp lists of K 32 fill all of S).
  __device__ __forceinline__ void flush_full() {
    constexpr uint32_t kFlushAt = S - K - kThreads;  // buffered count above which the next step could overflow
    __syncthreads();
    for (uint32_t q = 0; q < t.it.nq; ++q) {
      if (t.sm.state[4 * q] > kFlushAt) topk_flush<K, S>(TopK{t.sm.keys + q * S, t.sm.slots + q * S, t.sm.state + 4 * q}, t.it.k);
    }
    __syncthreads();  // every thread has read the counts before the next step appends
  }

  // K 32: per query, a warp merges the warps' lists into the query's row
  // (or a one-row query's result).  Block-uniform loop bounds (see
  // warp_topk.cuh): a warp past nq merges the last query again and writes
  // nothing.
  __device__ __forceinline__ void write_warp_lists(const udf_ivf_work_item_v1& item, bool single0) {
    const uint32_t nq = t.it.nq, k = t.it.k;
    const int warp = t.it.warp, lane = t.it.lane;
    const udf_ivf_scan_args_v1* args = t.it.args;
    for (uint32_t q0 = 0; q0 < nq; q0 += kWarps) {
      const uint32_t q = q0 + warp < nq ? q0 + warp : nq - 1;
      const WarpEntry best = warp_merge_lists<kWarps>(t.sm.keys + q * S, t.sm.slots + q * S, lane);
      const udf_ivf_pair_v1 pair = args->pairs[item.pair_begin + q];
      if (q0 + warp < nq && static_cast<uint32_t>(lane) < k) {
        if (item_query_single_row(args, q, pair.query, single0)) {
          write_single_row<kMax>(args, pair.query, lane, best.key, best.val);
        } else {
          const uint64_t row = pair.row;
          args->cand_dists[row * k + lane] = kMax ? -best.key : best.key;
          args->cand_slots[row * k + lane] = best.val;
          if (bounds.words != nullptr && static_cast<uint32_t>(lane) == k - 1) bound_publish(bounds.words, t.sm.state[4 * q + 3], best.key);
        }
      }
    }
    reset_single_row_bounds(item, single0);
  }

  // PRUNE: a one-row query's bound word, which its steps may have lowered
  // (QueryBounds::share), back to UDF_IVF_V1_BOUND_NONE, as its tail merge
  // would leave it; no other item reads it.  Without PRUNE nothing lowers
  // such a word (its row publishes no bound).
  __device__ __forceinline__ void reset_single_row_bounds(const udf_ivf_work_item_v1& item, bool single0) {
    const udf_ivf_scan_args_v1* args = t.it.args;
    if (!pr.on || bounds.words == nullptr || args->query_done == nullptr) return;
    for (uint32_t q = t.it.tid; q < t.it.nq; q += kThreads) {
      if (item_query_single_row(args, q, args->pairs[item.pair_begin + q].query, single0)) bounds.words[t.sm.state[4 * q + 3]] = UDF_IVF_V1_BOUND_NONE;
    }
  }

  // K above 32: per query, the block sorts its buffer into the query's row
  // (or a one-row query's result).
  __device__ __forceinline__ void write_buffers(const udf_ivf_work_item_v1& item, bool single0) {
    const uint32_t k = t.it.k;
    const udf_ivf_scan_args_v1* args = t.it.args;
    for (uint32_t q = 0; q < t.it.nq; ++q) {
      const TopK tk{t.sm.keys + q * S, t.sm.slots + q * S, t.sm.state + 4 * q};
      if (tk.state[0] != 0) topk_flush<K, S>(tk, k);
      const udf_ivf_pair_v1 pair = args->pairs[item.pair_begin + q];
      const uint64_t row = pair.row;
      const bool single = item_query_single_row(args, q, pair.query, single0);
      for (uint32_t i = t.it.tid; i < k; i += kThreads) {
        const float key = tk.keys[i];
        if (single) {
          write_single_row<kMax>(args, pair.query, i, key, tk.slots[i]);
        } else {
          args->cand_dists[row * k + i] = kMax ? -key : key;
          args->cand_slots[row * k + i] = tk.slots[i];
          if (bounds.words != nullptr && i == k - 1) bound_publish(bounds.words, t.sm.state[4 * q + 3], key);
        }
      }
    }
    reset_single_row_bounds(item, single0);
  }

  // The item's scan, after the block's shared memory is set up: its steps,
  // then its rows of candidates written.  single0: whether query 0 is one of
  // one row (tail_merge_single_row, read before the steps).
  __device__ __forceinline__ void run(const ScanSteps& steps, ScanFilter& filter, const udf_ivf_work_item_v1& item, bool single0) {
    [[maybe_unused]] bool tiled = false;  // the item folds as a tile (step_tiled)
    uint32_t step = 0;
    if constexpr (Fold::template kCanTile<Tile>) {
      tiled = Fold::tiles(t);
      // TILED PAIR: every step but the last has all its groups in the run.
      if (tiled && t.vec.tail == 0 && !pr.on) {  // (rows entries never prune)
        for (; step + 1 < steps.n_steps; step += 2) {
          bounds.read(t, pr);
          step_tiled_pair(steps, steps.g_begin + step * kWarps + t.it.warp);
        }
      }
    }
    // A filtered launch takes one more step, for the rest of its queue: its
    // fold is then inlined once (score_and_offer), not once a kind of step.
    const uint32_t n_steps = steps.n_steps + (t.filtered ? 1u : 0u);
    for (; step < n_steps; ++step) {
      const uint32_t g = steps.g_begin + step * kWarps + t.it.warp;
      const uint32_t rel = g * 32 + t.it.lane;  // position in the list
      const bool valid = g < steps.g_end && rel < steps.size;
      const uint32_t slot = static_cast<uint32_t>(steps.first + rel);
      bounds.read(t, pr);
      if (!t.filtered) {  // the warp's group, a slot a lane
        fold.set_id(t.it.args, valid, slot);
        if (pr.on) pr.alive = valid ? ~0u : 0u;
        if constexpr (Fold::template kCanTile<Tile>) {
          if (tiled)
            step_tiled(g < steps.g_end, valid, slot, t.vec.vector_of(steps.first + rel));
          else
            score_and_offer_group(g < steps.g_end, valid, slot, steps.first + rel);
        } else {  // score_and_offer_group written out: through it, the v2 state scans compile to other code
          if (g < steps.g_end) fold.score(t, pr, t.vec.vector_of(steps.first + rel), true, ~0ull);  // warp-uniform
          offer(valid, ~0ull, slot);
        }
        if (pr.on) bounds.template share<S>(t);
      } else {
        const FilteredPick p = step < steps.n_steps ? pick_filtered(filter, valid, slot) : pick_rest(filter);
        if (p.score) {  // warp-uniform
          if (pr.on) pr.alive = p.valid ? static_cast<uint32_t>(p.keep) : 0u;  // the queries that keep the slot
          score_and_offer(p.valid, p.slot, p.load, p.keep);
          if (pr.on) bounds.template share<S>(t);
        }
      }
      if constexpr (K != 32) flush_full();  // the block-wide buffers
    }
    __syncthreads();
    if constexpr (K == 32)
      write_warp_lists(item, single0);
    else
      write_buffers(item, single0);
  }
};

}  // namespace udf_kernels

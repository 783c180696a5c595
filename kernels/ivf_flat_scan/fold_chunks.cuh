// The walk of the v1 and state folds over the lane's vector: batches of
// kBatch 16-byte chunks (kBatch loads in flight before the UDF runs), then
// the last, partial chunk.  The fold policy (fold_v1.cuh, fold_state.cuh)
// folds each batch and the tail into its accumulators or states.
#pragma once
#include "bounds.cuh"
#include "layout.cuh"

namespace udf_kernels {

// One batch of kBatch chunks from c0, chunk c0 at bp.  kWhole: all of them
// are below `full` (every batch but a last, partial one), so no chunk is
// guarded: the fold is straight-line loads and UDF calls.  The chunks are at
// constant offsets (j * kStride * 16 bytes) from bp: an address recomputed from the
// chunk index (a 32-bit sum that may not wrap before the widening) is a wide
// multiply of its own a load.  A whole batch of a layout that reads
// together (Tile::kRowStage) is read by the warp together (all 32 lanes),
// every lane's whatever its `load`.
template <bool kWhole, class Tile>
__device__ __forceinline__ void load_batch(uint4 (&r)[kBatch], const Tile& t, const uint4* bp, uint32_t c0, bool load) {
  if constexpr (kWhole && Tile::kRowStage) {
    t.vec.load_together(r, bp, t.sm.row_stage, t.it.lane, t.sm.copied, c0 == 0, c0 + 2 * kBatch <= t.vec.full);
  } else {
#pragma unroll
    for (int j = 0; j < kBatch; ++j)
      if (kWhole || c0 + j < t.vec.full) r[j] = load ? __ldg(bp + j * Tile::kChunkStride) : make_uint4(0, 0, 0, 0);
  }
}

// The vector's last, partial chunk (dim % V coordinates, if any) folded
// into each query whose bit is set in `keep`: fold.tail, one query at a time.
template <class E, class A, bool kV2, class Fold, class Tile>
__device__ __forceinline__ void fold_tail(Fold& fold, const Tile& t, const uint4* vp, bool load, uint64_t keep) {
  constexpr int V = E::veclen;
  if (t.vec.tail == 0) return;
  const uint4 r = load ? __ldg(vp + static_cast<uint64_t>(t.vec.full) * Tile::kChunkStride) : make_uint4(0, 0, 0, 0);
  A x[V];
  unpack<E, A, kV2>(r, x);
#pragma unroll 1
  for (uint32_t q = 0; q < t.it.nq; ++q) {
    if (t.filtered && !((keep >> q) & 1u)) continue;
    fold.tail(t, q, x);
  }
}

// Folds the lane's vector (at vp; `load`: the lane reads it) into the
// queries whose bit is set in `keep`: fold.batch for each batch of whole
// chunks, fold.tail for each query's last coordinates.  With PRUNE, stops
// when no lane folds any query any more: not even the loads.
template <class E, class A, bool kV2, class Fold, class Tile>
__device__ __forceinline__ void fold_chunks(Fold& fold, const Tile& t, Prune& pr, const uint4* vp, bool load, uint64_t keep) {
  const uint4* bp = vp;  // chunk c0's address, carried (not recomputed from the slot each batch)
#pragma unroll 1
  for (uint32_t c0 = 0; c0 < t.vec.full; c0 += kBatch, bp += kBatch * Tile::kChunkStride) {
    if (pr.on && c0 != 0 && t.it.nq <= 32u && pr.none_alive(t.it.nq)) return;
    if (c0 + kBatch <= t.vec.full)
      fold.template batch<true>(t, pr, c0, bp, load, keep);
    else
      fold.template batch<false>(t, pr, c0, bp, load, keep);
  }
  fold_tail<E, A, kV2>(fold, t, vp, load, keep);
}

}  // namespace udf_kernels

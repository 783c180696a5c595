// IVF-Flat kernel pack v1: the scan (one template for every metric ABI and
// shape) and the merge, shared by the pack's two LTO-IR files:
// ivf_flat_v1.cu (ABI v1 scan variants and the merge kernels) and
// ivf_flat_v1_metric_v2.cu (ABI v2 scan variants), so that a module of v1
// metrics never makes nvJitLink read the v2 variants.  See
// include/udf/kernels/ivf_flat_v1.h for the contract and docs/kernels.md for
// the design.
//
// The scan is composed in the manner of CUB's agents and policies, its
// parts in ivf_flat_scan/:
//   types.cuh        block shape, element and accumulator types, the UDF's
//                    functions by metric shape, unpacking
//   block_topk.cuh   the block-wide top-k buffer, QUERY BOUND's words
//   merge.cuh        the merge (the pack's merge kernels and TAIL MERGE)
//   layout.cuh       the work item, the shared-memory layout, the list run
//   bounds.cuh       the query bounds and PRUNE
//   fold_chunks.cuh  the walk of a fold over the lane's vector
//   fold_v1.cuh, fold_state.cuh, fold_vector.cuh
//                    one fold policy per metric shape
//   filter.cuh       the filter policy: keep masks and each warp's queue
//   agent.cuh        the scan agent: steps, offers, the rows written
// Everything is inlined into the entry kernel that udf-link makes, where the
// UDF's functions and the filter are known.
#pragma once
#include <cuda_fp16.h>

#include <udf/kernels/ivf_flat_v1.h>

#include "block_sort.cuh"
#include "warp_topk.cuh"

#include "ivf_flat_scan/types.cuh"
#include "ivf_flat_scan/block_topk.cuh"
#include "ivf_flat_scan/merge.cuh"
#include "ivf_flat_scan/layout.cuh"
#include "ivf_flat_scan/bounds.cuh"
#include "ivf_flat_scan/fold_v1.cuh"
#include "ivf_flat_scan/fold_state.cuh"
#include "ivf_flat_scan/fold_vector.cuh"
#include "ivf_flat_scan/filter.cuh"
#include "ivf_flat_scan/agent.cuh"

namespace udf_kernels {

// The fold policy of a UDF's metric shape.
template <class E, class A, bool kMax, class Udf, Shape = Udf::shape> struct FoldFor;
template <class E, class A, bool kMax, class Udf> struct FoldFor<E, A, kMax, Udf, Shape::V1> {
  using type = FoldV1<E, A, kMax, Udf>;
};
template <class E, class A, bool kMax, class Udf> struct FoldFor<E, A, kMax, Udf, Shape::State> {
  using type = FoldState<E, A, kMax, Udf>;
};
template <class E, class A, bool kMax, class Udf> struct FoldFor<E, A, kMax, Udf, Shape::Vector> {
  using type = FoldVector<E, A, kMax, Udf>;
};

// The UDF's contexts: ctx for a v1 metric, fctx for the filter, ctx2 for a
// v2 metric (only the one of the metric's ABI is used).  Objects of their
// own, not members of a policy: the UDF's calls take their addresses.
__device__ __forceinline__ void init_contexts(const udf_ivf_scan_args_v1* args, uint32_t dim, bool filtered, udf_ctx_v1& ctx,
                                              udf_ctx_v1& fctx, udf_ctx_v2& ctx2) {
  ctx.dim = 0;
  ctx.n_dims = dim;
  ctx.n_captures = args->n_captures;
  ctx.reserved = 0;
#pragma unroll
  for (int i = 0; i < UDF_ABI_METRIC_V1_MAX_CAPTURES; ++i) ctx.captures[i] = args->captures[i];
  fctx.dim = 0;
  fctx.n_dims = dim;
  fctx.n_captures = filtered ? args->n_filter_captures : 0;
  fctx.reserved = 0;
#pragma unroll
  for (int i = 0; i < UDF_ABI_FILTER_V1_MAX_CAPTURES; ++i) fctx.captures[i] = args->filter_captures[i];
  ctx2.dim = 0;
  ctx2.n_dims = dim;
  ctx2.query = 0;
  ctx2.n_captures = args->n_captures;
  ctx2.id = -1;
#pragma unroll
  for (int i = 0; i < UDF_ABI_METRIC_V2_MAX_CAPTURES; ++i) ctx2.captures[i] = args->captures[i];
}

// One work item (a block): its queries' top-k of its run of the list, as
// rows of candidates (ivf_flat_v1.h).  The block's shared memory is set up
// (top-k, query states, query rows), then the agent scans.
// L: the stored vectors' layout (Layout::Rows: the rows variants of exact
// search and refine, ivf_flat_v1.h ROWS LAYOUT).
template <class E, class A, bool kMax, int K, class Udf, bool kPrune = false, Layout L = Layout::Lists>
__device__ __forceinline__ void scan(const udf_ivf_scan_args_v1* args, Udf udf, udf_filter_v1_fn filter) {
  using Fold = typename FoldFor<E, A, kMax, Udf>::type;
  using Agent = ScanAgent<E, A, kMax, K, Fold, L>;
  const uint32_t acc_words = Fold::acc_words_for(args);
  if (blockIdx.x >= args->n_items) return;
  const ScanItem it(args);
  // A constant once the entry kernel inlines this function: the unfiltered
  // scan has no trace of the filter.
  const bool filtered = filter != nullptr;
  // PRUNE: false at compile time in the plain variants.  A filtered launch
  // prunes the queries each slot is kept for (ScanAgent::run).
  const bool prune = kPrune && Fold::kPrunable && K == 32;
  extern __shared__ uint4 smem_raw[];
  // TAIL MERGE: whether query 0 has this one row, read now so that its
  // latency hides under the scan; the item's end needs it.
  const bool single0 = it.nq != 0 && tail_merge_single_row(args, args->pairs[it.item.pair_begin].query);
  const typename Agent::Tile::Smem sm(smem_raw, it, acc_words);
  sm.init_topk(it);
  sm.init_state(it, prune);
  sm.template load_queries<E>(it);
  udf_ctx_v1 ctx, fctx;
  udf_ctx_v2 ctx2;
  init_contexts(args, it.dim, filtered, ctx, fctx, ctx2);
  const Fold fold(udf, ctx, ctx2, acc_words, args);
  const ScanSteps steps(it);
  const typename Agent::Tile::Vec vec(it);
  __syncthreads();
  ScanFilter filt{filter, fctx, 0u};
  Agent agent{{it, sm, vec, filtered}, fold, Prune{prune, ~0u}, QueryBounds(args)};
  agent.run(steps, filt, it.item, single0);
  // TAIL MERGE: the item that completes a query merges its rows (smem: the
  // scan's, no longer used).
  if (args->query_done != nullptr) tail_merge<kMax, K>(args, it.item, smem_raw, single0);
}

}  // namespace udf_kernels

// Element, accumulator and order names of the exported symbols.
#define UDF_ELEM_f32 udf_kernels::ElemF32
#define UDF_ELEM_f16 udf_kernels::ElemF16
#define UDF_ELEM_i8 udf_kernels::ElemI8
#define UDF_ELEM_u8 udf_kernels::ElemU8
#define UDF_ACC_f32 float
#define UDF_ACC_i32 int32_t
#define UDF_ISMAX_min false
#define UDF_ISMAX_max true

// IVF-Flat kernel pack v1: the scan (one template for every metric ABI and
// shape) and the merge, shared by the pack's two LTO-IR files:
// ivf_flat_v1.cu (ABI v1 scan variants and the merge kernels) and
// ivf_flat_v1_metric_v2.cu (ABI v2 scan variants), so that a module of v1
// metrics never makes nvJitLink read the v2 variants.  See
// include/udf/kernels/ivf_flat_v1.h for the contract and docs/kernels.md for
// the design.
#pragma once
#include <cuda_fp16.h>

#include <udf/kernels/ivf_flat_v1.h>

#include "block_sort.cuh"
#include "warp_topk.cuh"

namespace udf_kernels {

constexpr int kThreads = UDF_IVF_V1_BLOCK_THREADS;
constexpr int kWarps = kThreads / 32;
constexpr int kBatch = 8;  // 16-byte loads in flight per lane before the metric runs
template <bool B> struct Bool { static constexpr bool value = B; };
template <int N> struct Int { static constexpr int value = N; };
constexpr unsigned kFull = 0xFFFFFFFFu;

// ---------------------------------------------------------------------------
// Element and accumulator types.

struct ElemF32 { using raw = float; static constexpr int veclen = 4; };
struct ElemF16 { using raw = unsigned short; static constexpr int veclen = 8; };
struct ElemI8 { using raw = signed char; static constexpr int veclen = 16; };
struct ElemU8 { using raw = unsigned char; static constexpr int veclen = 16; };

template <class A> struct AccFns;
template <> struct AccFns<float> {
  using metric = udf_metric_v1_f32_fn;
  using finalize = udf_finalize_v1_f32_fn;
  static __device__ __forceinline__ float from_bits(uint32_t b) { return __uint_as_float(b); }
};
template <> struct AccFns<int32_t> {
  using metric = udf_metric_v1_i32_fn;
  using finalize = udf_finalize_v1_i32_fn;
  static __device__ __forceinline__ int32_t from_bits(uint32_t b) { return static_cast<int32_t>(b); }
};

// The UDF's functions, by ABI: v1 (metric + optional finalize), v2 state
// (update + finalize), v2 vector (distance).
enum class Shape { V1, State, Vector };
template <class A> struct UdfV1 {
  static constexpr Shape shape = Shape::V1;
  typename AccFns<A>::metric metric;
  typename AccFns<A>::finalize finalize;
};
template <class A> struct UdfState;
template <> struct UdfState<float> {
  static constexpr Shape shape = Shape::State;
  udf_update_v2_f32_fn update;
  udf_finalize_v2_fn finalize;
};
template <> struct UdfState<int32_t> {
  static constexpr Shape shape = Shape::State;
  udf_update_v2_i32_fn update;
  udf_finalize_v2_fn finalize;
};
template <class A> struct UdfVector;
template <> struct UdfVector<float> {
  static constexpr Shape shape = Shape::Vector;
  udf_distance_v2_f32_fn distance;
};
template <> struct UdfVector<int32_t> {
  static constexpr Shape shape = Shape::Vector;
  udf_distance_v2_i32_fn distance;
};

// One scalar element (a query coordinate) converted to the accumulator type.
template <class E, class A> __device__ __forceinline__ A load_scalar(const void* base, uint64_t i) {
  const typename E::raw r = static_cast<const typename E::raw*>(base)[i];
  if constexpr (sizeof(typename E::raw) == 2) {
    return static_cast<A>(__half2float(__ushort_as_half(r)));
  } else {
    return static_cast<A>(r);
  }
}

// A 16-byte load unpacked into veclen accumulator values.
// kByteExtract: u8 bytes through prmt (__byte_perm) instead of shift + mask.
// The ABI v2 state scans use it: nvJitLink 13.0 crashes (SIGSEGV) optimising
// a u8 state scan whose update sums two byte products (s[0] += x*y; s[1] +=
// x*x) from shift + mask extracts once the module has another metric; the
// opaque extract avoids the pattern.  v1 scans keep shift + mask.
template <class E, class A, bool kByteExtract = false>
__device__ __forceinline__ void unpack(const uint4& r, A (&x)[E::veclen]) {
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
  if constexpr (E::veclen == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = static_cast<A>(__uint_as_float(w[i]));
  } else if constexpr (E::veclen == 8) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      x[2 * i] = static_cast<A>(f.x);
      x[2 * i + 1] = static_cast<A>(f.y);
    }
  } else if constexpr (sizeof(typename E::raw) == 1 && static_cast<typename E::raw>(-1) < 0) {
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = static_cast<A>(static_cast<int32_t>(w[i / 4] << (24 - 8 * (i % 4))) >> 24);
  } else if constexpr (kByteExtract) {
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = static_cast<A>(static_cast<int32_t>(__byte_perm(w[i / 4], 0u, 0x4440u + (i % 4))));
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = static_cast<A>(static_cast<int32_t>((w[i / 4] >> (8 * (i % 4))) & 0xFFu));
  }
}

// ---------------------------------------------------------------------------
// Block top-k in shared memory: a sorted "best" prefix of KMAX entries and a
// buffer behind it, filled with candidates that beat the current threshold
// (the k-th best key).  When the buffer could overflow on the next step of
// 128 candidates, the whole array is bitonic-sorted and the threshold
// tightens.  Keys are distances under min and negated distances under max,
// so smaller keys are always better; ties go to the smaller slot.

struct TopK {
  float* keys;
  uint32_t* slots;
  uint32_t* state;  // [0] buffered count, [1] threshold bits
};

template <int S> __device__ __forceinline__ void topk_init(const TopK& t) {
  for (int i = threadIdx.x; i < S; i += kThreads) {
    t.keys[i] = __int_as_float(0x7f800000);
    t.slots[i] = UDF_IVF_V1_NO_SLOT;
  }
  if (threadIdx.x == 0) {
    t.state[0] = 0;
    t.state[1] = 0x7f800000u;  // +inf: accept anything finite
  }
}

// Called by every thread of every warp (warp-aggregated append).
template <int K> __device__ __forceinline__ void topk_offer(const TopK& t, bool pass, float key, uint32_t slot) {
  const unsigned mask = __ballot_sync(kFull, pass);
  if (mask == 0) return;
  const int lane = threadIdx.x & 31;
  uint32_t base = 0;
  if (lane == 0) base = atomicAdd(&t.state[0], static_cast<uint32_t>(__popc(mask)));
  base = __shfl_sync(kFull, base, 0);
  if (pass) {
    const uint32_t pos = K + base + __popc(mask & ((1u << lane) - 1u));
    t.keys[pos] = key;
    t.slots[pos] = slot;
  }
}

// Whether (key, slot) beats the k-th of the sorted prefix, the threshold:
// a smaller key, or the same key and a smaller slot (ties go to the smaller
// slot, whatever order the candidates come in).  +inf and NaN never do.
// Until the first flush the threshold is +inf with no slot: any finite key.
__device__ __forceinline__ bool topk_beats(const TopK& t, uint32_t k, float key, uint32_t slot) {
  const float th = __uint_as_float(t.state[1]);
  if (key < th) return true;  // (th <= +inf: key is finite)
  return key == th && key < __int_as_float(0x7f800000) && slot < t.slots[k - 1];
}

// Sorts the first K + count entries (rounded up to a power of two, at most
// S), then publishes the new threshold keys[k - 1].  Block-wide; starts and
// ends with a barrier.
template <int K, int S> __device__ void topk_flush(const TopK& t, uint32_t k) {
  __syncthreads();
  const uint32_t used = K + t.state[0];
  uint32_t n = 2 * kThreads < S ? 2 * kThreads : S;
  while (n < used) n <<= 1;
  for (uint32_t i = used + threadIdx.x; i < n; i += kThreads) {
    t.keys[i] = __int_as_float(0x7f800000);
    t.slots[i] = UDF_IVF_V1_NO_SLOT;
  }
  __syncthreads();
  block_bitonic_sort<kThreads>(t.keys, t.slots, n);
  if (threadIdx.x == 0) {
    t.state[0] = 0;
    t.state[1] = __float_as_uint(t.keys[k - 1]);
  }
  __syncthreads();
}

template <bool kMax> __device__ __forceinline__ float to_key(float d) { return kMax ? -d : d; }

// QUERY BOUND (ivf_flat_v1.h): keys <-> the order-preserving words of
// args.query_bound.
__device__ __forceinline__ uint32_t bound_encode(float key) { return UDF_IVF_V1_BOUND_ENCODE(__float_as_uint(key)); }
__device__ __forceinline__ float bound_decode(uint32_t e) { return __uint_as_float(UDF_IVF_V1_BOUND_DECODE(e)); }
// Lowers query q's bound to `key` (a row's k-th key; nothing when it is not finite).
__device__ __forceinline__ void bound_publish(uint32_t* bounds, uint32_t query, float key) {
  if (key < __int_as_float(0x7f800000)) atomicMin(bounds + query, bound_encode(key));
}

template <bool kMax, int K>
__device__ __forceinline__ void merge_query(const udf_ivf_merge_args_v1& a, uint32_t q, uint4* smem, const uint32_t* bound = nullptr);

// TAIL MERGE (ivf_flat_v1.h): after the item's rows are written, it counts
// itself for each of its queries; the block that completes a query merges
// its rows (smem: the scan's, no longer used).
template <bool kMax, int K>
__device__ __forceinline__ void tail_merge(const udf_ivf_scan_args_v1* args, const udf_ivf_work_item_v1& item, uint4* smem) {
  __threadfence();  // this thread's rows are visible device-wide before the block counts itself
  __syncthreads();
  // The block that completes a query's count writes its own mark there
  // (above any count); every thread of a block then compares the word with
  // its block's mark, so exactly the last block merges, all of its threads
  // alike, whenever the others read the word.  Every bound and branch comes
  // from global memory at a block-uniform address (the item, the ranges, the
  // word): ptxas then sees them uniform and keeps the merge's shuffles
  // inline before sm_90 (warp_topk.cuh); a flag in shared memory or a
  // barrier reduction made them calls.
  const uint32_t mark = 0x80000000u | blockIdx.x;
  for (uint32_t q = 0; q < item.pair_count; ++q) {
    const uint32_t query = args->pairs[item.pair_begin + q].query;
    const uint32_t* range = args->query_row_ranges + 2 * static_cast<uint64_t>(query);
    uint32_t* done = args->query_done + query;
    if (threadIdx.x == 0 && atomicAdd(done, 1u) + 1u == range[1] - range[0]) *done = mark;
    __syncthreads();
    if (__ldcg(done) == mark) {
      __threadfence();
      udf_ivf_merge_args_v1 ma;
      ma.cand_dists = args->cand_dists;
      ma.cand_slots = args->cand_slots;
      ma.query_rows = range;
      ma.ids = args->ids;
      ma.out_dists = args->out_dists + static_cast<uint64_t>(query) * args->k;
      ma.out_ids = args->out_ids + static_cast<uint64_t>(query) * args->k;
      ma.n_queries = 1;
      ma.k = args->k;
      // With query bounds, the query's word is the smallest of its rows'
      // k-th keys already (every item published its row before counting):
      // the merge's bound without reading the rows for it.
      uint32_t* const bound = args->query_bound != nullptr ? args->query_bound + query : nullptr;
      merge_query<kMax, K>(ma, 0, smem, bound);
      __syncthreads();  // every thread has read the mark (and the bound)
      if (threadIdx.x == 0) {  // for the next launch
        *done = 0;
        if (bound != nullptr) *bound = UDF_IVF_V1_BOUND_NONE;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// The scan.

template <class E, class A, bool kMax, int K, class Udf, bool kPrune = false>
__device__ __forceinline__ void scan(const udf_ivf_scan_args_v1* args, Udf udf, udf_filter_v1_fn filter) {
  constexpr Shape kShape = Udf::shape;
  constexpr bool kV2 = kShape != Shape::V1;
  // Words per (query, thread) in sm_acc: v1's accumulator, the v2 state's
  // words the UDF uses (args->state_words, 1..8; 0: all 8), or the v2 vector
  // shape's distance (a float in the accumulator's place).
  constexpr int kMaxWords = UDF_ABI_METRIC_V2_STATE_WORDS;
  const uint32_t acc_words =
      kShape != Shape::State ? 1u : (args->state_words - 1u < uint32_t(kMaxWords) ? args->state_words : uint32_t(kMaxWords));
  constexpr int V = E::veclen;
  constexpr int S = UDF_IVF_V1_SORT_CAPACITY(K);
  constexpr int kQueue = 64;                       // per-warp gather queue (filtered scans)

  if (blockIdx.x >= args->n_items) return;
  const udf_ivf_work_item_v1 item = args->items[blockIdx.x];
  const uint32_t nq = item.pair_count;
  const uint32_t qpi = args->queries_per_item;
  const uint32_t dim = args->dim;
  const uint32_t dim_padded = args->dim_padded;
  const uint32_t k = args->k;
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  // A constant once the entry kernel inlines this function: the unfiltered
  // scan compiles to the same code as before filters existed.
  const bool filtered = filter != nullptr;
  // PRUNE (ivf_flat_v1.h): a monotone metric's partial key only grows, so a
  // lane stops folding a query once that key is above the query's bound.
  // False at compile time in the plain variants: their code is unchanged.
  const bool prune = kPrune && kShape == Shape::V1 && K == 32 && !filtered;
  uint32_t alive = ~0u;  // PRUNE: bit q (q < 32) while this lane still folds query q

  extern __shared__ uint4 smem_raw[];
  // The queries come first, q4 * 4 words each (UDF_IVF_SCAN_QUERY_WORDS):
  // at offset 0 of a uint4 array and indexed as (q * q4 + c) * 4, every
  // chunk's address is visibly 16-byte aligned, so the compiler reads a
  // query's coordinates four at a time (one LDS.128 instead of four LDS), in
  // the v1 and state folds and in a vector UDF's loop over y once inlined.
  // q4 is odd: 16-byte reads of different queries at one coordinate (vector
  // shape) fall in different banks.
  const uint32_t q4 = (dim_padded / 4u) | 1u;
  A* sm_query = reinterpret_cast<A*>(smem_raw);
  auto query_row = [&](uint32_t q) -> A* { return sm_query + (q * q4) * 4u; };
  float* sm_keys = reinterpret_cast<float*>(smem_raw) + qpi * (dim_padded + 4u);  // the space the header sizes
  uint32_t* sm_slots = reinterpret_cast<uint32_t*>(sm_keys + qpi * S);
  uint32_t* sm_state = sm_slots + qpi * S;  // per query: [0] buffered count, [1] threshold, [2] query row, [3] pair query
  A* sm_acc = reinterpret_cast<A*>(sm_state + 4 * qpi);  // [q][word][thread]
  // Vector shape only: each warp's staged rows (UDF_IVF_SCAN_V2_STAGE_WORDS).
  const uint32_t stage_rows = kShape == Shape::Vector ? args->stage_rows : 0u;
  const uint32_t row_words = UDF_IVF_SCAN_V2_ROW_WORDS(dim_padded);
  A* sm_stage = sm_acc + qpi * kThreads * acc_words;
  A* const stage_end = sm_stage + (kShape == Shape::Vector ? UDF_IVF_SCAN_V2_STAGE_WORDS(stage_rows, dim_padded) : 0u);
  A* my_stage = sm_stage + static_cast<uint32_t>(warp) * stage_rows * row_words;
  // Filtered launches only (UDF_IVF_SCAN_V1_FILTER_SMEM_BYTES): each warp's
  // queue of kept slots and their per-query keep masks.  8-byte aligned: every
  // term of the shared memory sizes is a multiple of 8.
  uint64_t* wq_keep = reinterpret_cast<uint64_t*>(stage_end) + warp * kQueue;
  uint32_t* wq_slot = reinterpret_cast<uint32_t*>(reinterpret_cast<uint64_t*>(stage_end) + kWarps * kQueue) + warp * kQueue;

  // Every query's top-k as topk_init leaves it, all queries at once, 16
  // bytes a store (their keys, and their slots, are one array each).
  static_assert(S % 4 == 0, "whole 16-byte words per query");
  for (uint32_t i = tid; i < nq * (S / 4); i += kThreads) {
    reinterpret_cast<uint4*>(sm_keys)[i] = make_uint4(0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u);
    reinterpret_cast<uint4*>(sm_slots)[i] = make_uint4(UDF_IVF_V1_NO_SLOT, UDF_IVF_V1_NO_SLOT, UDF_IVF_V1_NO_SLOT, UDF_IVF_V1_NO_SLOT);
  }
  static_assert(kThreads >= 64, "a thread for each query of an item (at most 64)");
  if (static_cast<uint32_t>(tid) < nq) {
    const uint32_t query = args->pairs[item.pair_begin + tid].query;
    sm_state[4 * tid] = 0;
    // The threshold (+inf: accept anything finite); PRUNE: the block's bound
    // there instead (K 32: no threshold).
    sm_state[4 * tid + 1] = prune ? UDF_IVF_V1_BOUND_NONE : 0x7f800000u;
    sm_state[4 * tid + 2] = args->query_base + query;
    sm_state[4 * tid + 3] = query;
  }
  // The query rows, four queries' loads in flight at a time (their pairs
  // read from global memory again: a shared read would wait for the
  // stores before it).
  for (uint32_t d = tid; d < dim_padded; d += kThreads) {
#pragma unroll 4
    for (uint32_t q = 0; q < nq; ++q) {
      const uint64_t qbase = static_cast<uint64_t>(args->pairs[item.pair_begin + q].query) * args->query_stride;
      query_row(q)[d] = d < dim ? load_scalar<E, A>(args->queries, qbase + d) : A(0);
    }
  }

  udf_ctx_v1 ctx;
  ctx.dim = 0;
  ctx.n_dims = dim;
  ctx.n_captures = args->n_captures;
  ctx.reserved = 0;
#pragma unroll
  for (int i = 0; i < UDF_ABI_METRIC_V1_MAX_CAPTURES; ++i) ctx.captures[i] = args->captures[i];
  udf_ctx_v1 fctx;
  fctx.dim = 0;
  fctx.n_dims = dim;
  fctx.n_captures = filtered ? args->n_filter_captures : 0;
  fctx.reserved = 0;
#pragma unroll
  for (int i = 0; i < UDF_ABI_FILTER_V1_MAX_CAPTURES; ++i) fctx.captures[i] = args->filter_captures[i];
  // HACK: capture 0 staged in shared memory (dim 128 f32 only)
  __shared__ __align__(16) float sm_w[128];
  if constexpr (kShape == Shape::V1) {
    if (args->n_captures > 0)
      for (uint32_t d = tid; d < 128u; d += kThreads) sm_w[d] = static_cast<const float*>(args->captures[0].ptr)[d];
    ctx.captures[0].ptr = __builtin_assume_aligned(static_cast<const void*>(sm_w), 16);
  }
  const A acc_init = AccFns<A>::from_bits(args->acc_init);
  udf_ctx_v2 ctx2;
  ctx2.dim = 0;
  ctx2.n_dims = dim;
  ctx2.query = 0;
  ctx2.n_captures = args->n_captures;
  ctx2.id = -1;
#pragma unroll
  for (int i = 0; i < UDF_ABI_METRIC_V2_MAX_CAPTURES; ++i) ctx2.captures[i] = args->captures[i];

  const uint64_t list_first = args->list_offsets[item.list];
  const uint32_t list_size = args->list_sizes[item.list];
  const uint32_t list_groups = (list_size + 31) / 32;
  const uint32_t g_end = item.group_end < list_groups ? item.group_end : list_groups;
  const uint32_t g_begin = item.group_begin < g_end ? item.group_begin : g_end;
  const uint32_t n_steps = (g_end - g_begin + kWarps - 1) / kWarps;
  const uint32_t chunks = dim_padded / V;
  const uint32_t full = dim / V;  // chunks whose every coordinate is real
  const uint32_t tail = dim % V;
  const uint4* data = static_cast<const uint4*>(args->list_data);
  // Where slot s's chunk 0 is; chunk c is c * 32 uint4 further.
  auto vector_of = [&](uint64_t s) { return data + (s / 32) * static_cast<uint64_t>(chunks) * 32 + (s % 32); };
  __syncthreads();

  uint32_t* const sm_words = reinterpret_cast<uint32_t*>(sm_acc);  // state words / distances as bits
  // The state of (query q, this thread): word w < acc_words at
  // sm_words[(q * acc_words + w) * kThreads + tid]; the words past acc_words
  // are ones the UDF never touches (udfc found so), zero.
  auto load_state = [&](uint32_t q, udf_state_v2& st) {
#pragma unroll
    for (int w = 0; w < kMaxWords; ++w) st.u[w] = uint32_t(w) < acc_words ? sm_words[(q * acc_words + w) * kThreads + tid] : 0u;
  };
  // Writes back only the words that changed: once update is inlined, a word
  // it never writes compares equal to itself, so neither its load nor its
  // store is left (L2 as a state UDF then costs what v1's accumulator does).
  auto store_state = [&](uint32_t q, const udf_state_v2& st, const udf_state_v2& was) {
#pragma unroll
    for (int w = 0; w < kMaxWords; ++w)
      if (uint32_t(w) < acc_words && st.u[w] != was.u[w]) sm_words[(q * acc_words + w) * kThreads + tid] = st.u[w];
  };
  // Scores the lane's vector (at vp) for the queries whose bit is set in
  // `keep` (every query without a filter): folds it into their accumulators
  // or states, or (vector shape) computes the distances, which may take other
  // lanes' help.  `load`: the lane reads its vector.  ctx2.id is the lane's
  // id (v2).  All 32 lanes of a warp.
  auto score = [&](const uint4* vp, bool load, uint64_t keep) {
    if constexpr (kShape == Shape::Vector) {
      // Rounds of R rows: the warp stages R of its 32 vectors, then every
      // lane calls distance for one (row, query) pair: row r0 + lane % R,
      // query lane / R (+ 32 / R a pass).  R * (queries rounded up to a power
      // of two) = 32 keeps every lane busy while shared memory holds only R
      // rows a warp (32 rows a warp cost three quarters of the blocks an SM
      // could hold).  Lanes 2i and 2i + 1 share a query: its 16-byte reads
      // are broadcast and packed two lanes a register (LDS.128 at half cost).
      float* const sm_dist = reinterpret_cast<float*>(sm_acc);
      uint32_t nq2 = 1;
      while (nq2 < nq) nq2 <<= 1;
      const uint32_t fit = nq2 >= 32u ? 1u : 32u / nq2;  // rows that keep 32 lanes busy
      const uint32_t R = stage_rows < fit ? stage_rows : fit;
      const uint32_t per_pass = 32u / R;  // queries a pass
      const uint32_t row = static_cast<uint32_t>(lane) & (R - 1u);
      const uint32_t lq = static_cast<uint32_t>(lane) / R;
      const int64_t my_id = ctx2.id;
      const A* const xr = my_stage + row * row_words;
      for (uint32_t r0 = 0; r0 < 32u; r0 += R) {
        const uint32_t src = r0 + row;
        const uint4* src_vp = reinterpret_cast<const uint4*>(
            __shfl_sync(kFull, reinterpret_cast<unsigned long long>(vp), static_cast<int>(src)));
        const bool src_load = __shfl_sync(kFull, load ? 1 : 0, static_cast<int>(src)) != 0;
        const uint64_t src_keep = __shfl_sync(kFull, static_cast<unsigned long long>(keep), static_cast<int>(src));
        ctx2.id = static_cast<int64_t>(__shfl_sync(kFull, static_cast<long long>(my_id), static_cast<int>(src)));
        A* dst = my_stage + row * row_words;
        __syncwarp();  // the previous round's rows are read
        // kBatch loads in flight per lane, then their stores.
#pragma unroll 1
        for (uint32_t c0 = lq; c0 < chunks; c0 += kBatch * per_pass) {
          uint4 r[kBatch];
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            const uint32_t c = c0 + j * per_pass;
            r[j] = src_load && c < chunks ? __ldg(src_vp + static_cast<uint64_t>(c) * 32) : make_uint4(0, 0, 0, 0);
          }
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            const uint32_t c = c0 + j * per_pass;
            if (c < chunks) {
              A x[V];
              unpack<E, A, kV2>(r[j], x);
#pragma unroll
              for (int v = 0; v < V; ++v) dst[c * V + v] = x[v];
            }
          }
        }
        __syncwarp();
        ctx2.dim = dim;
        // A lane whose row is past the end of the list (src_load false)
        // scores nothing: offer() skips invalid slots.
        for (uint32_t q = lq; q < nq; q += per_pass) {
          if (!src_load || (filtered && !((src_keep >> q) & 1u))) continue;
          ctx2.query = sm_state[4 * q + 2];
          sm_dist[q * kThreads + warp * 32 + src] = udf.distance(xr, query_row(q), dim, &ctx2);
        }
      }
      ctx2.id = my_id;
      __syncwarp();  // offer() reads the distances other lanes wrote
      return;
    } else {
      for (uint32_t q = 0; q < nq; ++q) {
        if constexpr (kShape == Shape::State) {
#pragma unroll
          for (int w = 0; w < kMaxWords; ++w)
            if (uint32_t(w) < acc_words) sm_words[(q * acc_words + w) * kThreads + tid] = args->state_init[w];
        } else {
          sm_acc[q * kThreads + tid] = acc_init;
        }
      }
      // One batch of kBatch chunks from c0.  kWhole: all of them are below
      // `full` (every batch but a last, partial one), so no chunk is guarded:
      // the fold is straight-line loads and metric calls.
      auto fold_batch = [&](uint32_t c0, const uint4* bp, auto whole) {
        constexpr bool kWhole = decltype(whole)::value;
        // The batch's chunks at constant offsets (j * 512 bytes) from bp,
        // chunk c0's address: (c0 + j) * 32 as a 32-bit sum (it may not wrap
        // before the widening) made every load's address a wide multiply of
        // its own (H100 ncu, weighted L2 k32 scan: 87 instructions a batch,
        // 7% of the scan's).
        uint4 r[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
          if (kWhole || c0 + j < full) r[j] = load ? __ldg(bp + j * 32) : make_uint4(0, 0, 0, 0);
        // body(e, x) for each real coordinate of the batch, in order: e its
        // offset from c0 * V, x the vector's element (each chunk unpacked once).
        auto each_coordinate = [&](const auto& body) {
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            if (kWhole || c0 + j < full) {
              A x[V];
              unpack<E, A, kV2>(r[j], x);
#pragma unroll
              for (int v = 0; v < V; ++v) body(j * V + v, x[v]);
            }
          }
        };
        // v1: the batch folded into the accumulators of queries q .. q +
        // N - 1, one unpack of each chunk for all of them and N independent
        // chains of metric calls the scheduler can interleave; each
        // accumulator folds its coordinates in order (the same bits for any N).
        // (u is udf, passed so that the body is only compiled where a v1
        // scan calls it.)
        //
        // Each chunk's query coordinates are read as 16-byte words (V / 4 a
        // query: one LDS.128 for f32 vectors, 2 for f16, 4 for i8 / u8),
        // written out rather than left to the compiler: its load vectorizer
        // gave up a fifth of the way into a batch and read the rest one
        // coordinate at a time (88 shared loads for 128 folds of the
        // four-query group instead of 36; H100, sm_90, weighted L2).
        auto fold_v1 = [&](uint32_t q, auto n_queries, const auto& u) {
          constexpr int N = decltype(n_queries)::value;
          static_assert(sizeof(A) == 4 && V % 4 == 0, "query chunks are whole 16-byte words");
          A acc[N];
          const uint4* qv[N];
#pragma unroll
          for (int i = 0; i < N; ++i) {
            qv[i] = reinterpret_cast<const uint4*>(query_row(q + i) + c0 * V);
            acc[i] = sm_acc[(q + i) * kThreads + tid];
          }
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            if (kWhole || c0 + j < full) {
              A x[V];
              unpack<E, A, kV2>(r[j], x);
              A y[N][V];
#pragma unroll
              for (int i = 0; i < N; ++i) {
#pragma unroll
                for (int w = 0; w < V / 4; ++w) {
                  const uint4 t = qv[i][j * (V / 4) + w];
                  const uint32_t b[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
                  for (int l = 0; l < 4; ++l) y[i][4 * w + l] = AccFns<A>::from_bits(b[l]);
                }
              }
#pragma unroll
              for (int v = 0; v < V; ++v) {
                ctx.dim = (c0 + j) * V + v;
#pragma unroll
                for (int i = 0; i < N; ++i) acc[i] = u.metric(x[v], y[i][v], acc[i], &ctx);
              }
            }
          }
#pragma unroll
          for (int i = 0; i < N; ++i) sm_acc[(q + i) * kThreads + tid] = acc[i];
          // PRUNE: a query whose partial key (finalized) is above its bound
          // stops for this lane.  (Checking only while checks drop queries,
          // or not after the last batch, cost the fold 8-16 registers.)
          if (prune) {
            ctx.dim = dim;
#pragma unroll
            for (int i = 0; i < N; ++i) {
              if (q + i < 32u) {
                const float key = to_key<kMax>(u.finalize ? u.finalize(acc[i], &ctx) : static_cast<float>(acc[i]));
                if (key > bound_decode(sm_state[4 * (q + i) + 1])) alive &= ~(1u << (q + i));
              }
            }
          }
        };
        // PRUNE: whether any lane still folds one of queries q .. q + n - 1
        // (the vote as inline PTX: warp_topk.cuh).  A branch on a vote makes
        // ptxas before sm_90 call its shuffle helpers out of line: udf-link
        // takes the prune variants for sm_90 and newer only.
        auto group_alive = [&](uint32_t q, uint32_t n) {
          if (!prune || q + n > 32u) return true;
          return wt_ballot(((alive >> q) & ((1u << n) - 1u)) != 0) != 0;
        };
#pragma unroll 1
        for (uint32_t q = 0; q < nq; ++q) {
          if constexpr (kShape == Shape::V1) {
            // Four queries at a time, then two (unfiltered): one unpack of the
            // batch and one load of a UDF's per-coordinate capture for all
            // of them.  H100, batch 10k P32: the weighted-L2 UDF +7% QPS (1M
            // 631k -> 672k, 10M 482k -> 510k), the built-in L2 -2% (66 -> 78
            // registers: 7 -> 6 blocks an SM).  Whole batches only: a
            // vector's last, partial batch (a dim that is no multiple of
            // kBatch chunks) folds one query at a time, so that the grouped
            // folds are compiled once instead of twice (their second copy was
            // about a third of a scan link's time).
            if (kWhole && !filtered && q + 3 < nq) {
              if (group_alive(q, 4)) fold_v1(q, Int<4>{}, udf);
              q += 3;
              continue;
            }
            if (kWhole && !filtered && q + 1 < nq) {  // two queries at a time (unfiltered)
              if (group_alive(q, 2)) fold_v1(q, Int<2>{}, udf);
              ++q;
              continue;
            }
          }
          const bool run = !filtered || ((keep >> q) & 1u);
          if (filtered && !__any_sync(kFull, run)) continue;  // no lane scores this query
          if (run) {
            if constexpr (kShape == Shape::V1) {
              if (group_alive(q, 1)) fold_v1(q, Int<1>{}, udf);
            } else {
              const A* qv = query_row(q) + c0 * V;
              udf_state_v2 st;
              load_state(q, st);
              const udf_state_v2 was = st;
              ctx2.query = sm_state[4 * q + 2];
              each_coordinate([&](int e, A x) {
                ctx2.dim = c0 * V + e;
                udf.update(x, qv[e], &st, &ctx2);
              });
              store_state(q, st, was);
            }
          }
        }
      };
      const uint4* bp = vp;  // chunk c0's address, carried (not recomputed from the slot each batch)
#pragma unroll 1
      for (uint32_t c0 = 0; c0 < full; c0 += kBatch, bp += kBatch * 32) {
        // PRUNE: no lane folds any query any more: not even the loads.
        if (prune && c0 != 0 && nq <= 32u && wt_ballot((alive & (nq == 32u ? ~0u : (1u << nq) - 1u)) != 0) == 0) return;
        if (c0 + kBatch <= full) fold_batch(c0, bp, Bool<true>{});
        else fold_batch(c0, bp, Bool<false>{});
      }
      if (tail != 0) {
        const uint4 r = load ? __ldg(vp + static_cast<uint64_t>(full) * 32) : make_uint4(0, 0, 0, 0);
        A x[V];
        unpack<E, A, kV2>(r, x);
#pragma unroll 1
        for (uint32_t q = 0; q < nq; ++q) {
          if (filtered && !((keep >> q) & 1u)) continue;
          const A* qv = query_row(q) + full * V;
          if constexpr (kShape == Shape::V1) {
            A acc = sm_acc[q * kThreads + tid];
#pragma unroll
            for (int v = 0; v < V - 1; ++v) {  // tail < V
              if (v < static_cast<int>(tail)) {
                ctx.dim = full * V + v;
                acc = udf.metric(x[v], qv[v], acc, &ctx);
              }
            }
            sm_acc[q * kThreads + tid] = acc;
          } else {
            udf_state_v2 st;
            load_state(q, st);
            const udf_state_v2 was = st;
            ctx2.query = sm_state[4 * q + 2];
#pragma unroll
            for (int v = 0; v < V - 1; ++v) {
              if (v < static_cast<int>(tail)) {
                ctx2.dim = full * V + v;
                udf.update(x[v], qv[v], &st, &ctx2);
              }
            }
            store_state(q, st, was);
          }
        }
      }
    }
  };
  // QUERY BOUND (ivf_flat_v1.h): lane q < 32 holds query q's word, read
  // through L2 once a step (other blocks lower it); queries from 32 on go
  // unbounded.
  uint32_t* const bounds = args->query_bound;
  uint32_t lane_bound = UDF_IVF_V1_BOUND_NONE;
  auto read_bounds = [&]() {
    if (bounds != nullptr && static_cast<uint32_t>(lane) < nq) {
      lane_bound = __ldcg(bounds + sm_state[4 * lane + 3]);
      if (prune) atomicMin(sm_state + 4 * lane + 1, lane_bound);
    }
  };
  // PRUNE: lane q < 32 lowers query q's block bound, and its global one, to
  // this warp's k-th key (k candidates of the query at or under it).
  auto share_bounds = [&]() {
    if (static_cast<uint32_t>(lane) < nq && lane < 32) {
      const float kth = sm_keys[lane * S + warp * 32 + k - 1];
      if (kth < __int_as_float(0x7f800000)) {
        const uint32_t e = bound_encode(kth);
        atomicMin(sm_state + 4 * lane + 1, e);
        if (bounds != nullptr && e < lane_bound) {
          atomicMin(bounds + sm_state[4 * lane + 3], e);
          lane_bound = e;
        }
      }
    }
  };
  // Whether the lane scored its vector for query q.
  auto scored_for = [&](bool valid, uint64_t keep, uint32_t q) {
    return valid && (!filtered || ((keep >> q) & 1u)) && (!prune || q >= 32u || ((alive >> q) & 1u));
  };
  // The lane's key for query q (its vector's finalized metric).
  auto key_of = [&](uint32_t q) -> float {
    float dist;
    if constexpr (kShape == Shape::V1) {
      const A acc = sm_acc[q * kThreads + tid];
      dist = udf.finalize ? udf.finalize(acc, &ctx) : static_cast<float>(acc);
    } else if constexpr (kShape == Shape::State) {
      udf_state_v2 st;
      load_state(q, st);
      ctx2.query = sm_state[4 * q + 2];
      dist = udf.finalize(&st, &ctx2);
    } else {
      dist = __uint_as_float(sm_words[q * kThreads + tid]);
    }
    return to_key<kMax>(dist);
  };
  // Offers the lane's slot to query q.  All 32 lanes.
  auto offer_one = [&](uint32_t q, bool valid, uint64_t keep, uint32_t slot) {
    const TopK t{sm_keys + q * S, sm_slots + q * S, sm_state + 4 * q};
    const uint32_t qb = wt_shfl(lane_bound, static_cast<int>(q & 31u));
    const float bound = q < 32u ? bound_decode(qb) : __int_as_float(0x7f800000);
    const bool scored = scored_for(valid, keep, q);
    const float key = scored ? key_of(q) : 0.0f;
    if constexpr (K == 32) {  // this warp's list for query q
      warp_list_offer(t.keys + warp * 32, t.slots + warp * 32, k, scored && key < __int_as_float(0x7f800000) && key <= bound,
                      key, slot, lane);
    } else {
      const bool pass = scored && topk_beats(t, k, key, slot) && key <= bound;
      topk_offer<K>(t, pass, key, slot);
    }
  };
  // Offers the lane's slot to every query that scored it.  All 32 lanes.
  //
  // OFFER FILTER (K 32): a key enters query q's warp list only when it is
  // at or under both the query's bound and the list's k-th key.  Lane q
  // (< 32) takes their minimum once a step, after the fold (nothing more
  // is live across it); every lane compares its keys with it, and only the
  // queries where some lane passes take the list's exact test.  The others
  // cost a shuffle, a shared load and a compare instead of a bound decode,
  // the list's k-th entry, a vote and the address arithmetic (H100 ncu,
  // weighted L2 k32, overlap batch 10k P32: the offer was 10% of the scan's
  // instructions and 15% of its samples; 89% of (query, step) pairs insert
  // nothing).  The test never drops a key the list would take: the same
  // results.
  auto offer = [&](bool valid, uint64_t keep, uint32_t slot) {
    ctx.dim = dim;
    ctx2.dim = dim;
    if constexpr (K == 32) {
      float thr = __int_as_float(0x7f800000);
      if (static_cast<uint32_t>(lane) < nq) thr = fminf(bound_decode(lane_bound), sm_keys[static_cast<uint32_t>(lane) * S + warp * 32 + k - 1]);
      const uint32_t nq32 = nq < 32u ? nq : 32u;
      uint32_t cand = 0;  // bit q: this lane's key may enter query q's list
      for (uint32_t q = 0; q < nq32; ++q) {
        const float t = wt_shfl(thr, static_cast<int>(q));
        // A key that is a shared load (v1 without a finalize, the vector
        // shape) is read by every lane, with no branch: a lane that scored
        // nothing reads a stale one.
        bool pass;
        if constexpr (kShape == Shape::State) {
          pass = scored_for(valid, keep, q) && key_of(q) <= t;
        } else if constexpr (kShape == Shape::Vector) {
          pass = key_of(q) <= t && scored_for(valid, keep, q);
        } else {
          pass = udf.finalize ? scored_for(valid, keep, q) && key_of(q) <= t : key_of(q) <= t && scored_for(valid, keep, q);
        }
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
      for (uint32_t q = 0; q < nq; ++q) offer_one(q, valid, keep, slot);
    }
  };
  // v2: the lane's stored-vector id for ctx2.id (a dead load unless the UDF reads it).
  auto set_id = [&](bool valid, uint32_t slot) {
    if constexpr (kV2) ctx2.id = valid ? static_cast<int64_t>(args->ids[slot]) : -1;
  };

  uint32_t queued = 0;  // entries in this warp's queue (warp-uniform), < 32 between steps
  for (uint32_t step = 0; step < n_steps; ++step) {
    const uint32_t g = g_begin + step * kWarps + warp;
    const uint32_t rel = g * 32 + lane;  // position in the list
    const bool valid = g < g_end && rel < list_size;
    const uint32_t slot = static_cast<uint32_t>(list_first + rel);
    read_bounds();
    if (!filtered) {
      set_id(valid, slot);
      if (prune) alive = valid ? ~0u : 0u;
      if (g < g_end) score(vector_of(list_first + rel), true, ~0ull);  // warp-uniform
      offer(valid, ~0ull, slot);
      if (prune) share_bounds();
    } else {
      uint64_t keep = 0;  // bit q: query q keeps this slot
      if (valid) {
        const int64_t id = static_cast<int64_t>(args->ids[slot]);
        for (uint32_t q = 0; q < nq; ++q)
          if (filter(sm_state[4 * q + 2], id, &fctx)) keep |= 1ull << q;
      }
      const unsigned in_list = __ballot_sync(kFull, valid);
      const unsigned kept = __ballot_sync(kFull, keep != 0);
      if (in_list == 0) {
        // past the list: nothing to do
      } else if (kept == in_list) {  // every slot of the group is kept: scan it in place
        set_id(valid, slot);
        score(vector_of(slot), true, keep);
        offer(valid, keep, slot);
      } else {  // queue the kept slots; scan a full batch of 32 when there is one
        if (keep != 0) {
          const uint32_t pos = queued + __popc(kept & ((1u << lane) - 1u));
          wq_slot[pos] = slot;
          wq_keep[pos] = keep;
        }
        queued += __popc(kept);
        __syncwarp();
        if (queued >= 32) {
          const uint32_t s = wq_slot[lane];
          const uint64_t kk = wq_keep[lane];
          __syncwarp();
          if (lane + 32 < queued) {
            wq_slot[lane] = wq_slot[lane + 32];
            wq_keep[lane] = wq_keep[lane + 32];
          }
          queued -= 32;
          __syncwarp();
          set_id(true, s);
          score(vector_of(s), true, kk);
          offer(true, kk, s);
        }
      }
    }
    if constexpr (K != 32) {  // the block-wide buffers (the warp lists fill all of S)
      constexpr uint32_t kFlushAt = S - K - kThreads;  // buffered count above which the next step could overflow
      __syncthreads();
      for (uint32_t q = 0; q < nq; ++q) {
        if (sm_state[4 * q] > kFlushAt) topk_flush<K, S>(TopK{sm_keys + q * S, sm_slots + q * S, sm_state + 4 * q}, k);
      }
      __syncthreads();  // every thread has read the counts before the next step appends
    }
  }
  if (filtered && queued != 0) {  // the rest of the queue: at most 31 slots, at most 128 candidates a query
    const bool mine = lane < static_cast<int>(queued);
    const uint32_t s = mine ? wq_slot[lane] : 0u;
    const uint64_t kk = mine ? wq_keep[lane] : 0ull;
    set_id(mine, s);
    score(vector_of(s), mine, kk);
    offer(mine, kk, s);
  }

  __syncthreads();
  if constexpr (K == 32) {  // per query, a warp merges the warps' lists
    // Block-uniform loop bounds (see warp_topk.cuh): a warp past nq merges
    // the last query again and writes nothing.
    for (uint32_t q0 = 0; q0 < nq; q0 += kWarps) {
      const uint32_t q = q0 + warp < nq ? q0 + warp : nq - 1;
      const WarpEntry best = warp_merge_lists<kWarps>(sm_keys + q * S, sm_slots + q * S, lane);
      const uint64_t row = args->pairs[item.pair_begin + q].row;
      if (q0 + warp < nq && static_cast<uint32_t>(lane) < k) {
        args->cand_dists[row * k + lane] = kMax ? -best.key : best.key;
        args->cand_slots[row * k + lane] = best.val;
        if (bounds != nullptr && static_cast<uint32_t>(lane) == k - 1) bound_publish(bounds, sm_state[4 * q + 3], best.key);
      }
    }
  } else {
    for (uint32_t q = 0; q < nq; ++q) {
      const TopK t{sm_keys + q * S, sm_slots + q * S, sm_state + 4 * q};
      if (t.state[0] != 0) topk_flush<K, S>(t, k);
      const uint64_t row = args->pairs[item.pair_begin + q].row;
      for (uint32_t i = tid; i < k; i += kThreads) {
        const float key = t.keys[i];
        args->cand_dists[row * k + i] = kMax ? -key : key;
        args->cand_slots[row * k + i] = t.slots[i];
        if (bounds != nullptr && i == k - 1) bound_publish(bounds, sm_state[4 * q + 3], key);
      }
    }
  }
  if (args->query_done != nullptr) tail_merge<kMax, K>(args, item, smem_raw);
}

// ---------------------------------------------------------------------------
// The merge: per query, the k best of all of its candidate rows.

constexpr int kMergeAhead = 8;  // candidate loads in flight a thread (few candidates a query: latency)

// Query q's candidates (its rows' k each) in steps of kThreads, one a
// thread, kAhead steps' loads in flight at once (the candidates of one query
// are few at small batches: latency, not bandwidth): step(key, slot,
// next_key, next_known) for each step, slot UDF_IVF_V1_NO_SLOT past the end;
// next_key is the thread's key of the next step where next_known (its load
// is in flight already: all but one step in kAhead).  The bounds are block-uniform
// (every thread of the block calls step equally often; see warp_topk.cuh).
// The loads are unrolled, the steps are not: step is a top-k offer, and
// eight inlined copies of it were most of a merge's code (a merge kernel
// 54 -> 17 KB on sm_90, and every scan carries one in its tail merge); the
// registers shift down a step instead of being indexed, so they stay
// registers.
template <bool kMax, class Step>
__device__ __forceinline__ void for_each_candidate_step(const udf_ivf_merge_args_v1& a, uint32_t q, Step step) {
  const uint64_t first = static_cast<uint64_t>(a.query_rows[q]) * a.k;
  const uint64_t n = static_cast<uint64_t>(a.query_rows[q + 1]) * a.k - first;
  constexpr int kAhead = kMergeAhead;
  for (uint64_t base = 0; base < n; base += uint64_t(kAhead) * kThreads) {
    float keys[kAhead];
    uint32_t slots[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const uint64_t i = base + uint64_t(u) * kThreads + threadIdx.x;
      // Through L2 (ld.global.cg): a tail merge reads rows other blocks of
      // the same launch wrote; no stale line of this SM's L1 may answer.
      slots[u] = i < n ? __ldcg(a.cand_slots + first + i) : UDF_IVF_V1_NO_SLOT;
      keys[u] = i < n ? to_key<kMax>(__ldcg(a.cand_dists + first + i)) : 0.0f;
    }
#pragma unroll 1
    for (int u = 0; u < kAhead; ++u) {
      if (base + uint64_t(u) * kThreads >= n) break;  // block-uniform
      step(keys[0], slots[0], keys[1], u + 1 < kAhead);  // (keys[1]: the next step's key, where loaded)
#pragma unroll
      for (int v = 0; v + 1 < kAhead; ++v) {
        keys[v] = keys[v + 1];
        slots[v] = slots[v + 1];
      }
    }
  }
}

// A bound on query q's result: each of its rows holds the k best of its
// candidates, sorted (+inf past the row's candidates), so at least k
// candidates are at or below the smallest of the rows' k-th keys and no
// candidate above it is among the k best.  The merge offers only those at
// or below it: of the thousands of candidates of a few-query batch (32
// probes of tiles), a few dozen.  The same result as offering all.
template <bool kMax> __device__ __forceinline__ float merge_bound(const udf_ivf_merge_args_v1& a, uint32_t q) {
  __shared__ float warp_min[kWarps];
  const uint64_t first = a.query_rows[q], n = a.query_rows[q + 1] - first;
  float b = __int_as_float(0x7f800000);
  // Block-uniform bounds (the shuffles below; see warp_topk.cuh), kAhead
  // loads in flight.  fminf: a NaN key bounds nothing.
  constexpr int kAhead = kMergeAhead;
  for (uint64_t base = 0; base < n; base += uint64_t(kAhead) * kThreads) {
    float keys[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const uint64_t i = base + uint64_t(u) * kThreads + threadIdx.x;
      keys[u] = i < n ? to_key<kMax>(__ldcg(a.cand_dists + (first + i) * a.k + a.k - 1)) : b;
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) b = fminf(b, keys[u]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) b = fminf(b, wt_shfl_xor(b, o));
  if ((threadIdx.x & 31) == 0) warp_min[threadIdx.x >> 5] = b;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kWarps; ++w) b = fminf(b, warp_min[w]);
  __syncthreads();  // every thread has read warp_min before another query's bound
  return b;
}

// A second bound for the block merge (k above 32): the k-th smallest of the
// rows' first keys.  Each row is sorted and holds candidates of its own (an
// item's), so the first keys of k rows are k candidates at or under it.
// Where the best candidates spread over many rows -- uniform data, one or
// two of the k best a row -- it is close to the k-th best itself, far under
// the smallest k-th key of a row (merge_bound), which lets thousands of
// candidates through: on an H200, a batch-1 k-100 search over 256 lists of
// uniform data offered most of its 51,200 and spent 0.8 ms in the merge's
// sorts.  Found by bisection on the keys' order-preserving words (rounds of
// a block-wide count), with each thread's rows in registers: up to
// kRowsPerThread * kThreads rows (more: `other` as it is).  Returns the
// smaller of it and `other` (merge_bound's or the query bound): where the
// best candidates crowd into a few rows (clustered data) that one is the
// tighter, and a first round says so.
constexpr int kRowsPerThread = 8;
template <bool kMax>
__device__ __forceinline__ float first_keys_bound(const udf_ivf_merge_args_v1& a, uint32_t q, float other) {
  __shared__ uint32_t warp_count[kWarps];
  const uint64_t first = a.query_rows[q], n = a.query_rows[q + 1] - first;
  if (n < a.k || n > uint64_t(kRowsPerThread) * kThreads) return other;  // block-uniform
  uint32_t e[kRowsPerThread];  // the words of the thread's rows' first keys (NaN: +inf's); past the rows: none
#pragma unroll
  for (int u = 0; u < kRowsPerThread; ++u) {
    const uint64_t i = uint64_t(u) * kThreads + threadIdx.x;
    const float key = i < n ? to_key<kMax>(__ldcg(a.cand_dists + (first + i) * a.k)) : 0.0f;
    e[u] = i >= n ? 0xFFFFFFFFu : bound_encode(key == key ? key : __int_as_float(0x7f800000));
  }
  // The first round counts the first keys at or under the other bound: fewer
  // than k (the best candidates crowd into a few rows) and that one is the
  // tighter.  Otherwise the smallest word with at least k first keys at or
  // under it lies in [0, the other's word], and 16 rounds of bisection put
  // `hi` within 1 / 65536 of that span above it: within about 1% of its
  // key, and still a bound (k first keys at or under hi).  A fixed number
  // of rounds, no early exit: a loop or branch on the counts (from shared
  // memory) made ptxas check for divergence at every vote and shuffle after
  // it, with its helpers' calls before sm_90.
  const uint32_t top = bound_encode(other == other ? other : __int_as_float(0x7f800000));
  uint32_t lo = 0, hi = top;
  bool tighter = false;
#pragma unroll 1
  for (int round = -1; round < 16; ++round) {
    const uint32_t mid = round < 0 ? top : lo + (hi - lo) / 2;
    uint32_t c = 0;
#pragma unroll
    for (int u = 0; u < kRowsPerThread; ++u) c += e[u] <= mid ? 1u : 0u;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) c += wt_shfl_xor(c, o);
    if ((threadIdx.x & 31) == 0) warp_count[threadIdx.x >> 5] = c;
    __syncthreads();
    c = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) c += warp_count[w];
    __syncthreads();  // every thread has read warp_count before the next round writes it
    if (round < 0) tighter = c >= a.k;
    else if (c >= a.k) hi = mid;
    else lo = mid + 1;
  }
  return tighter ? bound_decode(hi) : other;
}

// Result i of query q.
template <bool kMax>
__device__ __forceinline__ void write_merged(const udf_ivf_merge_args_v1& a, uint32_t q, uint32_t i, float key, uint32_t slot) {
  a.out_dists[static_cast<uint64_t>(q) * a.k + i] = kMax ? -key : key;
  a.out_ids[static_cast<uint64_t>(q) * a.k + i] = slot == UDF_IVF_V1_NO_SLOT ? -1LL : a.ids[slot];
}

// KMAX 32: each warp keeps the k best of its share of the candidates in
// registers (warp_topk.cuh), then the warps' lists (in smem: kWarps * 32
// keys and slots) are merged.
template <bool kMax>
__device__ __forceinline__ void merge_warps(const udf_ivf_merge_args_v1& a, uint32_t q, uint4* smem, const uint32_t* qbound) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* list_keys = reinterpret_cast<float*>(smem);
  uint32_t* list_slots = reinterpret_cast<uint32_t*>(list_keys + kWarps * 32);
  WarpEntry best{__int_as_float(0x7f800000), UDF_IVF_V1_NO_SLOT};
  const float bound = qbound != nullptr ? bound_decode(__ldcg(qbound)) : merge_bound<kMax>(a, q);
  for_each_candidate_step<kMax>(a, q, [&](float key, uint32_t slot, float, bool) {
    const bool offered = slot != UDF_IVF_V1_NO_SLOT && key < __int_as_float(0x7f800000) && key <= bound;
    if (wt_ballot(offered) == 0) return;  // most steps, under the bound: no shuffle of the list for them
    warp_topk_offer(best, a.k, offered, key, slot, lane);
  });
  list_keys[warp * 32 + lane] = best.key;
  list_slots[warp * 32 + lane] = best.val;
  __syncthreads();
  // Every warp merges the lists (no warp-dependent branch around the
  // shuffles: inlined into a scan's tail merge, ptxas would otherwise call
  // its shuffle helpers before sm_90); warp 0 writes.
  best = warp_merge_lists<kWarps>(list_keys, list_slots, lane);
  if (warp == 0 && static_cast<uint32_t>(lane) < a.k) write_merged<kMax>(a, q, lane, best.key, best.val);
}

// KMAX above 32: the block-wide top-k in smem (UDF_IVF_MERGE_V1_SMEM_BYTES).
template <bool kMax, int K>
__device__ __forceinline__ void merge_block(const udf_ivf_merge_args_v1& a, uint32_t q, uint4* smem, const uint32_t* qbound) {
  constexpr int S = UDF_IVF_V1_SORT_CAPACITY(K);
  const uint32_t k = a.k;
  const TopK t{reinterpret_cast<float*>(smem), reinterpret_cast<uint32_t*>(smem) + S, reinterpret_cast<uint32_t*>(smem) + 2 * S};
  topk_init<S>(t);
  __syncthreads();  // topk_init before the first offer
  const float bound = first_keys_bound<kMax>(a, q, qbound != nullptr ? bound_decode(__ldcg(qbound)) : merge_bound<kMax>(a, q));
  // A step's candidates go into the buffer after the sorted k, which is
  // sorted when the next step's could overflow it: those of its keys under
  // the bound (all of them where the next step's keys are not loaded yet,
  // one step in kMergeAhead).  With the bounds above: a few sorts a query
  // instead of one at every step that offers a candidate (S entries each).
  for_each_candidate_step<kMax>(a, q, [&](float key, uint32_t slot, float next_key, bool next_known) {
    const bool pass = slot != UDF_IVF_V1_NO_SLOT && topk_beats(t, k, key, slot) && key <= bound;
    topk_offer<K>(t, pass, key, slot);
    const uint32_t next = static_cast<uint32_t>(__syncthreads_count(!next_known || next_key <= bound));  // after the appends
    if (t.state[0] + next > uint32_t(S - K)) topk_flush<K, S>(t, k);
    __syncthreads();  // every thread has read the count before the next step appends
  });
  if (t.state[0] != 0) topk_flush<K, S>(t, k);
  for (uint32_t i = threadIdx.x; i < k; i += kThreads) write_merged<kMax>(a, q, i, t.keys[i], t.slots[i]);
}

// Query q's k best of its rows, by the whole block; smem: at least
// UDF_IVF_MERGE_V1_SMEM_BYTES(sort capacity), 16-byte aligned.  bound: the
// query's QUERY BOUND word once every row is written (the smallest of the
// rows' k-th keys), or null to find that bound from the rows.
template <bool kMax, int K>
__device__ __forceinline__ void merge_query(const udf_ivf_merge_args_v1& a, uint32_t q, uint4* smem, const uint32_t* bound) {
  if constexpr (K == 32)
    merge_warps<kMax>(a, q, smem, bound);
  else
    merge_block<kMax, K>(a, q, smem, bound);
}

template <bool kMax, int K> __device__ __forceinline__ void merge(const udf_ivf_merge_args_v1& a) {
  const uint32_t q = blockIdx.x;
  if (q >= a.n_queries) return;
  extern __shared__ uint4 smem_raw[];
  merge_query<kMax, K>(a, q, smem_raw);
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


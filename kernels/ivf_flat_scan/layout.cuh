// What every part of the scan reads: the work item and the thread's place,
// the block's dynamic shared memory carved into its arrays, and the item's
// run of its list, by layout (ScanTile bundles the three).
#pragma once
#include "types.cuh"

namespace udf_kernels {

// The block's work item and the thread's place in the block.
struct ScanItem {
  const udf_ivf_scan_args_v1* args;
  udf_ivf_work_item_v1 item;
  // ONE QUERY (args.entry_flags, ivf_flat_v1.h): the entry scans items of
  // at most one query; a constant once inlined, so that such an entry (a
  // DIRECT TWIN) compiles to one query's code and the others to the code
  // they had without the flag.
  bool one_query;
  uint32_t nq;   // the item's queries
  uint32_t qpi;  // queries an item at most (the shared memory is sized for them)
  uint32_t dim;
  uint32_t dim_padded;
  uint32_t k;
  int tid;
  int warp;
  int lane;

  __device__ __forceinline__ explicit ScanItem(const udf_ivf_scan_args_v1* a)
      : args(a),
        item(a->items[blockIdx.x]),
        one_query((a->entry_flags & UDF_IVF_SCAN_ONE_QUERY) != 0u),
        nq(one_query ? (item.pair_count != 0u ? 1u : 0u) : item.pair_count),
        qpi(a->queries_per_item),
        dim(a->dim),
        dim_padded(a->dim_padded),
        k(a->k),
        tid(threadIdx.x),
        warp(tid >> 5),
        lane(tid & 31) {}
};

// The scan's dynamic shared memory, in the order UDF_IVF_SCAN_V1_SMEM_BYTES
// (ivf_flat_v1.h) and the manifest's dynamic_smem size it.  Per query of an
// item (qpi of them):
//   query  its coordinates, q4 16-byte words (UDF_IVF_SCAN_QUERY_WORDS)
//   keys   its top-k keys (S), then slots: its top-k slots (S)
//   state  4 words: buffered count, threshold, query row, pair query
//   acc    acc_words words a thread, [q][word][thread]: v1's accumulator,
//          the v2 state's words, or the vector shape's distance
// then, staged folds only (the vector shape), each warp's staged rows
// (UDF_IVF_SCAN_V2_STAGE_WORDS), or, kRowStage (the rows twins of the v1
// and state folds), each warp's stage of kRowStageChunks chunks
// (UDF_IVF_SCAN_ROWS_STAGE_BYTES: RowVectors::load_together), then,
// filtered launches only (UDF_IVF_SCAN_V1_FILTER_SMEM_BYTES), each warp's
// queue: kQueue keep masks, then kQueue slots.  Every term is a multiple of 8
// bytes, so the masks are 8-byte aligned; every term before the row stage is
// a multiple of 16 bytes when there are no staged rows, so the row stage is
// 16-byte aligned.
constexpr int kRowStageRows = 16;                                // rows a warp stages at a time
constexpr int kStageRowChunks = kBatch + 1;                      // 16-byte chunks a staged row (one of padding)
constexpr int kRowStageChunks = kRowStageRows * kStageRowChunks;  // 16-byte chunks a warp's row stage
static_assert(kWarps * kRowStageChunks * 16 == UDF_IVF_SCAN_ROWS_STAGE_BYTES, "the header's row stage size");
// The copied row stage (args.stage_rows = UDF_IVF_SCAN_ROWS_STAGE_COPIED): a
// whole batch of the warp's 32 rows.
constexpr int kCopiedStageChunks = 32 * kStageRowChunks;
static_assert(kWarps * kCopiedStageChunks * 16 == UDF_IVF_SCAN_ROWS_STAGE_COPIED_BYTES, "the header's copied stage size");

// Whether this file copies global memory to shared memory without
// registers (cp.async): only LTO-IR for compute_80 or newer (a pack for
// that arch, or the rows families' files for UDF_KERNEL_PACK_COPY_ARCH),
// since LTO-IR for compute_75 must link for sm_75 too and its arch is fixed
// when the file is compiled (__nvvm_reflect's "__CUDA_ARCH" included).
// gen_manifest.py gives the rows twins with such a file their copied stage
// (copied_stage), the runtime's sign to ask for it on sm_80 or newer; a file
// without the copy, given it, stages the batch through registers.
__device__ __forceinline__ constexpr bool can_copy_async() {
#if __CUDA_ARCH__ >= 800
  return true;
#else
  return false;
#endif
}
// A shared-memory address as the 32-bit offset the shared window takes.
__device__ __forceinline__ uint32_t smem_address(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
// One 16-byte copy from global to shared memory (at dst, or a 32-bit
// address), in flight until copy_async_wait (behind can_copy_async()).
__device__ __forceinline__ void copy_async16_to(uint32_t dst, const uint4* src) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
#endif
}
__device__ __forceinline__ void copy_async16(uint4* dst, const uint4* src) { copy_async16_to(smem_address(dst), src); }
// The same, or (skip) no read at all and 16 zero bytes at dst: every lane
// issues it, so that a copy some lanes skip needs no branch.
__device__ __forceinline__ void copy_async16_or_zero(uint32_t dst, const uint4* src, bool skip) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "{ .reg .pred p;\n"
      "  setp.ne.b32 p, %2, 0;\n"
      "  cp.async.cg.shared.global [%0], [%1], 16, p; }\n" ::"r"(dst),
      "l"(src), "r"(static_cast<uint32_t>(skip))
      : "memory");
#endif
}
// 16 bytes of shared memory at a 32-bit address (smem_address).  Volatile,
// so that the compiler keeps it after the copy waits and the __syncwarp
// that make the bytes visible (asm and calls with side effects).
__device__ __forceinline__ uint4 load_shared16(uint32_t a) {
  uint4 u;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "r"(a));
  return u;
}
// The thread's copies are done and visible to it (a __syncwarp after makes
// them the warp's).
__device__ __forceinline__ void copy_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}
// The thread's copies since its last commit form a group (copy_async_wait_but_one).
__device__ __forceinline__ void copy_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// The thread's committed groups are done but the newest.
__device__ __forceinline__ void copy_async_wait_but_one() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
#endif
}

template <class A, int S, bool kStaged, bool kRowStage = false> struct ScanSmem {
  static_assert(!(kStaged && kRowStage), "a vector fold stages its rows itself");
  static constexpr int kQueue = 64;  // a warp's queue of kept slots (filtered scans)

  uint4* raw;
  // The queries come first, at offset 0 of a uint4 array and indexed as
  // (q * q4 + c) * 4: every chunk's address is visibly 16-byte aligned, so
  // the compiler reads a query's coordinates four at a time (one LDS.128
  // instead of four LDS), in the v1 and state folds and in a vector UDF's
  // loop over y once inlined.  q4 is odd: 16-byte reads of different
  // queries at one coordinate (vector shape) fall in different banks.
  uint32_t q4;
  A* query;
  float* keys;
  uint32_t* slots;
  uint32_t* state;  // per query: [0] buffered count, [1] threshold, [2] query row, [3] pair query
  A* acc;
  uint32_t stage_rows;  // rows a warp stages (staged folds; else 0)
  uint32_t row_words;   // words a staged row
  A* stage;             // this warp's staged rows
  uint4* row_stage;      // this warp's row stage (kRowStage)
  bool copied;           // the row stage holds a whole batch, copied (kRowStage, LTO-IR for compute_80 or newer)
  uint64_t* queue_keep;  // this warp's queue: keep masks
  uint32_t* queue_slot;  // and slots

  __device__ __forceinline__ ScanSmem(uint4* smem, const ScanItem& it, uint32_t acc_words) {
    raw = smem;
    q4 = (it.dim_padded / 4u) | 1u;
    query = reinterpret_cast<A*>(smem);
    keys = reinterpret_cast<float*>(smem) + it.qpi * (it.dim_padded + 4u);  // the space the header sizes
    slots = reinterpret_cast<uint32_t*>(keys + it.qpi * S);
    state = slots + it.qpi * S;
    acc = reinterpret_cast<A*>(state + 4 * it.qpi);
    stage_rows = kStaged ? it.args->stage_rows : 0u;
    row_words = UDF_IVF_SCAN_V2_ROW_WORDS(it.dim_padded);
    A* const stages = acc + it.qpi * kThreads * acc_words;
    A* const stage_end = stages + (kStaged ? UDF_IVF_SCAN_V2_STAGE_WORDS(stage_rows, it.dim_padded) : 0u);
    stage = stages + static_cast<uint32_t>(it.warp) * stage_rows * row_words;
    const bool copied_stage = kRowStage && it.args->stage_rows == UDF_IVF_SCAN_ROWS_STAGE_COPIED;
    copied = copied_stage && can_copy_async();
    const int row_stage_chunks = !kRowStage ? 0 : copied_stage ? kCopiedStageChunks : kRowStageChunks;
    row_stage = kRowStage ? reinterpret_cast<uint4*>(stage_end) + it.warp * row_stage_chunks : nullptr;
    uint64_t* const queues = reinterpret_cast<uint64_t*>(stage_end) + kWarps * row_stage_chunks * 2;
    queue_keep = queues + it.warp * kQueue;
    queue_slot = reinterpret_cast<uint32_t*>(queues + kWarps * kQueue) + it.warp * kQueue;
  }

  __device__ A* query_row(uint32_t q) const { return query + (q * q4) * 4u; }
  // acc as 32-bit words (state words, distances as bits).
  __device__ __forceinline__ uint32_t* words() const { return reinterpret_cast<uint32_t*>(acc); }

  // Every query's top-k as topk_init leaves it, all queries at once, 16
  // bytes a store (their keys, and their slots, are one array each).
  __device__ __forceinline__ void init_topk(const ScanItem& it) const {
    static_assert(S % 4 == 0, "whole 16-byte words per query");
    for (uint32_t i = it.tid; i < it.nq * (S / 4); i += kThreads) {
      reinterpret_cast<uint4*>(keys)[i] = make_uint4(0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u);
      reinterpret_cast<uint4*>(slots)[i] = make_uint4(UDF_IVF_V1_NO_SLOT, UDF_IVF_V1_NO_SLOT, UDF_IVF_V1_NO_SLOT, UDF_IVF_V1_NO_SLOT);
    }
  }

  // Each query's state words; its threshold +inf (accept anything finite),
  // or with PRUNE the block's bound there instead (K 32: no threshold).
  __device__ __forceinline__ void init_state(const ScanItem& it, bool prune) const {
    static_assert(kThreads >= 64, "a thread for each query of an item (at most 64)");
    if (static_cast<uint32_t>(it.tid) < it.nq) {
      const uint32_t query = it.args->pairs[it.item.pair_begin + it.tid].query;
      state[4 * it.tid] = 0;
      state[4 * it.tid + 1] = prune ? UDF_IVF_V1_BOUND_NONE : 0x7f800000u;
      state[4 * it.tid + 2] = it.args->query_base + query;
      state[4 * it.tid + 3] = query;
    }
  }

  // The query rows, four queries' loads in flight at a time (their pairs
  // read from global memory again: a shared read would wait for the stores
  // before it); zero past dim.
  template <class E> __device__ __forceinline__ void load_queries(const ScanItem& it) const {
    for (uint32_t d = it.tid; d < it.dim_padded; d += kThreads) {
#pragma unroll 4
      for (uint32_t q = 0; q < it.nq; ++q) {
        const uint64_t qbase = static_cast<uint64_t>(it.args->pairs[it.item.pair_begin + q].query) * it.args->query_stride;
        query_row(q)[d] = d < it.dim ? load_scalar<E, A>(it.args->queries, qbase + d) : A(0);
      }
    }
  }
};

// The item's run of its list: groups [g_begin, g_end) of 32 slots, n_steps
// steps of kWarps groups (a warp a group).
struct ScanSteps {
  uint64_t first;  // the list's first slot
  uint32_t size;   // its slots
  uint32_t g_end;
  uint32_t g_begin;
  uint32_t n_steps;

  __device__ __forceinline__ explicit ScanSteps(const ScanItem& it) {
    first = it.args->list_offsets[it.item.list];
    size = it.args->list_sizes[it.item.list];
    const uint32_t groups = (size + 31) / 32;
    g_end = it.item.group_end < groups ? it.item.group_end : groups;
    g_begin = it.item.group_begin < g_end ? it.item.group_begin : g_end;
    n_steps = (g_end - g_begin + kWarps - 1) / kWarps;
  }
};

// The stored vectors, by layout: where a slot's vector starts and how far
// apart its 16-byte chunks of V coordinates are (kStride uint4).
//
// kTogether: a warp reads a whole batch of its lanes' vectors together
// (load_together, through the warp's row stage) rather than each lane its
// own vector's chunks.
//
// ListVectors: the lists' interleaved groups (ivf_flat_v1.h, LIST
// STORAGE): chunk c of slot s at data + (s / 32) * chunks * 32 + c * 32 + s % 32.
// A warp's load of one chunk of its 32 slots reads 512 contiguous bytes.
template <int V> struct ListVectors {
  static constexpr int kStride = 32;
  static constexpr bool kTogether = false;
  uint32_t chunks;  // 16-byte chunks a vector
  uint32_t full;    // chunks whose every coordinate is real
  uint32_t tail;    // coordinates of the last, partial chunk
  const uint4* data;

  __device__ __forceinline__ explicit ListVectors(const ScanItem& it) {
    chunks = it.dim_padded / V;
    full = it.dim / V;
    tail = it.dim % V;
    data = static_cast<const uint4*>(it.args->list_data);
  }

  // Where slot s's chunk 0 is; chunk c is c * kStride uint4 further.
  __device__ const uint4* vector_of(uint64_t s) const { return data + (s / 32) * static_cast<uint64_t>(chunks) * 32 + (s % 32); }
};

// RowVectors: rows (ivf_flat_v1.h, ROWS LAYOUT): slot s's vector is row
// ids[s] of a row-major array of dim_padded elements a row; its chunks are
// consecutive.  Every slot of a list's groups, padding included, names a
// row, so a lane past its list's end reads a real one (and scores nothing).
template <int V> struct RowVectors {
  static constexpr int kStride = 1;
  static constexpr bool kTogether = true;
  uint32_t chunks;
  uint32_t full;
  uint32_t tail;
  const uint4* data;
  const long long* rows;

  __device__ __forceinline__ explicit RowVectors(const ScanItem& it) {
    chunks = it.dim_padded / V;
    full = it.dim / V;
    tail = it.dim % V;
    data = static_cast<const uint4*>(it.args->list_data);
    rows = it.args->ids;
  }

  __device__ const uint4* vector_of(uint64_t s) const {
    return data + static_cast<uint64_t>(__ldg(rows + s)) * chunks;
  }

  // A whole batch: r[j] = chunk j of the lane's batch (bp: its first
  // chunk).  All 32 lanes; every lane's bp is a row (padding slots name
  // one), so every lane reads, whatever its `load`.
  //
  // A lane reading its own row's chunks would make each 16-byte load of the
  // warp touch 32 rows' cache lines (the interleaved lists' touch 4), and L1
  // serves a load a line at a time.  Here 8 lanes read a row's kBatch chunks,
  // 128 contiguous bytes, so a load reads four rows' batches and touches four
  // lines; the warp's row stage in shared memory hands each lane its own row,
  // 16 rows a round.  A stage row is kStageRowChunks = kBatch + 1 chunks
  // apart: 8 lanes storing one row's chunks, and 8 lanes reading chunk j of
  // 8 rows, reach 8 different 16-byte bank groups, and every address is a
  // lane's base plus a constant.
  //
  // The copied stage (a pack for compute_80 or newer, when the runtime gives
  // the larger stage: ivf_flat_v1.h, ROWS LAYOUT) holds the whole batch of 32 rows,
  // copied there without registers, and the copy of the vector's next batch
  // is in flight while this one folds: `first` (chunk 0's batch) starts its
  // own copy, `next` (the next batch is whole too) starts the next one.  Out
  // of this function no copy is in flight but the next batch's.
  __device__ __forceinline__ void load_together(uint4 (&r)[kBatch], const uint4* bp, uint4* stage, int lane, bool copied, bool first,
                                                bool next) const {
    if (copied) {
      if (first) {
        copy_async_wait();  // a walk that stopped early would leave its next batch's copy in flight
        __syncwarp();       // the stage's previous reads are done
        copy_batch(bp, stage, lane);
      }
      copy_async_wait();
      __syncwarp();
      const uint4* const get = stage + lane * kStageRowChunks;
#pragma unroll
      for (int j = 0; j < kBatch; ++j) r[j] = get[j];
      if (next) {
        __syncwarp();
        copy_batch(bp + kBatch, stage, lane);
      }
      return;
    }
    load_through_registers(r, bp, stage, lane);
  }

  // The copies of a batch of the warp's 32 rows into the copied stage (row i
  // at i * kStageRowChunks): 8 lanes a row, as in load_through_registers.
  __device__ __forceinline__ void copy_batch(const uint4* bp, uint4* stage, int lane) const {
    const int part = lane & 7, sub = lane >> 3;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int row = 4 * i + sub;
      const auto p = reinterpret_cast<const uint4*>(__shfl_sync(kFull, reinterpret_cast<unsigned long long>(bp), row));
      copy_async16(stage + row * kStageRowChunks + part, p + part);
    }
  }

  // The 16-row stage: each round's loads go through registers.
  __device__ __forceinline__ void load_through_registers(uint4 (&r)[kBatch], const uint4* bp, uint4* stage, int lane) const {
    static_assert(kBatch == 8 && kRowStageRows == 16, "8 lanes read a row's batch; two rounds of 16 rows");
    const int part = lane & 7;  // the chunk this lane reads of a row
    const int sub = lane >> 3;  // the row of four a load reads
    uint4* const put = stage + sub * kStageRowChunks + part;            // + 4 i rows: v[i]
    const uint4* const get = stage + (lane & 15) * kStageRowChunks;     // + j: chunk j of the lane's row
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // round h: rows 16 h .. 16 h + 15
      uint4 v[4];  // v[i]: chunk `part` of row 16 h + 4 i + sub
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = 16 * h + 4 * i + sub;
        const auto p = reinterpret_cast<const uint4*>(__shfl_sync(kFull, reinterpret_cast<unsigned long long>(bp), row));
        v[i] = __ldg(p + part);
      }
      __syncwarp();  // the stage's previous reads are done
#pragma unroll
      for (int i = 0; i < 4; ++i) put[4 * i * kStageRowChunks] = v[i];
      __syncwarp();
      if ((lane >> 4) == h) {
#pragma unroll
        for (int j = 0; j < kBatch; ++j) r[j] = get[j];
      }
    }
  }
};

// The layout policy of a scan: interleaved lists, or rows.
enum class Layout { Lists, Rows };
template <Layout L, int V> struct VectorsFor { using type = ListVectors<V>; };
template <int V> struct VectorsFor<Layout::Rows, V> { using type = RowVectors<V>; };

// The parts every policy of one scan reads.  filtered: the launch has a
// filter (a constant once the entry kernel inlines the scan: the unfiltered
// scan has no trace of the filter's code).
template <class A, int S, bool kStaged, class Vectors> struct ScanTile {
  using Vec = Vectors;
  static constexpr int kChunkStride = Vec::kStride;  // uint4 between a vector's chunks
  // A fold of chunk batches (v1, state) reads a batch with the warp together
  // where the layout says so; the vector fold stages its rows itself.
  static constexpr bool kRowStage = Vec::kTogether && !kStaged;
  using Smem = ScanSmem<A, S, kStaged, kRowStage>;
  ScanItem it;
  Smem sm;
  Vec vec;
  bool filtered;
};

}  // namespace udf_kernels

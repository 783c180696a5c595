/*
 * IVF-Flat kernel pack v1: the contract between the prebuilt scan kernels
 * (share/udf/kernels/ivf_flat_v1.ltoir), udf-link and the runtime.
 *
 * Valid C99 and C++ for the host, CUDA C++ for nvcc and NVRTC.  udf-link
 * hands it to NVRTC as <udf/kernels/ivf_flat_v1.h>; it includes only the
 * UDF ABI header.  docs/kernels.md has the full description.
 *
 * LIST STORAGE (element type T, veclen V = 16 / sizeof(T): f32 4, f16 8,
 * i8/u8 16; dim_padded = dim rounded up to a multiple of V)
 *   Every vector has a global "slot".  List l owns slots
 *   [list_offsets[l], list_offsets[l] + list_sizes[l]); list_offsets[l] is a
 *   multiple of 32 and the list's storage is rounded up to whole groups of
 *   32 slots (slots past list_sizes[l] are never scored or reported).
 *   Group G (slots 32G .. 32G+31) starts at element 32 * G * dim_padded of
 *   `list_data` and is stored interleaved as [dim_padded / V][32][V]:
 *       element(slot s, coordinate d) =
 *           list_data[(s / 32) * 32 * dim_padded + (d / V) * 32 * V + (s % 32) * V + d % V]
 *   Coordinates d >= dim are padding: fill them with zeros; the UDF is never
 *   called for them.  list_data must be 16-byte aligned.
 *   ids[slot] (int64) maps a slot to the user's id (used by the merge).
 *
 * QUERIES: `queries` holds n_queries rows of `query_stride` elements of T
 *   (only the first dim are read; no alignment requirement beyond T's).
 *
 * SCHEDULE (built by the runtime, list-major):
 *   A work item scans groups [group_begin, group_end) of one list (clamped to
 *   the list's size) against up to queries_per_item queries: the pairs
 *   pairs[pair_begin .. pair_begin + pair_count).  Each pair names a query
 *   and an output row.  Every row receives exactly k candidates: the k
 *   nearest of that tile for that query, sorted nearest first, padded with
 *   (worst distance, UDF_IVF_V1_NO_SLOT).  Items sorted by list let
 *   concurrent blocks reuse a list through L2; each item reads its tile once
 *   for all of its queries.  Rows of one query must be contiguous:
 *   rows query_rows[q] .. query_rows[q+1]-1 (the merge reads them).  An item
 *   with pair_count 0 and group_end 0 is empty: it reads nothing and writes
 *   nothing (the runtime builds the schedule on the GPU and launches on an
 *   upper bound of items, the rest zeroed).
 *
 * LAUNCH (scan entry made by udf-link around a variant):
 *   block  = UDF_IVF_V1_BLOCK_THREADS (128) threads, 1-D
 *   grid   = n_items blocks, 1-D (blocks >= n_items return at once)
 *   dynamic shared memory =
 *       UDF_IVF_SCAN_V1_SMEM_BYTES(queries_per_item, sort_capacity(KMAX), dim_padded)
 *   Above 48 KiB, set CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first.
 * LAUNCH (merge kernels udf_ivf_merge_v1_<order>_k<KMAX>):
 *   block = 128 threads, grid = n_queries blocks,
 *   dynamic shared memory = UDF_IVF_MERGE_V1_SMEM_BYTES(sort_capacity(KMAX)).
 *   Writes out_dists/out_ids[q * k + i], nearest first; id -1 (and the worst
 *   distance) where fewer than k candidates exist.
 *
 * FILTER (ivf_flat.filter.v1, include/udf/abi/filter_v1.h): a scan entry
 *   made for a metric and a filter passes the filter to the variant; one
 *   without passes a null pointer.  With a filter, the variant calls
 *   keep(query_base + pair.query, ids[slot], filter ctx) for every (query,
 *   valid slot) of a tile before the metric: a rejected slot is never scored
 *   for that query nor offered as a candidate.  Each warp gathers the slots
 *   its group keeps into batches of 32 (a group that keeps every slot is
 *   scanned as is), so a selective filter saves both reads and metric calls.
 *   The v1 variants fold a filtered group for four (then two) of the item's
 *   queries at once, as unfiltered ones, skipping those that no slot of the
 *   group keeps.
 *   Filtered launches need UDF_IVF_SCAN_V1_FILTER_SMEM_BYTES more dynamic
 *   shared memory (the per-warp gather queues).
 *
 * METRIC ABI v2 (ivf_flat.metric.v2, include/udf/abi/metric_v2.h): scan
 *   variants udf_ivf_scan_v2_<shape>_<elem>_<acc>_<order>_k<KMAX> take the
 *   v2 functions instead of v1's, with the same arguments, schedule, filter
 *   and outputs.
 *   state:  each (query, thread) keeps the state's first state_words words
 *           (those the UDF uses, 1..8) in shared memory (4 bytes each, v1
 *           keeps one), initialised from state_init; update is
 *           called per coordinate in order, finalize once per pair.
 *           Dynamic shared memory: UDF_IVF_SCAN_V2_STATE_SMEM_BYTES.
 *   vector: each warp stages R of its 32 vectors at a time in shared
 *           memory, converted to the accumulator type, one row of
 *           UDF_IVF_SCAN_V2_ROW_WORDS(dim_padded) words each; then every
 *           lane calls distance(x, query, dim, ctx) for one (row, query)
 *           pair: R rows x 32 / R queries a pass.  R = min(stage_rows,
 *           32 / the item's query count rounded up to a power of two), so
 *           shared memory holds only the rows one pass needs.  The runtime
 *           passes stage_rows = 32 / queries_per_item (rounded up to a power
 *           of two), fewer if the rows do not fit.
 *           Dynamic shared memory: UDF_IVF_SCAN_V2_VECTOR_SMEM_BYTES.
 *   ctx.query is query_base + pair.query, ctx.id is ids[slot]: v2 scans read
 *   ids even unfiltered (only when the UDF uses ctx->id, once inlined).
 *
 * TAIL MERGE (scan entries whose launch parameters say tail_merge = 1):
 *   with args.query_done set, every item whose pair_count > 0 counts itself
 *   for each of its queries once its rows are written (after a device-wide
 *   fence); the block that completes query q's
 *   rows [query_row_ranges[q][0], query_row_ranges[q][1]) merges them into
 *   out_dists / out_ids[q * k ..] exactly as the merge kernel does (same
 *   order and ties, ids from args.ids) and resets query_done[q] to zero.
 *   Every row of the range must be written by exactly one item.  A query
 *   of one row (query_row_ranges[q][1] - [0] == 1) takes no count: its item
 *   writes the merged result itself (the row is its result) and not the
 *   row, and leaves query_done[q] and query_bound[q] as they were before
 *   the launch.
 *
 * ENTRY FLAGS (args.entry_flags): callers pass zero; udf-link's entry
 *   kernel gives its variant a copy of the arguments with the entry's own
 *   flags, a constant that LTO folds into the scan.  UDF_IVF_SCAN_ONE_QUERY:
 *   every item has at most one query and queries_per_item is 1 (the entry
 *   sets both, and the variant compiles to one query an item's code); every
 *   other entry passes 0 and compiles to the code it had without the field.
 *
 * DIRECT TWIN (entries whose launch parameters say direct_only = 1; the
 *   runtime's on-demand modules only, never a module file): a plain scan's
 *   twin whose entry passes UDF_IVF_SCAN_ONE_QUERY, so that it links in less
 *   time.  It serves direct schedules (one query an item) only, with the
 *   same results, bit for bit, as the plain entry it is the twin of.
 *
 * QUERY BOUND (scan entries whose launch parameters say query_bound = 1):
 *   with args.query_bound set, query_bound[q] holds an order-preserving
 *   encoding (UDF_IVF_V1_BOUND_ENCODE) of a key no larger
 *   than query q's k-th best key so far: every item that writes a row of k
 *   real candidates lowers it to the row's k-th key (atomicMin), and items
 *   offer only candidates whose key is at or under the bound they read.  A
 *   candidate above it has k better ones elsewhere, so the merged result is
 *   the same; a row may then hold fewer than k real candidates (padded as
 *   usual).  Keys are distances under min, negated distances under max.  Set
 *   every word to UDF_IVF_V1_BOUND_NONE before a launch; a tail merge (when
 *   query_done is set) resets its query's word to it, otherwise the launch
 *   leaves the bounds behind.
 *
 * PRUNE (the scan variants whose manifest entry says prune = 1,
 *   udf_ivf_scan_v1_prune_<elem>_<acc>_<order>_k32, called like the
 *   others): for metrics declared monotone (the artifact's "monotone": each
 *   fold moves the key away from the best, never towards it, and
 *   finalize keeps the order).  Unfiltered, a lane stops folding its vector
 *   for query q < 32 once the key of the partial accumulator (finalized) is
 *   above the query's bound: the smallest of query_bound[q] (when set) and
 *   the k-th keys of the block's warps for q.  A warp stops reading its
 *   group once no lane folds any query (items of at most 32 queries).  Such
 *   a vector's key would be above the bound too, so the results are the
 *   same.  With query_bound set, each warp also lowers query_bound[q] to its
 *   own k-th key after every step, not only when the item's row is written.
 *   A filtered launch prunes too: a lane folds a slot only for the queries
 *   that keep it, and the bounds come from kept candidates, so the results
 *   are the plain filtered scan's.  (Pack minor 16: the f32 and f16
 *   variants' manifest entries say filtered_prune = 1, and udf-link links
 *   filtered entries with those only.)
 *
 * ROWS LAYOUT (the rows variants, udf_ivf_rows_v1_<elem>_<acc>_<order>_k<KMAX>
 *   and udf_ivf_rows_v2_<shape>_<elem>_<acc>_<order>_k<KMAX>: exact search and
 *   refine; every plain scan variant has a rows twin, called alike, with the
 *   same arguments, schedule, filter and outputs): the vectors are rows of a
 *   row-major array instead of interleaved groups.  The vector of slot s is
 *   row ids[s] of `list_data`, dim_padded elements a row (16-byte aligned,
 *   coordinates dim .. dim_padded-1 never passed to the UDF); ids[s] is also
 *   the id the merge reports.  Lists are runs of slots as above (offsets
 *   multiples of 32), and ids must name a row for every slot of every list's
 *   groups, padding included (a lane past its list's end reads that row and
 *   scores nothing).  The v1 and state rows twins need
 *   UDF_IVF_SCAN_ROWS_STAGE_BYTES more dynamic shared memory than their
 *   plain variants (placed before a filtered launch's queues); the vector
 *   twins need none.  Their LTO-IR for compute_80 or newer (a pack for that
 *   arch, 1.12 and newer; or, from 1.13, the families' arch_files; the
 *   variants then have dynamic_smem.copied_stage) has a copied stage as
 *   well: with stage_rows = UDF_IVF_SCAN_ROWS_STAGE_COPIED they need
 *   UDF_IVF_SCAN_ROWS_STAGE_COPIED_BYTES instead, and each warp copies a
 *   whole batch of its rows there without registers (cp.async), the next
 *   batch's copy in flight while one folds.  Any other stage_rows reads
 *   through the smaller stage, and LTO-IR for an older arch given
 *   UDF_IVF_SCAN_ROWS_STAGE_COPIED stages through registers in the larger
 *   one.  The results are the same bits either way.
 *   TILED FOLD (the v1 f32 rows twins, pack 1.14; manifest tile_queries):
 *   with the copied stage, their LTO-IR for compute_80 or newer folds an
 *   unfiltered item of exactly UDF_IVF_SCAN_ROWS_TILE_QUERIES queries as a
 *   tile: each lane keeps a block of rows x queries of its warp's 32 rows in
 *   registers (of two steps' 64 rows where the vector has no partial chunk),
 *   where otherwise a lane folds its own row for every query.
 *   Other items, and other entries given the copied stage, fold as before;
 *   every accumulator folds its coordinates in order, so the results are
 *   the same bits.
 *
 * ORDER: min keeps the smallest distances, max the largest.  A distance that
 * is NaN, or +inf under min / -inf under max, is never reported.  Ties are
 * broken by the smaller slot.
 */
#ifndef UDF_KERNELS_IVF_FLAT_V1_H
#define UDF_KERNELS_IVF_FLAT_V1_H

#include <udf/abi/filter_v1.h>
#include <udf/abi/metric_v2.h>

#define UDF_IVF_V1_PACK_ID "ivf_flat_v1"
#define UDF_IVF_V1_BLOCK_THREADS 128
#define UDF_IVF_V1_GROUP_SIZE 32
#define UDF_IVF_V1_NO_SLOT 0xFFFFFFFFu
/* ENTRY FLAGS: args.entry_flags bit of an entry whose items have at most one query. */
#define UDF_IVF_SCAN_ONE_QUERY 1u
/* QUERY BOUND: a key's bits b (float) as an unsigned number in the keys'
 * order (negative keys flipped, the sign bit set on the rest); no bound is
 * +inf's encoding. */
#define UDF_IVF_V1_BOUND_ENCODE(b) (((b) & 0x80000000u) ? ~(b) : ((b) | 0x80000000u))
#define UDF_IVF_V1_BOUND_DECODE(e) (((e) & 0x80000000u) ? ((e) & 0x7FFFFFFFu) : ~(e))
#define UDF_IVF_V1_BOUND_NONE 0xFF800000u
/* Sort capacity of a top-k of capacity KMAX: 2 * max(KMAX, 128) entries; for
 * KMAX 32 (and less), whose scans keep a list of 32 a warp instead of a
 * block-wide buffer, the block's warps' lists: UDF_IVF_V1_BLOCK_THREADS
 * entries.  A runtime sizes shared memory from the capacity that every scan
 * entry's launch.sort_capacity records, not from this macro. */
#define UDF_IVF_V1_SORT_CAPACITY(kmax) \
  ((kmax) <= 32u ? UDF_IVF_V1_BLOCK_THREADS : 2u * ((kmax) > 128u ? (kmax) : 128u))
/* Dynamic shared memory of a scan block: per query of the item, the top-k
 * buffer (8 bytes an entry), 16 bytes of state, 128 accumulators and the
 * query converted to the accumulator type: UDF_IVF_SCAN_QUERY_WORDS words of
 * 4 bytes, at most dim_padded + 4 (allowed for as 16 bytes more a query). */
#define UDF_IVF_SCAN_V1_SMEM_BYTES(queries_per_item, sort_capacity, dim_padded) \
  ((queries_per_item) * (8u * (sort_capacity) + 32u + 4u * UDF_IVF_V1_BLOCK_THREADS + 4u * (dim_padded)))
/* A query's stride in shared memory: dim_padded (a multiple of 4) rounded up
 * to an odd number of 16-byte chunks, so that 16-byte reads of up to 8
 * different queries at one coordinate fall in different banks. */
#define UDF_IVF_SCAN_QUERY_WORDS(dim_padded) ((((dim_padded) / 4u) | 1u) * 4u)
#define UDF_IVF_MERGE_V1_SMEM_BYTES(sort_capacity) (8u * (sort_capacity) + 16u)
/* Extra dynamic shared memory of a filtered scan launch: per warp a queue of
 * 64 kept slots (4 bytes each) and their per-query keep masks (8 bytes). */
#define UDF_IVF_SCAN_V1_FILTER_SMEM_BYTES ((UDF_IVF_V1_BLOCK_THREADS / 32u) * 64u * 12u)
/* ABI v2 state scans: state_words (1..8) words per (query, thread) instead of one accumulator. */
#define UDF_IVF_SCAN_V2_STATE_SMEM_BYTES(queries_per_item, sort_capacity, dim_padded, state_words) \
  ((queries_per_item) * (8u * (sort_capacity) + 32u + 4u * (state_words) * UDF_IVF_V1_BLOCK_THREADS + 4u * (dim_padded)))
/* ABI v2 vector scans: v1's layout (the distance in the accumulator's place)
 * plus the staged rows: per warp stage_rows rows of UDF_IVF_SCAN_V2_ROW_WORDS,
 * the total rounded up to an even number of words. */
/* A staged row: dim_padded + 1 words (an odd stride: lanes reading the same
 * coordinate of their rows never share a bank). */
#define UDF_IVF_SCAN_V2_ROW_WORDS(dim_padded) ((dim_padded) + 1u)
#define UDF_IVF_SCAN_V2_STAGE_WORDS(stage_rows, dim_padded) \
  ((((UDF_IVF_V1_BLOCK_THREADS / 32u) * (stage_rows) * UDF_IVF_SCAN_V2_ROW_WORDS(dim_padded)) + 1u) & ~1u)
#define UDF_IVF_SCAN_V2_VECTOR_SMEM_BYTES(queries_per_item, sort_capacity, dim_padded, stage_rows) \
  (UDF_IVF_SCAN_V1_SMEM_BYTES(queries_per_item, sort_capacity, dim_padded) + 4u * UDF_IVF_SCAN_V2_STAGE_WORDS(stage_rows, dim_padded))
/* The rows twins of the v1 and state variants (ROWS LAYOUT) need this much
 * more dynamic shared memory, before the filter's queues: each warp's stage
 * of 16 rows' batches of 8 16-byte chunks (and one of padding), through
 * which the warp reads its rows together. */
#define UDF_IVF_SCAN_ROWS_STAGE_BYTES ((UDF_IVF_V1_BLOCK_THREADS / 32u) * 16u * 9u * 16u)
/* The copied row stage of the same twins (ROWS LAYOUT): args.stage_rows =
 * UDF_IVF_SCAN_ROWS_STAGE_COPIED asks for it; each warp's 32 rows' batches,
 * 8 16-byte chunks and one of padding. */
#define UDF_IVF_SCAN_ROWS_STAGE_COPIED 32u
#define UDF_IVF_SCAN_ROWS_STAGE_COPIED_BYTES ((UDF_IVF_V1_BLOCK_THREADS / 32u) * 32u * 9u * 16u)
/* The queries of an item that the v1 f32 rows twins fold as a tile (TILED FOLD). */
#define UDF_IVF_SCAN_ROWS_TILE_QUERIES 16u
/* dim rounded up to the variant's veclen (16 / element bytes). */
#define UDF_IVF_V1_DIM_PADDED(dim, elem_bytes) \
  (((dim) + (16u / (elem_bytes)) - 1u) / (16u / (elem_bytes)) * (16u / (elem_bytes)))

/* One work item: a tile of one list against a few queries.  24 bytes. */
typedef struct udf_ivf_work_item_v1 {
  uint32_t list;        /* list scanned */
  uint32_t group_begin; /* first group of 32 slots, relative to the list */
  uint32_t group_end;   /* one past the last group; clamped to the list (0xFFFFFFFF: to its end) */
  uint32_t pair_begin;  /* first entry of pairs[] */
  uint32_t pair_count;  /* 1 .. queries_per_item (0: an empty item, see above) */
  uint32_t reserved;    /* zero */
} udf_ivf_work_item_v1;

/* A query scored by a work item, and the candidate row it fills. */
typedef struct udf_ivf_pair_v1 {
  uint32_t query;
  uint32_t row;
} udf_ivf_pair_v1;

/* CAPTURE ALIGNMENT (module manifest 1.8, launch.capture_align): a scan
 * entry whose metric has f32 or i32 array captures is compiled assuming that
 * each of them starts on a UDF_IVF_SCAN_V1_CAPTURE_ALIGN-byte boundary (udf-link's
 * entry wrapper says so to the compiler), so that a UDF reading one
 * coordinate's value at a time gets four coordinates' values in one
 * 16-byte load.  The caller must pass such pointers: the runtime copies a
 * device array that does not start on one (host arrays are copied anyway).
 * A misaligned array is undefined behaviour (a misaligned-address fault). */
#define UDF_IVF_SCAN_V1_CAPTURE_ALIGN 16u

/* Arguments of a scan entry kernel, passed by value. */
typedef struct udf_ivf_scan_args_v1 {
  const void *list_data;              /* interleaved lists, element type of the variant, 16-byte aligned */
  const uint64_t *list_offsets;       /* [n_lists] first slot of each list (multiple of 32) */
  const uint32_t *list_sizes;         /* [n_lists] vectors in each list */
  const void *queries;                /* [n_queries][query_stride] elements */
  const udf_ivf_work_item_v1 *items;  /* [n_items] */
  const udf_ivf_pair_v1 *pairs;       /* referenced by the items */
  float *cand_dists;                  /* [n_rows][k] output distances */
  uint32_t *cand_slots;               /* [n_rows][k] output slots (UDF_IVF_V1_NO_SLOT: none) */
  uint64_t query_stride;              /* elements between consecutive queries, >= dim */
  uint32_t n_items;
  uint32_t dim;                       /* n_dims given to the UDF */
  uint32_t dim_padded;                /* UDF_IVF_V1_DIM_PADDED(dim, sizeof(T)) */
  uint32_t k;                         /* 1 .. KMAX of the variant */
  uint32_t queries_per_item;          /* >= every item's pair_count; sizes shared memory */
  uint32_t acc_init;                  /* bits of the initial accumulator (float or int32) */
  uint32_t n_captures;
  uint32_t entry_flags;               /* zero from the caller; the entry kernel sets it in its copy (ENTRY FLAGS) */
  udf_capture_v1 captures[UDF_ABI_METRIC_V1_MAX_CAPTURES]; /* arrays start on UDF_IVF_SCAN_V1_CAPTURE_ALIGN bytes
                                         where the entry's launch has capture_align (CAPTURE ALIGNMENT) */
  /* Read only by filtered entries (appended: unfiltered scans ignore them). */
  const long long *ids;               /* [slots] slot -> user id, given to the filter */
  uint32_t query_base;                /* added to pairs[].query: the query's row in the caller's batch */
  uint32_t n_filter_captures;
  udf_capture_v1 filter_captures[UDF_ABI_FILTER_V1_MAX_CAPTURES];
  /* Read only by ABI v2 entries (appended: v1 scans ignore them). */
  uint32_t state_init[UDF_ABI_METRIC_V2_STATE_WORDS]; /* state shape: the initial state's words */
  uint32_t stage_rows;                /* vector shape: rows staged per warp at a time, 1, 2, 4, 8, 16 or 32;
                                         v1 and state rows twins (read by them too):
                                         UDF_IVF_SCAN_ROWS_STAGE_COPIED for the copied row stage (ROWS LAYOUT) */
  uint32_t state_words;               /* state shape: the state's words kept per (query, thread), 1..8 (0: 8) --
                                         the words the UDF uses (the artifact's state_words); the rest read as zero */
  /* Tail merge (scan entries with launch tail_merge = 1; other entries
   * ignore these): when query_done is not
   * null, the last block to finish a query's rows merges them as the merge
   * kernel would (no merge launch).  See TAIL MERGE above. */
  uint32_t *query_done;               /* [n_queries] zero before the launch; zero again after it */
  const uint32_t *query_row_ranges;   /* [n_queries][2]: first candidate row, one past the last (at least one row) */
  float *out_dists;                   /* [n_queries][k] (query index = pairs[].query) */
  long long *out_ids;                 /* [n_queries][k], -1 where empty */
  /* Query bound (scan entries with launch query_bound = 1; other entries
   * ignore it): see QUERY BOUND above. */
  uint32_t *query_bound;              /* [n_queries] UDF_IVF_V1_BOUND_NONE before the launch, or null */
} udf_ivf_scan_args_v1;

/* Arguments of a merge kernel, passed by value. */
typedef struct udf_ivf_merge_args_v1 {
  const float *cand_dists;     /* [n_rows][k] from the scan */
  const uint32_t *cand_slots;  /* [n_rows][k] */
  const uint32_t *query_rows;  /* [n_queries + 1]: rows of query q are query_rows[q] .. query_rows[q+1]-1 */
  const long long *ids;        /* [slots] slot -> id */
  float *out_dists;            /* [n_queries][k] */
  long long *out_ids;          /* [n_queries][k], -1 where empty */
  uint32_t n_queries;
  uint32_t k;                  /* 1 .. KMAX of the kernel */
} udf_ivf_merge_args_v1;

#ifdef __cplusplus
static_assert(sizeof(udf_ivf_work_item_v1) == 24, "udf_ivf_work_item_v1 is 24 bytes");
static_assert(sizeof(udf_ivf_pair_v1) == 8, "udf_ivf_pair_v1 is 8 bytes");
static_assert(sizeof(udf_ivf_scan_args_v1) == 328, "udf_ivf_scan_args_v1 is 328 bytes");
static_assert(sizeof(udf_ivf_merge_args_v1) == 56, "udf_ivf_merge_args_v1 is 56 bytes");
#endif

/* Every scan variant: X(elem, acc, order, KMAX).  The symbol is
 * udf_ivf_scan_v1_<elem>_<acc>_<order>_k<KMAX>.  (The pack's manifest is
 * generated from this list.) */
#define UDF_IVF_SCAN_V1_FOR_EACH_VARIANT(X) \
  X(f32, f32, min, 32) X(f32, f32, min, 128) X(f32, f32, min, 256) X(f32, f32, min, 1024) \
  X(f32, f32, max, 32) X(f32, f32, max, 128) X(f32, f32, max, 256) X(f32, f32, max, 1024) \
  X(f16, f32, min, 32) X(f16, f32, min, 128) X(f16, f32, min, 256) X(f16, f32, min, 1024) \
  X(f16, f32, max, 32) X(f16, f32, max, 128) X(f16, f32, max, 256) X(f16, f32, max, 1024) \
  X(i8, i32, min, 32) X(i8, i32, min, 128) X(i8, i32, min, 256) X(i8, i32, min, 1024) \
  X(i8, i32, max, 32) X(i8, i32, max, 128) X(i8, i32, max, 256) X(i8, i32, max, 1024) \
  X(i8, f32, min, 32) X(i8, f32, min, 128) X(i8, f32, min, 256) X(i8, f32, min, 1024) \
  X(i8, f32, max, 32) X(i8, f32, max, 128) X(i8, f32, max, 256) X(i8, f32, max, 1024) \
  X(u8, i32, min, 32) X(u8, i32, min, 128) X(u8, i32, min, 256) X(u8, i32, min, 1024) \
  X(u8, i32, max, 32) X(u8, i32, max, 128) X(u8, i32, max, 256) X(u8, i32, max, 1024) \
  X(u8, f32, min, 32) X(u8, f32, min, 128) X(u8, f32, min, 256) X(u8, f32, min, 1024) \
  X(u8, f32, max, 32) X(u8, f32, max, 128) X(u8, f32, max, 256) X(u8, f32, max, 1024)

/* The PRUNE variants: X(elem, acc, order, KMAX), symbol
 * udf_ivf_scan_v1_prune_<elem>_<acc>_<order>_k<KMAX>; KMAX 32 only (the
 * block top-k of the larger ones keeps no per-warp k-th key). */
#define UDF_IVF_SCAN_V1_PRUNE_FOR_EACH_VARIANT(X) \
  X(f32, f32, min, 32) X(f32, f32, max, 32) X(f16, f32, min, 32) X(f16, f32, max, 32) \
  X(i8, i32, min, 32) X(i8, i32, max, 32) X(i8, f32, min, 32) X(i8, f32, max, 32) \
  X(u8, i32, min, 32) X(u8, i32, max, 32) X(u8, f32, min, 32) X(u8, f32, max, 32)

/* Every ABI v2 scan variant: X(shape, elem, acc, order, KMAX).  The symbol is
 * udf_ivf_scan_v2_<shape>_<elem>_<acc>_<order>_k<KMAX>. */
#define UDF_IVF_SCAN_V2_FOR_EACH_VARIANT_OF(X, shape) \
  X(shape, f32, f32, min, 32) X(shape, f32, f32, min, 128) X(shape, f32, f32, min, 256) X(shape, f32, f32, min, 1024) \
  X(shape, f32, f32, max, 32) X(shape, f32, f32, max, 128) X(shape, f32, f32, max, 256) X(shape, f32, f32, max, 1024) \
  X(shape, f16, f32, min, 32) X(shape, f16, f32, min, 128) X(shape, f16, f32, min, 256) X(shape, f16, f32, min, 1024) \
  X(shape, f16, f32, max, 32) X(shape, f16, f32, max, 128) X(shape, f16, f32, max, 256) X(shape, f16, f32, max, 1024) \
  X(shape, i8, i32, min, 32) X(shape, i8, i32, min, 128) X(shape, i8, i32, min, 256) X(shape, i8, i32, min, 1024) \
  X(shape, i8, i32, max, 32) X(shape, i8, i32, max, 128) X(shape, i8, i32, max, 256) X(shape, i8, i32, max, 1024) \
  X(shape, i8, f32, min, 32) X(shape, i8, f32, min, 128) X(shape, i8, f32, min, 256) X(shape, i8, f32, min, 1024) \
  X(shape, i8, f32, max, 32) X(shape, i8, f32, max, 128) X(shape, i8, f32, max, 256) X(shape, i8, f32, max, 1024) \
  X(shape, u8, i32, min, 32) X(shape, u8, i32, min, 128) X(shape, u8, i32, min, 256) X(shape, u8, i32, min, 1024) \
  X(shape, u8, i32, max, 32) X(shape, u8, i32, max, 128) X(shape, u8, i32, max, 256) X(shape, u8, i32, max, 1024) \
  X(shape, u8, f32, min, 32) X(shape, u8, f32, min, 128) X(shape, u8, f32, min, 256) X(shape, u8, f32, min, 1024) \
  X(shape, u8, f32, max, 32) X(shape, u8, f32, max, 128) X(shape, u8, f32, max, 256) X(shape, u8, f32, max, 1024)
#define UDF_IVF_SCAN_V2_FOR_EACH_VARIANT(X) \
  UDF_IVF_SCAN_V2_FOR_EACH_VARIANT_OF(X, state) UDF_IVF_SCAN_V2_FOR_EACH_VARIANT_OF(X, vector)

/* Every merge kernel: X(order, KMAX) -> udf_ivf_merge_v1_<order>_k<KMAX>. */
#define UDF_IVF_MERGE_V1_FOR_EACH_KERNEL(X) \
  X(min, 32) X(min, 128) X(min, 256) X(min, 1024) \
  X(max, 32) X(max, 128) X(max, 256) X(max, 1024)

#if defined(__CUDACC__)
/* The scan variants are defined in the pack as plain (non-inline) device
 * functions: nvcc drops an unreferenced inline definition.  Linked with -lto,
 * the body and the metric/finalize/filter calls are inlined into the entry
 * kernel.
 * finalize may be a null pointer: the distance is then (float)acc; filter
 * may be a null pointer: every vector is kept. */
/* prefix: empty for the plain variants, prune_ for PRUNE's. */
#define UDF_IVF_SCAN_V1_DECLARE_AS(prefix, elem, acc, order, kmax)                        \
  extern "C" __device__ void udf_ivf_scan_v1_##prefix##elem##_##acc##_##order##_k##kmax( \
      const udf_ivf_scan_args_v1 *args, udf_metric_v1_##acc##_fn metric, udf_finalize_v1_##acc##_fn finalize, \
      udf_filter_v1_fn filter);
#define UDF_IVF_SCAN_V1_DECLARE(elem, acc, order, kmax) UDF_IVF_SCAN_V1_DECLARE_AS(, elem, acc, order, kmax)
#define UDF_IVF_SCAN_V1_PRUNE_DECLARE(elem, acc, order, kmax) UDF_IVF_SCAN_V1_DECLARE_AS(prune_, elem, acc, order, kmax)
UDF_IVF_SCAN_V1_FOR_EACH_VARIANT(UDF_IVF_SCAN_V1_DECLARE)
UDF_IVF_SCAN_V1_PRUNE_FOR_EACH_VARIANT(UDF_IVF_SCAN_V1_PRUNE_DECLARE)
#undef UDF_IVF_SCAN_V1_DECLARE
#undef UDF_IVF_SCAN_V1_PRUNE_DECLARE
#undef UDF_IVF_SCAN_V1_DECLARE_AS

/* ABI v2: state variants take update + finalize, vector variants distance. */
#define UDF_IVF_SCAN_V2_FNS_state(acc) udf_update_v2_##acc##_fn update, udf_finalize_v2_fn finalize
#define UDF_IVF_SCAN_V2_FNS_vector(acc) udf_distance_v2_##acc##_fn distance
#define UDF_IVF_SCAN_V2_DECLARE(shape, elem, acc, order, kmax)                                        \
  extern "C" __device__ void udf_ivf_scan_v2_##shape##_##elem##_##acc##_##order##_k##kmax(                \
      const udf_ivf_scan_args_v1 *args, UDF_IVF_SCAN_V2_FNS_##shape(acc), udf_filter_v1_fn filter);
UDF_IVF_SCAN_V2_FOR_EACH_VARIANT(UDF_IVF_SCAN_V2_DECLARE)
#undef UDF_IVF_SCAN_V2_DECLARE

/* ROWS LAYOUT: the rows twin of every plain v1 and v2 scan variant. */
#define UDF_IVF_ROWS_V1_DECLARE(elem, acc, order, kmax)                                                    \
  extern "C" __device__ void udf_ivf_rows_v1_##elem##_##acc##_##order##_k##kmax(                           \
      const udf_ivf_scan_args_v1 *args, udf_metric_v1_##acc##_fn metric, udf_finalize_v1_##acc##_fn finalize, \
      udf_filter_v1_fn filter);
UDF_IVF_SCAN_V1_FOR_EACH_VARIANT(UDF_IVF_ROWS_V1_DECLARE)
#undef UDF_IVF_ROWS_V1_DECLARE
#define UDF_IVF_ROWS_V2_DECLARE(shape, elem, acc, order, kmax)                         \
  extern "C" __device__ void udf_ivf_rows_v2_##shape##_##elem##_##acc##_##order##_k##kmax( \
      const udf_ivf_scan_args_v1 *args, UDF_IVF_SCAN_V2_FNS_##shape(acc), udf_filter_v1_fn filter);
UDF_IVF_SCAN_V2_FOR_EACH_VARIANT(UDF_IVF_ROWS_V2_DECLARE)
#undef UDF_IVF_ROWS_V2_DECLARE

#define UDF_IVF_MERGE_V1_DECLARE(order, kmax) \
  extern "C" __global__ void udf_ivf_merge_v1_##order##_k##kmax(udf_ivf_merge_args_v1 args);
UDF_IVF_MERGE_V1_FOR_EACH_KERNEL(UDF_IVF_MERGE_V1_DECLARE)
#undef UDF_IVF_MERGE_V1_DECLARE
#endif /* __CUDACC__ */

#endif /* UDF_KERNELS_IVF_FLAT_V1_H */

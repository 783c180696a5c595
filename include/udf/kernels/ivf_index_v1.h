/*
 * IVF index kernels v1: the UDF-independent kernels of the runtime (element
 * conversion + normalization, k-means accumulation, coarse probe / k-means
 * assignment, the search schedule).  Compiled by nvcc into one fatbin (kernels/ivf_index_v1.cu)
 * that is embedded in libudf_runtime.so and loaded next to each module: they
 * are not in the LTO kernel pack, so udf-link never pays for them.
 *
 * Blocks of UDF_IVF_INDEX_V1_THREADS threads unless said otherwise; grids as
 * each kernel says.  Arguments are one struct passed by value.  Element codes match udf_dtype: 0 f32,
 * 1 f16, 2 i8, 3 u8.
 */
#ifndef UDF_KERNELS_IVF_INDEX_V1_H
#define UDF_KERNELS_IVF_INDEX_V1_H

#if defined(__CUDACC_RTC__)
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#define UDF_IVF_INDEX_V1_THREADS 128
/* udf_ivf_index_v1_select_direct: one query a block, so the block is wide. */
#define UDF_IVF_SELECT_DIRECT_V1_THREADS 1024
/* Coarse metric codes. */
#define UDF_IVF_INDEX_V1_L2 0
#define UDF_IVF_INDEX_V1_IP 1 /* also cosine, on normalized rows and centroids */
/* list_rows scatter: a row with this slot is skipped (a row another shard keeps). */
#define UDF_IVF_INDEX_V1_NO_SLOT 0xFFFFFFFFu

/* udf_ivf_index_v1_convert: dst[r] = src[src_rows ? src_rows[r] : r]
 * converted (f32 or f16 out), optionally divided by its L2 norm (rows of
 * norm 0 stay 0), then each element d multiplied by scale[d] when scale is
 * not null (an index's coarse scaling): with src_rows, a gather of rows (a
 * k-means sample).  No dynamic shared memory. */
typedef struct udf_ivf_convert_args_v1 {
  const void *src;
  void *dst;
  const uint64_t *src_rows; /* [rows] source row numbers, or null */
  uint64_t src_stride; /* elements */
  uint64_t dst_stride; /* elements */
  uint32_t rows;
  uint32_t dim;
  uint32_t src_elem;
  uint32_t dst_elem;   /* 0 f32 or 1 f16 */
  uint32_t normalize;
  uint32_t reserved;
  const float *scale; /* [dim] multipliers, or null */
} udf_ivf_convert_args_v1;

/* udf_ivf_index_v1_accumulate: a block per list l < n_lists writes
 * sums[l][d], the sum of rows[order[i]][d] over i in [starts[l],
 * starts[l + 1]) added in that order, so the sums (and the k-means
 * centroids) are the same bits in every run; grid = n_lists. */
typedef struct udf_ivf_accumulate_args_v1 {
  const float *rows;
  const uint32_t *order;   /* row numbers, grouped by list */
  const uint32_t *starts;  /* [n_lists + 1] */
  float *sums;             /* [n_lists][dim] */
  uint32_t n_lists;
  uint32_t dim;
} udf_ivf_accumulate_args_v1;

/* udf_ivf_index_v1_coarse_keys: keys[r * n_lists + c] for every row r and
 * centroid c: the squared L2 distance (metric L2) or minus the dot product
 * (IP), so that smaller is nearer; NaN becomes +inf.  Rows are read in their
 * own element type (0 f32, 1 f16, 2 i8, 3 u8) with a row stride, so queries
 * need no conversion.  A tile of UDF_IVF_COARSE_V1_ROWS rows x
 * UDF_IVF_COARSE_V1_CENTROIDS centroids per block:
 * grid = (ceil(n_lists / CENTROIDS), ceil(n_rows / ROWS)), no dynamic shared
 * memory.
 * udf_ivf_index_v1_coarse_keys_few: the same keys, bit for bit (same
 * summation order), for few rows (small search batches): a block per
 * UDF_IVF_COARSE_FEW_V1_CENTROIDS centroids x UDF_IVF_COARSE_FEW_V1_ROWS rows,
 * grid = (ceil(n_lists / CENTROIDS), ceil(n_rows / ROWS)), no dynamic shared
 * memory.
 * udf_ivf_index_v1_coarse_keys_inline (udf_ivf_coarse_inline_args_v1): the
 * few-rows kernel for rows passed in the launch's parameters (dense, at most
 * UDF_IVF_COARSE_INLINE_V1_BYTES): a host query of a tiny search needs no
 * copy before the coarse probe.  Block (0, 0) also stores the rows' words at
 * rows_out, for the kernels after it; same grid and keys as coarse_keys_few. */
#define UDF_IVF_COARSE_INLINE_V1_BYTES 1024u
#define UDF_IVF_COARSE_FEW_V1_CENTROIDS 32u
#define UDF_IVF_COARSE_FEW_V1_ROWS 8u
#define UDF_IVF_COARSE_V1_ROWS 32u
#define UDF_IVF_COARSE_V1_CENTROIDS 64u
typedef struct udf_ivf_coarse_keys_args_v1 {
  const void *rows;        /* [n_rows][row_stride] elements of row_elem */
  const float *centroids;  /* [n_lists][dim], 16-byte aligned */
  float *keys;             /* [n_rows][n_lists] */
  uint64_t row_stride;     /* elements */
  uint32_t n_rows;
  uint32_t dim;
  uint32_t n_lists;
  uint32_t metric;
  uint32_t row_elem;
  uint32_t reserved;
} udf_ivf_coarse_keys_args_v1;

/* udf_ivf_index_v1_nearest: for each row, its n_out (1 ..
 * UDF_IVF_NEAREST_V1_MAX_OUT) nearest centroids, nearest first, ties to the
 * smaller list, and their distances: what coarse_keys then select write, bit
 * for bit (the same keys in the same order), without the keys in memory --
 * the build's assignment and k-means.  A block of UDF_IVF_INDEX_V1_THREADS
 * threads per UDF_IVF_NEAREST_V1_ROWS rows scans every centroid,
 * UDF_IVF_COARSE_V1_CENTROIDS at a time; grid = ceil(n_rows / ROWS), no
 * dynamic shared memory.
 * udf_ivf_index_v1_nearest_wide: the same result, bit for bit, for many
 * centroids: a block of UDF_IVF_NEAREST_WIDE_V1_THREADS threads per
 * UDF_IVF_NEAREST_WIDE_V1_ROWS rows scans them as many at a time;
 * grid = ceil(n_rows / WIDE_ROWS), no dynamic shared memory. */
#define UDF_IVF_NEAREST_V1_ROWS 64u
#define UDF_IVF_NEAREST_V1_MAX_OUT 16u
#define UDF_IVF_NEAREST_WIDE_V1_ROWS 128u
#define UDF_IVF_NEAREST_WIDE_V1_THREADS 256u
typedef struct udf_ivf_nearest_args_v1 {
  udf_ivf_coarse_keys_args_v1 k; /* k.keys unused */
  uint32_t *out_lists;           /* [n_rows][n_out] */
  float *out_dists;              /* [n_rows][n_out], or null */
  const float *centroid_norms;   /* [n_lists] squared norms (expanded only) */
  uint32_t n_out;
  uint32_t expanded;             /* L2 as |x|^2 + |c|^2 - 2 x.c (k-means: one FMA a
                                    dimension; keys not the coarse probe's bits) */
} udf_ivf_nearest_args_v1;

typedef struct udf_ivf_coarse_inline_args_v1 {
  udf_ivf_coarse_keys_args_v1 k;  /* k.rows unused (the rows are `words`), k.row_stride = dim */
  uint32_t *rows_out;             /* where block (0, 0) stores the n_words words (4-byte aligned) */
  uint32_t n_words;               /* the rows' bytes / 4, rounded up (<= UDF_IVF_COARSE_INLINE_V1_BYTES / 4) */
  uint32_t reserved;
  uint32_t words[UDF_IVF_COARSE_INLINE_V1_BYTES / 4];
} udf_ivf_coarse_inline_args_v1;

/* udf_ivf_index_v1_select: per row (one block each), the n_out smallest keys
 * of keys[r][0 .. n_lists), nearest first, ties to the smaller list (each
 * warp's best in registers, merged, when n_out <= 32; a radix select, then a
 * sort of the chosen, when n_out <= UDF_IVF_SELECT_V1_FEW; a full sort
 * above; the same result either way); writes
 * out_lists[r * n_out + i] and, when out_dists is not null, the distance
 * (the key; minus the key for IP).  Dynamic shared memory =
 * UDF_IVF_SELECT_V1_SMEM_BYTES(sort_size) (none needed for n_out <= 32).
 *
 * udf_ivf_index_v1_select_gather, for batches (n_out <=
 * UDF_IVF_SELECT_V1_FEW): the same result through a bound and a sort of the
 * keys under it (up to UDF_IVF_SELECT_V1_GATHER of them, else the paths
 * above, reading the row where they keep it in shared memory).  Dynamic
 * shared memory = UDF_IVF_SELECT_V1_GATHER_SMEM_BYTES.
 *
 * udf_ivf_index_v1_select_wide, n_out <= 32: the same result in blocks of
 * UDF_IVF_SELECT_DIRECT_V1_THREADS (the direct kernel's selection below,
 * without its schedule), no dynamic shared memory.
 *
 * DIRECT SCHEDULE (udf_ivf_index_v1_select_direct, blocks of
 * UDF_IVF_SELECT_DIRECT_V1_THREADS, the same result; for n_out <= 32 a bound
 * and a rank of the keys under it, docs/runtime.md; for
 * tiny search batches): each block also writes its query's part of a
 * query-major schedule, so no schedule kernels run.  Row r owns items and candidate rows
 * [r * n_out * tiles, (r + 1) * n_out * tiles); an item scans tile t of its
 * probe's list, groups [t * tile_groups, (t + 1) * tile_groups) of 32 slots
 * (clamped by the scan), for query r alone (its pair i = {r, i}: row i).
 *   row_ranges null: every probe j has `tiles` tiles, item i = (r * n_out +
 *     j) * tiles + t (a tile past the list's end scans nothing and its row
 *     gets k padded candidates); query_rows[r] = r * n_out * tiles (and
 *     query_rows[n_rows] the total), for the merge kernel.
 *   row_ranges set (scans with a tail merge): probe j has max(1, ceil(groups
 *     / tile_groups)) tiles (at most `tiles`), the probes' tiles one after
 *     the other from r's first item; r's remaining items are written empty;
 *     row_ranges[r] = {first row, one past the last}.
 * query_stats[r] = {scored (u64: the probed lists' vectors), groups read
 * (u64)} as four words.  One pass only (n_rows rows from row 0). */
typedef struct udf_ivf_select_args_v1 {
  const float *keys;       /* [n_rows][n_lists] */
  uint32_t *out_lists;     /* [n_rows][n_out] */
  float *out_dists;        /* [n_rows][n_out] or null */
  uint32_t n_rows;
  uint32_t n_lists;
  uint32_t n_out;          /* 1 .. n_lists */
  uint32_t metric;
  uint32_t sort_size;      /* power of two >= n_lists, >= 2 */
  uint32_t tiles;          /* direct schedule: tiles per probe, >= 1 */
  uint32_t tile_groups;    /* direct schedule: groups of 32 slots per tile, >= 1 */
  const uint32_t *list_sizes;  /* direct schedule: [n_lists] */
  void *sched_items;       /* udf_ivf_work_item_v1 [n_rows * n_out * tiles] */
  void *sched_pairs;       /* udf_ivf_pair_v1 [n_rows * n_out * tiles] */
  uint32_t *query_rows;    /* [n_rows + 1] (row_ranges null) */
  uint32_t *query_stats;   /* [n_rows][4] */
  uint32_t *row_ranges;    /* [n_rows][2] or null */
} udf_ivf_select_args_v1;
#define UDF_IVF_SELECT_V1_SMEM_BYTES(sort_size) (8u * (sort_size))
/* The largest n_out of the radix select and of udf_ivf_index_v1_select_gather,
 * which sorts up to UDF_IVF_SELECT_V1_GATHER keys of a row. */
#define UDF_IVF_SELECT_V1_FEW 256u
#define UDF_IVF_SELECT_V1_GATHER 2048u
#define UDF_IVF_SELECT_V1_GATHER_SMEM_BYTES (8u * UDF_IVF_SELECT_V1_GATHER)

/* The list layout (docs/kernels.md), built and read on the GPU.
 * udf_ivf_index_v1_list_rows: between rows and slots of the layout.  Slot s
 * of the lists is in group s / 32, lane s % 32; a row's 16-byte chunk j sits
 * at data + (s / 32) * group_bytes + j * 512 + (s % 32) * 16.
 *   direction 0 (scatter): rows[r] -> slot slots[r] (bytes past row_bytes
 *     in the row's last chunk are written as zero), ids[r] -> list_ids[slot]
 *     (ids null: next_id + r); a row whose slot is UDF_IVF_INDEX_V1_NO_SLOT is
 *     skipped.
 *   direction 1 (gather): slot slots[r] -> rows[r], each row written as
 *     `chunks` whole chunks (rows row_stride bytes apart, a multiple of 16),
 *     list_ids[slot] -> ids[r].
 * Any grid (grid-stride over n_rows * chunks threads); no dynamic shared
 * memory.
 * udf_ivf_index_v1_move_lists: a block per list l < n_lists copies the
 * first old_sizes[l] slots of list l (whole groups, and their ids) from
 * old_offsets[l] in the old layout to new_offsets[l] in the new one (both
 * multiples of 32); grid = n_lists. */
typedef struct udf_ivf_list_rows_args_v1 {
  void *rows;                 /* [n_rows], row_stride bytes apart */
  void *ids;                  /* int64 [n_rows]; scatter may pass null */
  const uint32_t *slots;      /* [n_rows] */
  void *data;                 /* the lists' slots */
  void *list_ids;             /* int64 per slot */
  uint64_t row_stride;        /* bytes; gather: a multiple of 16 */
  uint64_t group_bytes;       /* 32 * chunks * 16 */
  uint64_t next_id;           /* scatter without ids */
  uint32_t n_rows;
  uint32_t row_bytes;         /* dim * element bytes */
  uint32_t chunks;            /* 16-byte chunks of a slot: dim_padded * element bytes / 16 */
  uint32_t direction;         /* 0 scatter, 1 gather */
} udf_ivf_list_rows_args_v1;

/* ROWS (exact search and refine: the rows scans, ivf_flat_v1.h ROWS LAYOUT,
 * over a dataset of n_rows rows).  One argument block, four kernels:
 *   udf_ivf_index_v1_rows_iota        ids[s] = s for s < n_rows, 0 up to
 *                                     n_slots (the last group's padding names row 0); any grid
 *   udf_ivf_index_v1_rows_probes      probes[q * n_probes + p] = p
 *                                     (exact search: every query probes every list); any grid
 *   udf_ivf_index_v1_rows_candidates  one block a query (grid n_queries): the query's m candidate
 *                                     ids, -1 and repeats dropped (the first kept), in order, into
 *                                     ids[q * m_pad ..] (the rest 0), their count into sizes[q],
 *                                     q * m_pad into offsets[q]; an id below -1 or at or above
 *                                     n_rows is dropped too, and *bad lowered to its position
 *                                     q * m + j (atomicMin; set it to ~0 first)
 *   udf_ivf_index_v1_rows_direct      refine's direct schedule (DIRECT SCHEDULE above, one tile a
 *                                     probe, the whole list): for the chunk's rows r = row0 ..
 *                                     row0 + n_queries - 1, item and pair r scan list list_base + r
 *                                     (sizes: the list sizes) for query r alone; row_ranges[r] =
 *                                     {r, r + 1} when set, else query_rows[r] = r (and
 *                                     query_rows[chunk_rows] = chunk_rows); query_stats[r] as there;
 *                                     any grid */
typedef struct udf_ivf_rows_args_v1 {
  long long *ids;
  uint32_t *probes;
  uint32_t *sizes;
  uint64_t *offsets;
  unsigned long long *bad;
  const long long *candidates; /* [n_queries] rows, cand_stride elements apart */
  uint64_t cand_stride;
  uint64_t n_rows;
  uint64_t n_slots;
  uint32_t n_queries;
  uint32_t n_probes;
  uint32_t list_base;         /* rows_direct: the list of row 0 */
  uint32_t m;
  uint32_t m_pad;             /* m rounded up to 32 */
  void *sched_items;          /* rows_direct: udf_ivf_work_item_v1 [chunk_rows] */
  void *sched_pairs;          /* rows_direct: udf_ivf_pair_v1 [chunk_rows] */
  uint32_t *query_rows;       /* rows_direct: [chunk_rows + 1] (row_ranges null) */
  uint32_t *query_stats;      /* rows_direct: [chunk_rows][4] */
  uint32_t *row_ranges;       /* rows_direct: [chunk_rows][2] or null */
  uint32_t row0;              /* rows_direct: the first row written */
  uint32_t chunk_rows;        /* rows_direct: the chunk's rows */
} udf_ivf_rows_args_v1;

typedef struct udf_ivf_move_lists_args_v1 {
  const void *old_data;
  void *new_data;
  const void *old_ids;        /* int64 per slot */
  void *new_ids;
  const uint64_t *old_offsets;
  const uint64_t *new_offsets;
  const uint32_t *old_sizes;
  uint64_t group_bytes;
  uint32_t n_lists;
  uint32_t reserved;
} udf_ivf_move_lists_args_v1;

/* SHARD MERGE (kernels/shard_merge.cuh): the k best of each query's rows
 * of `shards` shards' results (each row its shard's k best, nearest first,
 * padded with the worst distance), as one index over all the shards' lists
 * orders them.  Ties: with keys NULL (shards by lists) to the smaller
 * shard; with keys (shards by vectors) to the smaller key, the one index's
 * (list << 32 | position in the list), then the smaller shard.  Shard s's
 * row of query q is at s * shard_stride + q * k in dists, ids and keys.
 * Grid-stride over shards * n_queries * k threads. */
typedef struct udf_ivf_shard_merge_args_v1 {
  const float *dists;
  const long long *ids;
  float *out_dists;           /* [n_queries][k] */
  long long *out_ids;
  uint64_t shard_stride;      /* elements between two shards' results */
  uint32_t shards;
  uint32_t n_queries;
  uint32_t k;
  uint32_t max_order;         /* 1: larger distances are nearer */
  const long long *keys;      /* NULL, or the rows' tie keys (-1 in padding) */
} udf_ivf_shard_merge_args_v1;

/* RESOLVE KEYS (shards by vectors): ids[i] = the id of the slot whose tie
 * key is keys[i] (-1 for -1): a binary search of the key's list, list =
 * key >> 32, in slot_keys (per slot, ascending within each list).
 * Grid-stride over n threads. */
typedef struct udf_ivf_resolve_keys_args_v1 {
  const long long *keys;      /* [n] */
  long long *ids;             /* [n] */
  const long long *slot_keys; /* [slots] the index's tie keys */
  const long long *slot_ids;  /* [slots] the index's ids */
  const uint64_t *offsets;    /* [n_lists] first slot of each list */
  const uint32_t *sizes;      /* [n_lists] */
  uint64_t n;
  uint32_t n_lists;
  uint32_t reserved;
} udf_ivf_resolve_keys_args_v1;

/* The list-major schedule of a search (docs/kernels.md), built on the GPU
 * from the probes [n_queries][n_probes].  Small batches: one launch of
 * udf_ivf_index_v1_sched_small (1 block of UDF_IVF_SCHED_V1_PLAN_THREADS)
 * runs every phase.  Large ones, after clearing counts, fill and items:
 *   sched_count         any grid (grid-stride): counts[l] = pairs of list l
 *   sched_plan          1 block of PLAN_THREADS: per list its tiles and the
 *                       starts of its queries, items and pairs;
 *                       header = {n_items, n_pairs, tile, 0, scored (u64:
 *                       the vectors of the probed lists, summed over the
 *                       queries), groups read (u64: groups of 32 slots the
 *                       items read, each item once for all its queries)}
 *   sched_scatter_rows  any grid: by_list[list_start[l] + fill[l]++] = q * n_probes + j;
 *                       a warp per query: row_offset[q][j], rows of q
 *   sched_query_rows    1 block of PLAN_THREADS: query_rows = exclusive scan
 *   sched_fill          any grid: items and pairs
 * All use blocks of UDF_IVF_INDEX_V1_THREADS except those of PLAN_THREADS.
 * sched_count and sched_scatter_rows take 0 bytes of dynamic shared memory
 * (a global add a pair), or 4 a schedule list (BLOCK HISTOGRAMS: the first
 * max(1, min(grid, pairs / (8 * lists))) blocks each count a run of pairs in
 * shared memory and add each list's count once).
 * The order of a list's queries in by_list (hence which queries share an
 * item) depends on atomics; results do not: each (query, slot) is scored the
 * same way in any item.  Items past n_items must be zero (the runtime clears
 * the buffer): an item with pair_count 0 and group_end 0 does nothing, so the
 * scan may be launched on an upper bound of items.  Every list with queries
 * and vectors gets ceil(count / qpi) * tiles items; tiles = 1 unless the
 * batch has fewer items than `target` (4 per SM), then lists are cut into
 * tiles of max(4, ceil(probed groups / target)) groups of 32 slots (at least
 * enough that the extra rows fit rows_extra).
 * NEAR FIRST (near_first = 1): each query's first probe (its nearest list)
 * is scheduled before all other pairs, as if it were a list of its own: the
 * per-list arrays (counts .. pair_start) then hold 2 * n_lists entries, list
 * l's first probes at l and its other pairs at n_lists + l.  A pruning scan
 * then meets most pairs with the bound of the query's nearest list already
 * published. */
#define UDF_IVF_SCHED_V1_PLAN_THREADS 1024u
#define UDF_IVF_SCHED_V1_HEADER_WORDS 8u
typedef struct udf_ivf_sched_args_v1 {
  const uint32_t *probes;      /* [n_queries][n_probes] */
  const uint32_t *list_sizes;  /* [n_lists] */
  uint32_t *counts;            /* [n_lists] pairs per list */
  uint32_t *fill;              /* [n_lists] zeroed with counts */
  uint32_t *list_start;        /* [n_lists] exclusive scan of counts (by_list) */
  uint32_t *tiles;             /* [n_lists] tiles of each list (0: no items) */
  uint32_t *item_start;        /* [n_lists] first item of each list */
  uint32_t *pair_start;        /* [n_lists] first pair of each list */
  uint32_t *header;            /* [UDF_IVF_SCHED_V1_HEADER_WORDS], above */
  uint32_t *by_list;           /* [n_queries * n_probes] q * n_probes + j, grouped by list */
  uint32_t *row_offset;        /* [n_queries][n_probes] first row of (q, j) relative to q's */
  uint32_t *query_rows;        /* [n_queries + 1] */
  void *items;                 /* udf_ivf_work_item_v1 [items_max] (zeroed) */
  void *pairs;                 /* udf_ivf_pair_v1 [rows_max] */
  uint32_t n_queries;
  uint32_t n_probes;
  uint32_t n_lists;
  uint32_t qpi;                /* queries per item, 1 .. 64 */
  uint32_t target;             /* items below which lists are tiled (4 per SM) */
  uint32_t rows_extra;         /* rows allowed beyond n_queries * n_probes for tiles */
  uint32_t items_max;          /* items[] entries (sched_small zeroes them) */
  uint32_t near_first;         /* 0, or 1: NEAR FIRST, above */
} udf_ivf_sched_args_v1;

#endif /* UDF_KERNELS_IVF_INDEX_V1_H */

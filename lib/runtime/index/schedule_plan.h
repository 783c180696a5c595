// The schedule plan (index/search_schedule.cpp, plan_schedule): before a chunk's coarse
// probe the runtime decides how its scan is cut into work items: the
// queries an item takes, the scan's shared memory under the device's limit,
// a direct (query-major) or a list-major schedule (and the direct one's tile
// size), and the list-major schedule's bounds on items and rows.  These are
// the decisions alone, on plain numbers: header-only and free of CUDA, so
// that the rules are tested on the CPU (test/unit/schedule_plan_test.cpp).
// plan_schedule applies them: the scratch, the argument blocks, the scan's
// shared-memory attribute.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "udf/artifact/types.h"
#include "module/sort_capacity.h"
#include "udf/kernels/ivf_flat_v1.h"
#include "udf/kernels/ivf_index_v1.h"

namespace udf::rt {

// Items below which a schedule cuts lists into tiles (ivf_index_v1.h) and
// under which a tiny batch takes a direct schedule: 4 per SM.
inline std::uint32_t item_target(int sm_count) { return 4u * static_cast<std::uint32_t>(sm_count); }

// Queries per item from the mean queries per probed list: a power of two up
// to the variant's recommendation, rounded down (v1, state) or up (vector,
// whose staging each extra query of an item shares).  `shape`: the metric's (none: ABI v1); `state_words`: a state
// metric's words kept per (query, thread); `recommended_qpi`: the scan
// variant's; `k_max`: its k bucket.  (A search's queries_per_item, when not
// 0, is taken as it is.)
//
// A v1 scan of warp lists (k_max 32) recommended 8 takes 12 where a list
// has at least 24 queries on average (two items of 12 or more): three
// four-query folds share each vector's loads and each item's start and end.
// Where lists hold many more queries, 16 (list_major_qpi, once the scan is
// chosen).
inline std::uint32_t queries_per_item(std::uint32_t nq, std::uint32_t probes, std::uint32_t n_lists, int recommended_qpi,
                                      std::optional<MetricShape> shape, std::uint32_t state_words, std::uint32_t k_max) {
  const double per_list = double(nq) * probes / n_lists;
  std::uint32_t rec = static_cast<std::uint32_t>(std::min(8, std::max(1, recommended_qpi)));
  // The variant's recommendation for a state scan assumes all 8 state words
  // (4 queries an item, where v1 takes 8); a state of 1 or 2 words costs
  // what v1's accumulator does, so it takes v1's count.
  if (shape == MetricShape::State && state_words <= 2) rec = std::min(8u, 2 * rec);
  std::uint32_t q = 1;
  while (q < rec && q < per_list) q <<= 1;  // the power of two at or above per_list
  if (shape != MetricShape::Vector && q > per_list && q > 1) q >>= 1;
  if (!shape && k_max <= 32 && q == 8 && per_list >= 24) q = 12;
  return q;
}

// A list-major search's queries per item once its scan is chosen: a plain
// (not pruning) v1 warp-list scan given 12 takes 16 where a list has 1024
// or more queries on average (64 items of 16).  The pruning scan, and lists
// with fewer queries, keep 12: there 16 does not pay.  Exact search's lists
// (`exact`: tiles of the dataset, each scanned by every query, so each item
// is long) take 16 from 32 queries (two items of 16).
inline std::uint32_t list_major_qpi(std::uint32_t qpi, std::uint32_t nq, std::uint32_t probes, std::uint32_t n_lists,
                                    bool prune_scan, bool exact = false) {
  const double per_list = double(nq) * probes / n_lists;
  return qpi == 12 && !prune_scan && per_list >= (exact ? 32 : 1024) ? 16u : qpi;
}

// The coarse probe's selection of a batch (index/coarse.cpp; the kernels in
// ivf_index_v1.h): which kernel selects a pass of `rows` queries' n_out
// probes.  For n_out <= 32: from four rows an SM the bound and sort
// (select_gather); below, blocks are few and each one's latency counts, so
// a 1024-thread block a row that reads the row's keys at once (select_wide).
// For n_out up to UDF_IVF_SELECT_V1_FEW the bound and sort where the lists
// are at least 64 a probe (groups of 32 keys or more, so the bound gathers
// a small part of the row); with fewer lists, and above, the select
// kernel's radix select or full sort in shared memory.
enum class SelectKernel { plain, gather, wide };
inline SelectKernel select_kernel(int sm_count, std::uint32_t rows, std::uint32_t n_lists, std::uint32_t n_out) {
  if (n_out <= 32) return rows >= 4u * static_cast<std::uint32_t>(std::max(sm_count, 1)) ? SelectKernel::gather : SelectKernel::wide;
  return n_out <= UDF_IVF_SELECT_V1_FEW && n_lists >= 64u * n_out ? SelectKernel::gather : SelectKernel::plain;
}

// Exact search's tiles (the rows index's lists): enough that its work items
// (a tile and up to 16 queries each; 12 counted here) come to about 128 an
// SM -- many rounds of the blocks an SM holds, so that the last round's
// stragglers cost little -- as a power of two from 16 to 1024 (no more than
// that: each item pays its own start and end, and each tile gives each
// query a row of k candidates to merge), and 64 for k above 32.
inline std::uint64_t exact_tiles(int sm_count, std::int64_t n_queries, std::uint32_t k) {
  const std::uint64_t chunks = std::max<std::uint64_t>(1, (std::uint64_t(std::max<std::int64_t>(n_queries, 1)) + 11) / 12);
  const std::uint64_t want = (128 * std::uint64_t(std::max(sm_count, 1)) + chunks - 1) / chunks;
  return std::clamp<std::uint64_t>(std::bit_ceil(want), k > 32 ? 64 : 16, k > 32 ? 64 : 1024);
}

// The rows of each of exact search's tiles (the last one takes what is
// left): n_rows cut into `tiles`, at least 1024, and a multiple of two
// steps of the scan's block (a step is a group of 32 rows a warp), so that
// every tile but the last folds whole pairs of steps (TILED PAIR,
// ivf_flat_v1.h) and none ends in a step that leaves most warps idle.
inline constexpr std::uint64_t kExactTileRowsMin = 1024;
inline constexpr std::uint64_t kExactTileRowsStep = 2 * UDF_IVF_V1_BLOCK_THREADS;
inline std::uint64_t exact_tile_rows(std::uint64_t n_rows, std::uint64_t tiles) {
  const std::uint64_t even = (n_rows + std::max<std::uint64_t>(tiles, 1) - 1) / std::max<std::uint64_t>(tiles, 1);
  return std::max(kExactTileRowsMin, (even + kExactTileRowsStep - 1) / kExactTileRowsStep * kExactTileRowsStep);
}

// Rows an ABI v2 vector scan stages a warp at a time: enough that rows x
// queries fill the 32 lanes (ivf_flat_v1.h).  0 for v1 and state scans.
inline std::uint32_t stage_rows_for(std::optional<MetricShape> shape, std::uint32_t qpi) {
  return shape != MetricShape::Vector ? 0u : qpi >= 32 ? 1u : 32u / std::bit_ceil(qpi);
}

// The scan's dynamic shared memory and what it was fitted with.
struct ScanSmem {
  std::uint32_t qpi = 1;
  std::uint32_t stage_rows = 0;
  std::size_t bytes = 0;
};

// Fits the scan's shared memory, smem(qpi, stage_rows) bytes, under `limit`:
// over it, fewer staged rows first (vector), then fewer queries per item,
// halving one at a time.  Stops at 1 query an item and at most 1 staged
// row, over the limit or not (the launch then refuses it).
template <class Smem>
ScanSmem fit_scan_smem(std::optional<MetricShape> shape, std::uint32_t qpi, std::size_t limit, Smem&& smem) {
  ScanSmem s;
  s.qpi = qpi;
  s.stage_rows = stage_rows_for(shape, qpi);
  s.bytes = smem(s.qpi, s.stage_rows);
  while (s.bytes > limit && (s.qpi > 1 || s.stage_rows > 1)) {
    if (s.stage_rows > 1) s.stage_rows /= 2;
    else s.qpi /= 2;
    s.bytes = smem(s.qpi, s.stage_rows);
  }
  return s;
}

// A direct schedule's tiles: each probe in up to `tiles` tiles of
// `tile_groups` groups of 32 slots.
struct DirectTiles {
  std::uint32_t tile_groups = 4;
  std::uint32_t tiles = 1;
};

// Tiny batches (fewer pairs than `target` items): no schedule kernels (one
// launch fewer and none of sched_small's chain of dependent global reads).
// Each probe is cut into tiles of 4 groups (one step of the scan's 4 warps;
// more when that would pass 2 * target items); items are launched on the
// longest list's tile count a probe.  Larger batches keep the list-major
// order, whose items read a list together.
//
// For k above 32 a tile starts at 4 * ceil(2k / 32) groups, so that each
// warp folds at least 2k vectors of it: every item hands the query's tail
// merge up to k rows, and with one group per warp no warp ever holds k
// candidates, so it never publishes a query bound that would keep other
// items' rows out, and the merge of all those rows in one block would be
// most of the search.  Smaller again while fewer than 32 items would be
// left (a single query at few probes).  At k <= 32 larger tiles only cost,
// so those keep 4.
// Direct only at one query an item (direct_schedule); none: the list-major schedule.
inline bool direct_schedule(std::uint32_t qpi, std::uint64_t pairs, std::uint32_t target) { return qpi == 1 && pairs < target; }
inline std::optional<DirectTiles> direct_tiles(std::uint32_t qpi, std::uint64_t pairs, std::uint32_t target,
                                               std::uint32_t max_list_size, std::uint32_t k) {
  if (!direct_schedule(qpi, pairs, target)) return std::nullopt;
  const std::uint64_t max_groups = std::max<std::uint64_t>(1, (std::uint64_t(max_list_size) + 31) / 32);
  std::uint64_t tile = k > 32 ? 4 * ((2ull * k + 31) / 32) : 4;
  // ... but not so large that fewer than 32 items are left (a single query at P8).
  while (tile > 4 && pairs * ((max_groups + tile - 1) / tile) < 32) tile -= 4;
  while (pairs * ((max_groups + tile - 1) / tile) > 2ull * target) tile += 4;
  DirectTiles d;
  d.tile_groups = static_cast<std::uint32_t>(tile);
  d.tiles = static_cast<std::uint32_t>((max_groups + tile - 1) / tile);
  return d;
}

// A list-major schedule's bounds.  Item and row counts are known only on the
// GPU: the scan is launched on upper bounds (the schedule's comment in
// ivf_index_v1.h): items <= max(untiled, 2 * target), rows <= pairs +
// rows_extra.
struct ListMajorBounds {
  std::uint32_t sched_lists = 0;  // the schedule's lists: 2 * n_lists with near first
  std::uint64_t untiled = 0;      // items without tiles
  std::uint64_t items_max = 0;
  std::uint64_t rows_extra = 0;   // rows tiles may add beyond the pairs
  std::uint64_t rows_max = 0;
  bool fits = true;               // rows_max fits the schedule's 32-bit rows
  // One buffer: counts, fill, list_start, tiles, item_start, pair_start
  // (sched_lists each), header, by_list and row_offset (pairs each),
  // query_rows (nq + 1).
  std::size_t sched_words = 0;
};

// Near first (ivf_index_v1.h; a pruning scan's schedule): each query's
// nearest list is a list of its own, doubling the schedule's lists.
inline ListMajorBounds list_major_bounds(std::uint32_t nq, std::uint32_t probes, std::uint32_t n_lists,
                                         std::uint32_t qpi, std::uint32_t target, bool near_first) {
  ListMajorBounds b;
  const std::uint64_t pairs = std::uint64_t(nq) * probes;
  b.sched_lists = near_first ? 2 * n_lists : n_lists;
  b.untiled = std::min<std::uint64_t>(pairs, (pairs + qpi - 1) / qpi + std::min<std::uint64_t>(b.sched_lists, pairs));
  b.items_max = std::max<std::uint64_t>(b.untiled, 2ull * target);
  b.rows_extra = 2ull * target * qpi;
  b.rows_max = pairs + b.rows_extra;
  b.fits = b.rows_max < 0xFFFFFFFFull;
  b.sched_words = 6 * std::size_t(b.sched_lists) + UDF_IVF_SCHED_V1_HEADER_WORDS + 2 * pairs + nq + 1;
  return b;
}

}  // namespace udf::rt

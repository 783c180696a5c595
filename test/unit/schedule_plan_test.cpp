// The schedule plan (lib/runtime/index/schedule_plan.h): how a search chunk's scan is
// cut into work items -- queries per item, the scan's shared memory, direct
// or list-major schedule, the list-major bounds.  No GPU: the rules alone.
#include "index/schedule_plan.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "udf/kernels/ivf_flat_v1.h"

using udf::MetricShape;
using namespace udf::rt;

namespace {

constexpr std::optional<MetricShape> kV1 = std::nullopt;  // an ABI v1 metric has no shape
constexpr int kH100Sms = 132;
constexpr std::size_t kH100Limit = 232448 - 1024;  // max_smem_optin (227 KiB) less what plan_schedule keeps back

}  // namespace

TEST(SchedulePlan, QueriesPerItemRoundsTheMeanQueriesPerListDownForV1AndStateUpForVector) {
  // Batch 100 at P32 of 1024 lists: 3.125 queries a list.
  EXPECT_EQ(queries_per_item(100, 32, 1024, 8, kV1, 0, 100), 2u);
  EXPECT_EQ(queries_per_item(100, 32, 1024, 8, MetricShape::Vector, 0, 100), 4u);
  EXPECT_EQ(queries_per_item(100, 32, 1024, 4, MetricShape::State, 8, 100), 2u);
  // A mean that is a power of two is taken as it is (64 x 32 / 1024 = 2).
  EXPECT_EQ(queries_per_item(64, 32, 1024, 8, kV1, 0, 100), 2u);
  EXPECT_EQ(queries_per_item(64, 32, 1024, 8, MetricShape::Vector, 0, 100), 2u);
  // Under one query a list: one an item, whatever the shape.
  EXPECT_EQ(queries_per_item(1, 32, 1024, 8, kV1, 0, 100), 1u);
  EXPECT_EQ(queries_per_item(1, 32, 1024, 8, MetricShape::Vector, 0, 100), 1u);
  // Batch 10k (312.5 a list): the recommendation caps it.
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 8, kV1, 0, 100), 8u);
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 4, MetricShape::Vector, 0, 100), 4u);
}

TEST(SchedulePlan, AV1WarpListScanTakes12WhereAListHasAtLeast24Queries) {
  // Batch 10k at P32 of 1024 lists (312.5 a list): 12 for k_max 32 ...
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 8, kV1, 0, 32), 12u);
  // ... 8 from 24 queries a list down to 8, and for the block merge's buckets.
  EXPECT_EQ(queries_per_item(768, 32, 1024, 8, kV1, 0, 32), 12u);   // 24 a list
  EXPECT_EQ(queries_per_item(767, 32, 1024, 8, kV1, 0, 32), 8u);    // just under
  EXPECT_EQ(queries_per_item(256, 32, 1024, 8, kV1, 0, 32), 8u);    // 8 a list
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 8, kV1, 0, 64), 8u);
  // Only v1 scans recommended 8: not vector or state ones, nor a smaller recommendation.
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 8, MetricShape::Vector, 0, 32), 8u);
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 8, MetricShape::State, 1, 32), 8u);
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 4, kV1, 0, 32), 4u);
}

TEST(SchedulePlan, APlainListMajorScanGiven12Takes16WhereAListHasAtLeast1024Queries) {
  // Batch 10k at P128 of 1024 lists (1250 a list): 16 for the plain scan, 12 for the pruning one.
  EXPECT_EQ(list_major_qpi(12, 10000, 128, 1024, false), 16u);
  EXPECT_EQ(list_major_qpi(12, 10000, 128, 1024, true), 12u);
  // From 1024 a list: 8192 x 128 / 1024 = 1024; one query fewer is under it.
  EXPECT_EQ(list_major_qpi(12, 8192, 128, 1024, false), 16u);
  EXPECT_EQ(list_major_qpi(12, 8191, 128, 1024, false), 12u);
  // P32 (312 a list) keeps 12; any other count is kept as it is.
  EXPECT_EQ(list_major_qpi(12, 10000, 32, 1024, false), 12u);
  EXPECT_EQ(list_major_qpi(8, 10000, 128, 1024, false), 8u);
  EXPECT_EQ(list_major_qpi(4, 100000, 128, 1024, false), 4u);
  // The two together, as plan_schedule applies them: queries_per_item's 12, then 16.
  EXPECT_EQ(list_major_qpi(queries_per_item(10000, 128, 1024, 8, kV1, 0, 32), 10000, 128, 1024, false), 16u);
  EXPECT_EQ(list_major_qpi(queries_per_item(10000, 128, 1024, 8, kV1, 0, 64), 10000, 128, 1024, false), 8u);
}

TEST(SchedulePlan, ExactSearchTakes16FromTwoItemsOf16ATile) {
  // Every tile holds every query: batch 32 over 1024 tiles is 32 a list.
  EXPECT_EQ(list_major_qpi(12, 32, 1024, 1024, false, true), 16u);
  EXPECT_EQ(list_major_qpi(12, 31, 1024, 1024, false, true), 12u);
  EXPECT_EQ(list_major_qpi(12, 100, 1024, 1024, false, true), 16u);
  // The pruning scan and other counts as for an index.
  EXPECT_EQ(list_major_qpi(12, 100, 1024, 1024, true, true), 12u);
  EXPECT_EQ(list_major_qpi(8, 100, 1024, 1024, false, true), 8u);
  // An index's lists need 1024 a list.
  EXPECT_EQ(list_major_qpi(12, 100, 1024, 1024, false, false), 12u);
}

TEST(SchedulePlan, ExactTilesComeToAbout128ItemsAnSm) {
  // 132 SMs.  Batch 1 and 100: the most tiles (1024).
  EXPECT_EQ(exact_tiles(132, 1, 10), 1024u);
  EXPECT_EQ(exact_tiles(132, 100, 10), 1024u);  // 9 chunks of 12: 1878 wanted
  // Batch 1000: 84 chunks, 202 tiles wanted, 256.
  EXPECT_EQ(exact_tiles(132, 1000, 10), 256u);
  // Batch 5000: 417 chunks, 41 wanted, 64.  Batch 10k: 834 chunks, 21 wanted, 32.
  EXPECT_EQ(exact_tiles(132, 5000, 10), 64u);
  EXPECT_EQ(exact_tiles(132, 10000, 10), 32u);
  // Batch 100k: 2 wanted, the fewest (16).
  EXPECT_EQ(exact_tiles(132, 100000, 10), 16u);
  // A power of two, whatever the SM count.
  for (int sms : {1, 7, 46, 78, 108, 132, 170})
    for (int64_t n : {1, 5, 100, 777, 5000, 100000}) {
      const uint64_t t = exact_tiles(sms, n, 32);
      EXPECT_TRUE(std::has_single_bit(t) && t >= 16 && t <= 1024) << sms << " SMs, " << n << " queries: " << t;
    }
  // k above 32: 64 at any batch.
  EXPECT_EQ(exact_tiles(132, 1, 33), 64u);
  EXPECT_EQ(exact_tiles(132, 100, 1024), 64u);
  // No query and no SM count as one of each: 128 items wanted.
  EXPECT_EQ(exact_tiles(0, 0, 10), 128u);
}

TEST(SchedulePlan, ExactTilesAreWholePairsOfStepsOfAtLeast1024Rows) {
  EXPECT_EQ(kExactTileRowsStep, 256u);  // two steps of 4 warps' 32 rows
  // 1M rows in 32 tiles: 31250 each, 31488 (123 pairs of steps); 32 tiles cover them.
  EXPECT_EQ(exact_tile_rows(1000000, 32), 31488u);
  // Small datasets: one tile of 1024 rows or more.
  EXPECT_EQ(exact_tile_rows(100, 1024), 1024u);
  EXPECT_EQ(exact_tile_rows(5000, 1024), 1024u);
  EXPECT_EQ(exact_tile_rows(0, 0), 1024u);
  for (uint64_t n : {1ull, 1023ull, 1025ull, 99999ull, 1000000ull, 123456789ull, (1ull << 32) - 65})
    for (uint64_t tiles : {1ull, 16ull, 32ull, 64ull, 1000ull, 1024ull}) {
      const uint64_t rows = exact_tile_rows(n, tiles);
      EXPECT_EQ(rows % 256, 0u) << n << " rows, " << tiles << " tiles";
      EXPECT_GE(rows, 1024u);
      EXPECT_LE((n + rows - 1) / rows, tiles) << n << " rows, " << tiles << " tiles: " << rows << " a tile";
      EXPECT_LT(rows - 256, std::max<uint64_t>(1024, (n + tiles - 1) / tiles)) << "no larger than it needs to be";
    }
}

TEST(SchedulePlan, TheRecommendationIsClampedTo1Through8) {
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 0, kV1, 0, 100), 1u);
  EXPECT_EQ(queries_per_item(10000, 32, 1024, -3, MetricShape::Vector, 0, 100), 1u);
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 64, kV1, 0, 100), 8u);
}

TEST(SchedulePlan, AStateOfAtMostTwoWordsDoublesTheRecommendation) {
  // Batch 10k: the recommendation decides.  The state variant's 4 assumes 8 words.
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 4, MetricShape::State, 8, 100), 4u);
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 4, MetricShape::State, 3, 100), 4u);
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 4, MetricShape::State, 2, 100), 8u);
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 4, MetricShape::State, 1, 100), 8u);
  // Still at most 8; and only state scans (v1 / vector ignore state_words).
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 8, MetricShape::State, 1, 100), 8u);
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 4, kV1, 1, 100), 4u);
  EXPECT_EQ(queries_per_item(10000, 32, 1024, 2, MetricShape::Vector, 1, 100), 2u);
}

TEST(SchedulePlan, VectorScansStageEnoughRowsToFillAWarp) {
  EXPECT_EQ(stage_rows_for(MetricShape::Vector, 1), 32u);
  EXPECT_EQ(stage_rows_for(MetricShape::Vector, 2), 16u);
  EXPECT_EQ(stage_rows_for(MetricShape::Vector, 3), 8u);  // 3 queries round up to 4
  EXPECT_EQ(stage_rows_for(MetricShape::Vector, 8), 4u);
  EXPECT_EQ(stage_rows_for(MetricShape::Vector, 16), 2u);
  EXPECT_EQ(stage_rows_for(MetricShape::Vector, 32), 1u);
  EXPECT_EQ(stage_rows_for(MetricShape::Vector, 64), 1u);
  EXPECT_EQ(stage_rows_for(kV1, 1), 0u);
  EXPECT_EQ(stage_rows_for(MetricShape::State, 1), 0u);
}

TEST(SchedulePlan, SharedMemoryHalvesStagedRowsBeforeQueriesAndStopsAtOneAndOne) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> calls;
  auto smem = [&](std::uint32_t qpi, std::uint32_t rows) {
    calls.emplace_back(qpi, rows);
    return std::size_t(qpi) * 1000 + std::size_t(rows) * 100;
  };
  // 4 queries an item stage 8 rows: 4800 bytes.  Under 4100: rows 8 -> 4 -> 2 -> 1.
  ScanSmem s = fit_scan_smem(MetricShape::Vector, 4, 4100, smem);
  EXPECT_EQ(s.qpi, 4u);
  EXPECT_EQ(s.stage_rows, 1u);
  EXPECT_EQ(s.bytes, 4100u);
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> want = {{4, 8}, {4, 4}, {4, 2}, {4, 1}};
  EXPECT_EQ(calls, want);
  // Under 1000: then the queries, 4 -> 2 -> 1, and at 1 / 1 it stops over the limit.
  calls.clear();
  s = fit_scan_smem(MetricShape::Vector, 4, 1000, smem);
  EXPECT_EQ(s.qpi, 1u);
  EXPECT_EQ(s.stage_rows, 1u);
  EXPECT_EQ(s.bytes, 1100u);
  EXPECT_EQ(calls.size(), 6u);
  EXPECT_EQ(calls.back(), std::make_pair(1u, 1u));
  // v1 (no staged rows): the queries alone.
  calls.clear();
  s = fit_scan_smem(kV1, 8, 2500, smem);
  EXPECT_EQ(s.qpi, 2u);
  EXPECT_EQ(s.stage_rows, 0u);
  EXPECT_EQ(s.bytes, 2000u);
  // Within the limit: as it came, one evaluation.
  calls.clear();
  s = fit_scan_smem(MetricShape::State, 8, 8000, smem);
  EXPECT_EQ(s.qpi, 8u);
  EXPECT_EQ(s.bytes, 8000u);
  EXPECT_EQ(calls.size(), 1u);
}

TEST(SchedulePlan, SharedMemoryOfLargeScansOnAnH100) {
  // k 1024 (sort capacity 2048), dim 1024: a query of an item takes
  // 8 * 2048 + 32 + 512 + 4 * 1024 = 21024 bytes.
  const std::uint32_t S = UDF_IVF_V1_SORT_CAPACITY(1024u), dp = 1024;
  auto v1 = [&](std::uint32_t q, std::uint32_t) { return std::size_t(UDF_IVF_SCAN_V1_SMEM_BYTES(q, S, dp)); };
  ScanSmem s = fit_scan_smem(kV1, 16, kH100Limit, v1);  // 336384 bytes: over
  EXPECT_EQ(s.qpi, 8u);
  EXPECT_EQ(s.bytes, 168192u);
  // As a vector scan, 8 queries stage 4 rows of 1025 words a warp: 65600
  // bytes more, 233792 in all, over; 2 rows (32800 bytes) fit.
  auto vec = [&](std::uint32_t q, std::uint32_t rows) {
    return std::size_t(UDF_IVF_SCAN_V2_VECTOR_SMEM_BYTES(std::size_t(q), std::size_t(S), std::size_t(dp), std::size_t(rows)));
  };
  s = fit_scan_smem(MetricShape::Vector, 8, kH100Limit, vec);
  EXPECT_EQ(s.qpi, 8u);
  EXPECT_EQ(s.stage_rows, 2u);
  EXPECT_EQ(s.bytes, 200992u);
}

TEST(SchedulePlan, DirectOnlyAtOneQueryAnItemAndFewerPairsThanTheTarget) {
  const std::uint32_t target = item_target(kH100Sms);
  EXPECT_EQ(target, 528u);
  EXPECT_TRUE(direct_tiles(1, 32, target, 1200, 10).has_value());    // batch 1, P32
  EXPECT_TRUE(direct_tiles(1, 527, target, 1200, 10).has_value());
  EXPECT_FALSE(direct_tiles(1, 528, target, 1200, 10).has_value());  // as many pairs as the target
  EXPECT_FALSE(direct_tiles(2, 32, target, 1200, 10).has_value());   // two queries an item
}

TEST(SchedulePlan, DirectTilesGrowBy4GroupsWhileTheItemsPassTwiceTheTarget) {
  const std::uint32_t target = item_target(kH100Sms);  // 528; 2 * target = 1056 items
  // The longest list: 1200 vectors, 38 groups of 32.
  // Batch 1, P32: 32 pairs x 10 tiles of 4 groups = 320 items.
  std::optional<DirectTiles> d = direct_tiles(1, 32, target, 1200, 10);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tile_groups, 4u);
  EXPECT_EQ(d->tiles, 10u);
  // Batch 4, P32: 128 pairs x 10 tiles of 4 groups = 1280 items, over; x 5 tiles of 8 = 640.
  d = direct_tiles(1, 128, target, 1200, 10);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tile_groups, 8u);
  EXPECT_EQ(d->tiles, 5u);
  // Batch 16, P32: 512 pairs x (10, 5, 4, 3, 2) tiles of (4, 8, 12, 16, 20)
  // groups = 5120, 2560, 2048, 1536, 1024 items: 20 groups.
  d = direct_tiles(1, 512, target, 1200, 10);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tile_groups, 20u);
  EXPECT_EQ(d->tiles, 2u);
  // Empty lists: one group, one tile of 4.
  d = direct_tiles(1, 32, target, 0, 10);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tile_groups, 4u);
  EXPECT_EQ(d->tiles, 1u);
}

TEST(SchedulePlan, DirectTilesAboveK32LetEachWarpFoldTwiceKVectors) {
  const std::uint32_t target = item_target(kH100Sms);
  // k 32 and under: the k 10 rule (4 groups, one a warp).
  for (std::uint32_t k : {1u, 10u, 32u}) {
    std::optional<DirectTiles> d = direct_tiles(1, 32, target, 1200, k);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->tile_groups, 4u) << "k " << k;
  }
  struct Case {
    std::uint64_t pairs;
    std::uint32_t max_list_size, k, tile_groups, tiles;
    const char* why;
  };
  const Case cases[] = {
      {32, 1200, 100, 28, 2, "k 100: 4 warps x ceil(200 / 32) = 28 groups (224 vectors a warp), 2 tiles of 38 groups"},
      {32, 1200, 33, 12, 4, "k 33: 4 x ceil(66 / 32) = 12 groups"},
      {32, 1200, 1000, 252, 1, "k 1000: 252 groups, one tile (the whole list)"},
      {8, 1200, 100, 12, 4, "batch 1, P8: 28 groups would leave 8 x 2 = 16 items, 12 leave 8 x 4 = 32"},
      {2, 1200, 100, 4, 10, "batch 1, P2: never below 4 groups (2 x 10 = 20 items)"},
      {512, 1200, 100, 28, 2, "the item bound on top: 512 pairs x 2 tiles of 28 = 1024 <= 1056"},
      {512, 2000, 100, 32, 2, "63 groups: 512 x 3 tiles of 28 > 1056 items, so 32 groups, 2 tiles"},
  };
  for (const Case& c : cases) {
    const std::optional<DirectTiles> d = direct_tiles(1, c.pairs, target, c.max_list_size, c.k);
    ASSERT_TRUE(d) << c.why;
    EXPECT_EQ(d->tile_groups, c.tile_groups) << c.why;
    EXPECT_EQ(d->tiles, c.tiles) << c.why;
  }
}

TEST(SchedulePlan, ListMajorBounds) {
  const std::uint32_t target = item_target(kH100Sms);  // 528
  // Batch 100, P32 (3200 pairs), 1024 lists, 2 queries an item:
  // untiled = min(3200, 3200 / 2 + min(1024, 3200)) = 2624 >= 2 * target,
  // rows_extra = 2 * 528 * 2, words = 6 * 1024 + 8 + 2 * 3200 + 100 + 1.
  ListMajorBounds b = list_major_bounds(100, 32, 1024, 2, target, false);
  EXPECT_EQ(b.sched_lists, 1024u);
  EXPECT_EQ(b.untiled, 2624u);
  EXPECT_EQ(b.items_max, 2624u);
  EXPECT_EQ(b.rows_extra, 2112u);
  EXPECT_EQ(b.rows_max, 5312u);
  EXPECT_TRUE(b.fits);
  EXPECT_EQ(b.sched_words, 12653u);
  // NEAR FIRST: 2048 schedule lists; untiled = min(3200, 1600 + 2048) = 3200.
  b = list_major_bounds(100, 32, 1024, 2, target, true);
  EXPECT_EQ(b.sched_lists, 2048u);
  EXPECT_EQ(b.untiled, 3200u);
  EXPECT_EQ(b.items_max, 3200u);
  EXPECT_EQ(b.rows_max, 5312u);
  EXPECT_EQ(b.sched_words, 18797u);
  // A small batch launches on 2 * target items; 3 queries an item round up.
  b = list_major_bounds(1, 33, 1024, 3, target, false);
  EXPECT_EQ(b.untiled, 33u);  // min(33, 11 + 33)
  EXPECT_EQ(b.items_max, 1056u);
  EXPECT_EQ(b.rows_extra, 3168u);
  EXPECT_EQ(b.rows_max, 3201u);
  EXPECT_EQ(b.sched_words, 6u * 1024 + 8 + 66 + 2);
}

TEST(SchedulePlan, TooManyRowsForTheScheduleAreReported) {
  const std::uint32_t target = item_target(kH100Sms);  // rows_extra 1056 at one query an item
  EXPECT_TRUE(list_major_bounds(1, 0xFFFFFFFFu - 1056 - 1, 1024, 1, target, false).fits);
  const ListMajorBounds b = list_major_bounds(1, 0xFFFFFFFFu - 1056, 1024, 1, target, false);
  EXPECT_EQ(b.rows_max, 0xFFFFFFFFull);
  EXPECT_FALSE(b.fits);
  // Batch 1M at P8192 (8.2G pairs); at P4096 (4.1G and 8448 extra rows) it fits.
  EXPECT_FALSE(list_major_bounds(1000000, 8192, 16384, 8, target, false).fits);
  EXPECT_TRUE(list_major_bounds(1000000, 4096, 16384, 8, target, false).fits);
}

TEST(SchedulePlan, AScanIsSizedWithItsEntrysSortCapacity) {
  // Kernel pack 1.8's k-32 scans keep only the warps' lists (128); the module says so.
  EXPECT_EQ(scan_sort_capacity({{"sort_capacity", 128}, {"k_max", 32}}, 32), 128u);
  EXPECT_EQ(scan_sort_capacity({{"sort_capacity", 128}}, 32), UDF_IVF_V1_SORT_CAPACITY(32u));
  // An older module's k-32 scans address 256 (its own pack's rule), whatever this header says.
  EXPECT_EQ(scan_sort_capacity({{"sort_capacity", 256}}, 32), 256u);
  // A module without the field: the rule of packs before 1.8.  (A value no
  // pack's rule gives, 0 or 300 for k_max 32, never reaches it: the module and
  // kernel pack readers refuse it; ModuleManifest.SortCapacityIsAPacksRuleForItsKMax.)
  EXPECT_EQ(scan_sort_capacity({}, 32), 256u);
  EXPECT_EQ(scan_sort_capacity({}, 1024), 2048u);
  EXPECT_EQ(scan_sort_capacity({{"sort_capacity", 2048}}, 1024), UDF_IVF_V1_SORT_CAPACITY(1024u));
}

TEST(SchedulePlan, ABatchSelectsItsProbesByABoundFromFourQueriesAnSmOrWithEnoughListsAProbe) {
  // n_probes <= 32: from four rows an SM the bound, below the 1024-thread blocks, whatever the lists.
  EXPECT_EQ(select_kernel(kH100Sms, 4 * kH100Sms - 1, 4096, 32), SelectKernel::wide);
  EXPECT_EQ(select_kernel(kH100Sms, 4 * kH100Sms, 4096, 32), SelectKernel::gather);
  EXPECT_EQ(select_kernel(kH100Sms, 10000, 64, 1), SelectKernel::gather);
  EXPECT_EQ(select_kernel(0, 3, 1024, 10), SelectKernel::wide) << "an unknown SM count counts as one";
  EXPECT_EQ(select_kernel(0, 4, 1024, 10), SelectKernel::gather);
  // 33 .. 256 probes: the bound where there are at least 64 lists a probe, whatever the rows.
  EXPECT_EQ(select_kernel(kH100Sms, 1, 4096, 64), SelectKernel::gather);
  EXPECT_EQ(select_kernel(kH100Sms, 10000, 4095, 64), SelectKernel::plain);
  EXPECT_EQ(select_kernel(kH100Sms, 10000, 1024, 128), SelectKernel::plain) << "groups of 8 keys: the radix select";
  EXPECT_EQ(select_kernel(kH100Sms, 10000, 16384, 256), SelectKernel::gather);
  EXPECT_EQ(select_kernel(kH100Sms, 10000, 1u << 20, UDF_IVF_SELECT_V1_FEW + 1), SelectKernel::plain) << "above: the full sort";
}

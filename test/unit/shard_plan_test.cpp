// SHARDS without a GPU: the plan of which lists each device keeps
// (lib/runtime/shards/shard_plan.h) and the merge of the devices' top-k
// (kernels/shard_merge.cuh, the code udf_ivf_index_v1_shard_merge runs),
// checked against one index's top-k over the same candidates.
#include "shards/shard_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "shard_merge.cuh"

using namespace udf::rt;

namespace {

uint64_t sum(const std::vector<uint64_t>& v, uint32_t b, uint32_t e) {
  return std::accumulate(v.begin() + b, v.begin() + e, uint64_t(0));
}

void expect_valid_plan(const std::vector<uint64_t>& sizes, uint32_t shards, const std::vector<uint32_t>& b) {
  ASSERT_EQ(b.size(), shards + 1u);
  EXPECT_EQ(b.front(), 0u);
  EXPECT_EQ(b.back(), sizes.size());
  for (uint32_t s = 0; s < shards; ++s) EXPECT_LE(b[s], b[s + 1]) << "shard " << s;
  const uint64_t total = sum(sizes, 0, static_cast<uint32_t>(sizes.size()));
  const uint64_t largest = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
  for (uint32_t s = 0; s < shards; ++s)
    EXPECT_LE(sum(sizes, b[s], b[s + 1]), total / shards + 1 + largest) << "shard " << s << " holds more than its share and a list";
}

}  // namespace

TEST(ShardPlan, EqualListsSplitEvenly) {
  const std::vector<uint64_t> sizes(1024, 1000);
  const auto b = plan_shard_lists(sizes, 2);
  expect_valid_plan(sizes, 2, b);
  EXPECT_EQ(b[1], 512u);
  const auto b4 = plan_shard_lists(sizes, 4);
  EXPECT_EQ(b4, (std::vector<uint32_t>{0, 256, 512, 768, 1024}));
}

TEST(ShardPlan, BalancesVectorsNotLists) {
  // The first lists are ten times as long: the first shard keeps fewer lists.
  std::vector<uint64_t> sizes(110, 100);
  for (int l = 0; l < 10; ++l) sizes[l] = 1000;
  const auto b = plan_shard_lists(sizes, 2);
  expect_valid_plan(sizes, 2, b);
  EXPECT_EQ(b[1], 10u);  // 10 lists of 10000 vectors, then 100 lists of 10000
  sizes.push_back(5000);  // 25000 in all: the first 35 lists hold exactly half
  const auto b2 = plan_shard_lists(sizes, 2);
  expect_valid_plan(sizes, 2, b2);
  EXPECT_EQ(sum(sizes, 0, b2[1]), 12500u);
}

TEST(ShardPlan, RandomSizesStayWithinAListOfTheirShare) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const uint32_t n = 1 + rng() % 300, shards = 1 + rng() % 9;
    std::vector<uint64_t> sizes(n);
    for (auto& s : sizes) s = rng() % 4 == 0 ? 0 : rng() % 5000;
    expect_valid_plan(sizes, shards, plan_shard_lists(sizes, shards));
  }
}

TEST(ShardPlan, MoreShardsThanListsLeavesSomeEmpty) {
  const std::vector<uint64_t> sizes{5, 5};
  const auto b = plan_shard_lists(sizes, 4);
  expect_valid_plan(sizes, 4, b);
  EXPECT_EQ(b.back(), 2u);
}

TEST(ShardPlan, NoVectorsSplitsTheListsByCount) {
  const std::vector<uint64_t> sizes(10, 0);
  EXPECT_EQ(plan_shard_lists(sizes, 2), (std::vector<uint32_t>{0, 5, 10}));
}

TEST(ShardPlan, HugeCountsDoNotOverflow) {
  const std::vector<uint64_t> sizes{uint64_t(1) << 62, uint64_t(1) << 62, uint64_t(1) << 62};
  const auto b = plan_shard_lists(sizes, 3);
  EXPECT_EQ(b, (std::vector<uint32_t>{0, 1, 2, 3}));
}

// ---------------------------------------------------------------------------
// Shards by vectors: each list cut into equal parts, and adds.

TEST(ShardPlan, ByVectorsAFreshListIsCutIntoEqualParts) {
  for (size_t shards : {1u, 2u, 3u, 7u})
    for (uint64_t n : {0ull, 1ull, 2ull, 5ull, 100ull, 1000003ull}) {
      const std::vector<uint64_t> give = plan_vector_adds(std::vector<uint64_t>(shards, 0), n);
      for (size_t s = 0; s < shards; ++s)
        EXPECT_EQ(give[s], part_begin(n, s + 1, shards) - part_begin(n, s, shards))
            << n << " rows, shard " << s << " of " << shards;
    }
}

// Adds of random sizes (many of 0 .. 3 rows) to a list that starts empty:
// every add places all its rows, and the shards' parts stay within one
// vector of each other, whatever the sizes.  (Not always at the cut's own
// sizes: those are not monotone in the list's size -- 5 shards of 132 rows
// are 26, 26, 27, 26, 27, and of 133: 26, 27, 26, 27, 27 -- and a shard
// never gives rows back.)
TEST(ShardPlan, ByVectorsAddsKeepThePartsWithinOneVector) {
  std::mt19937_64 rng(21);
  for (size_t shards : {2u, 3u, 4u, 5u, 8u, 64u}) {
    std::vector<uint64_t> has(shards, 0);
    uint64_t total = 0;
    for (int step = 0; step < 1000; ++step) {
      const uint64_t added = rng() % 3 == 0 ? rng() % 4 : rng() % 1000;
      const std::vector<uint64_t> give = plan_vector_adds(has, added);
      ASSERT_EQ(std::accumulate(give.begin(), give.end(), uint64_t(0)), added) << "step " << step;
      total += added;
      for (size_t s = 0; s < shards; ++s) has[s] += give[s];
      const auto [lo, hi] = std::minmax_element(has.begin(), has.end());
      ASSERT_LE(*hi - *lo, 1u) << "step " << step << ", " << shards << " shards, " << total << " rows";
    }
  }
}

// From uneven parts (one shard far above its part): the rows still all go,
// and only to shards below their part.
TEST(ShardPlan, ByVectorsUnevenPartsStillPlaceEveryRow) {
  const std::vector<uint64_t> has = {100, 0, 3};
  const std::vector<uint64_t> give = plan_vector_adds(has, 50);
  EXPECT_EQ(std::accumulate(give.begin(), give.end(), uint64_t(0)), 50u);
  // The new size 153: parts of 51 each; shard 0 is above its part.
  EXPECT_EQ(give, (std::vector<uint64_t>{0, 50, 0}));
}

// ---------------------------------------------------------------------------
// The merge.

namespace {

struct Cand {
  float dist;
  uint32_t list;
  uint32_t pos;  // in its list
  long long id;
};

// One index's top-k: by key, ties to the smaller slot (list, then position:
// the layout keeps lists in order); padded with id -1 and the worst distance.
std::vector<Cand> top_k(std::vector<Cand> c, uint32_t k, bool max_order) {
  const float worst = max_order ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  c.erase(std::remove_if(c.begin(), c.end(), [&](const Cand& x) { return std::isnan(x.dist) || x.dist == worst; }), c.end());
  std::sort(c.begin(), c.end(), [&](const Cand& a, const Cand& b) {
    const float ka = udf_shard_merge::key_of(a.dist, max_order), kb = udf_shard_merge::key_of(b.dist, max_order);
    return std::tie(ka, a.list, a.pos) < std::tie(kb, b.list, b.pos);
  });
  c.resize(std::min<size_t>(c.size(), k));
  while (c.size() < k) c.push_back(Cand{worst, ~0u, ~0u, -1});
  return c;
}

// Merges the shards' rows (as the kernel does, one entry at a time) and
// checks the result is the one index's, for `queries` random queries.
// by_vectors: each list's positions go to the shards in runs of random
// lengths (as builds and adds leave shards by vectors), and the rows carry
// tie keys (list << 32 | position); else shards keep plan_shard_lists'
// ranges of lists.
void check_merge(std::mt19937_64& rng, uint32_t n_lists, uint32_t shards, uint32_t k, bool max_order, int value_range,
                 int queries, bool by_vectors = false) {
  std::vector<uint64_t> sizes(n_lists);
  for (auto& s : sizes) s = rng() % 40;
  const std::vector<uint32_t> b = plan_shard_lists(sizes, shards);
  // owner[l][i]: the shard of position i of list l.
  std::vector<std::vector<uint32_t>> owner(n_lists);
  for (uint32_t l = 0; l < n_lists; ++l) {
    uint32_t s = static_cast<uint32_t>(rng() % shards);
    for (uint32_t i = 0; i < sizes[l]; ++i) {
      if (!by_vectors) {
        owner[l].push_back(static_cast<uint32_t>(std::upper_bound(b.begin() + 1, b.end(), l) - (b.begin() + 1)));
        continue;
      }
      if (rng() % 4 == 0) s = static_cast<uint32_t>(rng() % shards);  // a new run
      owner[l].push_back(s);
    }
  }
  for (int q = 0; q < queries; ++q) {
    std::vector<Cand> all;
    long long id = 0;
    for (uint32_t l = 0; l < n_lists; ++l)
      for (uint32_t i = 0; i < sizes[l]; ++i) {
        // Small integer values: many exact ties.  Some +-inf (never reported).
        float d = static_cast<float>(static_cast<int>(rng() % value_range) - value_range / 2);
        if (rng() % 50 == 0) d = (rng() % 2 ? 1.0f : -1.0f) * std::numeric_limits<float>::infinity();
        all.push_back(Cand{d, l, i, id++});
      }
    const std::vector<Cand> want = top_k(all, k, max_order);
    // Each shard's top-k of its lists, its rows stored shard after shard.
    std::vector<float> dists(size_t(shards) * k);
    std::vector<long long> ids(size_t(shards) * k), keys(size_t(shards) * k);
    for (uint32_t s = 0; s < shards; ++s) {
      std::vector<Cand> mine;
      for (const Cand& c : all)
        if (owner[c.list][c.pos] == s) mine.push_back(c);
      const std::vector<Cand> row = top_k(mine, k, max_order);
      for (uint32_t i = 0; i < k; ++i) {
        dists[size_t(s) * k + i] = row[i].dist;
        ids[size_t(s) * k + i] = row[i].id;
        keys[size_t(s) * k + i] = row[i].id < 0 ? -1 : static_cast<long long>(uint64_t(row[i].list) << 32 | row[i].pos);
      }
    }
    std::vector<float> out_d(k, std::nanf(""));
    std::vector<long long> out_i(k, -2);
    std::vector<int> placed(size_t(shards) * k, 0);
    auto rows = [&](uint32_t t) { return dists.data() + size_t(t) * k; };
    auto ties = [&](uint32_t t) { return keys.data() + size_t(t) * k; };
    for (uint32_t s = 0; s < shards; ++s)
      for (uint32_t pos = 0; pos < k; ++pos) {
        const uint32_t at = by_vectors ? udf_shard_merge::place(rows, ties, shards, k, max_order, s, pos)
                                       : udf_shard_merge::place(rows, shards, k, max_order, s, pos);
        ASSERT_LT(at, shards * k);
        ++placed[at];
        if (at < k) {
          out_d[at] = dists[size_t(s) * k + pos];
          out_i[at] = ids[size_t(s) * k + pos];
        }
      }
    for (size_t i = 0; i < placed.size(); ++i) ASSERT_EQ(placed[i], 1) << "place " << i << " taken " << placed[i] << " times";
    for (uint32_t i = 0; i < k; ++i) {
      ASSERT_EQ(out_i[i], want[i].id) << "query " << q << " result " << i << " (shards " << shards << ", k " << k << ")";
      ASSERT_EQ(std::memcmp(&out_d[i], &want[i].dist, 4), 0) << "query " << q << " result " << i;
    }
  }
}

}  // namespace

TEST(ShardMerge, EqualsOneIndexWithManyTies) {
  std::mt19937_64 rng(11);
  for (uint32_t shards : {1u, 2u, 3u, 5u})
    for (uint32_t k : {1u, 10u, 32u, 100u})
      for (bool max_order : {false, true}) check_merge(rng, 24, shards, k, max_order, 7, 20);
}

TEST(ShardMerge, EqualsOneIndexWithDistinctValues) {
  std::mt19937_64 rng(12);
  for (uint32_t shards : {2u, 4u}) check_merge(rng, 64, shards, 64, false, 1 << 20, 30);
}

TEST(ShardMerge, PadsWhenTheShardsHoldFewerThanK) {
  std::mt19937_64 rng(13);
  check_merge(rng, 3, 2, 200, false, 5, 10);  // at most 120 vectors, k 200
  check_merge(rng, 3, 2, 200, true, 5, 10);
}

TEST(ShardMerge, ByVectorsEqualsOneIndexWithManyTies) {
  std::mt19937_64 rng(14);
  for (uint32_t shards : {1u, 2u, 3u, 5u})
    for (uint32_t k : {1u, 10u, 32u, 100u})
      for (bool max_order : {false, true}) check_merge(rng, 24, shards, k, max_order, 7, 20, true);
}

TEST(ShardMerge, ByVectorsPadsWhenTheShardsHoldFewerThanK) {
  std::mt19937_64 rng(15);
  check_merge(rng, 3, 2, 200, false, 5, 10, true);
  check_merge(rng, 3, 4, 200, true, 5, 10, true);
}

TEST(ShardMerge, ByVectorsTiesGoToTheSmallerTieKey) {
  // Two shards, every distance equal, the lists' positions interleaved:
  // shard 1 holds positions 0, 2, 4, 6 of list 0, shard 0 the odd ones.
  const uint32_t k = 4;
  const float d[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  const long long key[8] = {1, 3, 5, 7, 0, 2, 4, 6};
  auto rows = [&](uint32_t t) { return d + t * k; };
  auto ties = [&](uint32_t t) { return key + t * k; };
  for (uint32_t pos = 0; pos < k; ++pos) {
    EXPECT_EQ(udf_shard_merge::place(rows, ties, 2, k, false, 0, pos), 2 * pos + 1);
    EXPECT_EQ(udf_shard_merge::place(rows, ties, 2, k, false, 1, pos), 2 * pos);
  }
}

TEST(ShardMerge, TiesGoToTheSmallerShard) {
  // Two shards, every distance equal: shard 0's entries first, in order.
  const uint32_t k = 4;
  const float d[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  auto rows = [&](uint32_t t) { return d + t * k; };
  for (uint32_t pos = 0; pos < k; ++pos) {
    EXPECT_EQ(udf_shard_merge::place(rows, 2, k, false, 0, pos), pos);
    EXPECT_EQ(udf_shard_merge::place(rows, 2, k, false, 1, pos), k + pos);
  }
}

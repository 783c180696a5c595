// The k-means sample (lib/runtime/index/sample.h), without a GPU: the
// prefetching shuffle against a plain partial Fisher-Yates shuffle, the
// sample and the generator's state after it; the full shuffle and the
// sparse path (2^32 rows or more) as samples without replacement.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "index/sample.h"

namespace {

// One swap at a time, each drawn as it is made.
std::vector<int64_t> plain_fisher_yates(int64_t n, uint64_t n_train, std::mt19937_64& rng) {
  std::vector<int64_t> rows(static_cast<size_t>(n)), sample(n_train);
  for (int64_t i = 0; i < n; ++i) rows[i] = i;
  for (uint64_t i = 0; i < n_train; ++i) {
    const uint64_t j = i + rng() % (uint64_t(n) - i);
    std::swap(rows[i], rows[j]);
    sample[i] = rows[i];
  }
  return sample;
}

TEST(KmeansSample, IsThePlainPartialShuffleAndDrawsAsMany) {
  const uint64_t ahead = udf::rt::sample_detail::kAhead;
  struct Case {
    int64_t n;
    uint64_t n_train;
  };
  const std::vector<Case> cases = {{2, 1},          {5, 4},           {100, 1},         {100, ahead - 1},
                                   {100, ahead},    {100, ahead + 1}, {100, 99},        {1000, 2 * ahead},
                                   {1000, 999},     {1 << 20, 4096},  {1 << 20, 1 << 19}, {3000017, 65536}};
  for (const Case& c : cases)
    for (uint64_t seed : {0ull, 1ull, 0x9e3779b97f4a7c15ull}) {
      std::mt19937_64 a(seed), b(seed);
      const std::vector<int64_t> got = udf::rt::sample_rows(c.n, c.n_train, a);
      const std::vector<int64_t> want = plain_fisher_yates(c.n, c.n_train, b);
      ASSERT_EQ(got, want) << "n " << c.n << ", n_train " << c.n_train << ", seed " << seed;
      EXPECT_EQ(a(), b()) << "the generator after the sample: n " << c.n << ", n_train " << c.n_train;
    }
}

TEST(KmeansSample, EveryRowOnceWhenAllAreTaken) {
  std::mt19937_64 rng(7);
  const std::vector<int64_t> s = udf::rt::sample_rows(1000, 1000, rng);
  EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), 1000u);
  EXPECT_EQ(*std::min_element(s.begin(), s.end()), 0);
  EXPECT_EQ(*std::max_element(s.begin(), s.end()), 999);
}

TEST(KmeansSample, TwoToThe32RowsOrMoreAreSampledWithoutReplacement) {
  const int64_t n = (int64_t(1) << 33) + 12345;
  std::mt19937_64 a(3), b(3);
  const std::vector<int64_t> s = udf::rt::sample_rows(n, 20000, a);
  ASSERT_EQ(s.size(), 20000u);
  EXPECT_EQ(std::set<int64_t>(s.begin(), s.end()).size(), s.size());
  for (int64_t r : s) ASSERT_TRUE(r >= 0 && r < n) << r;
  EXPECT_GE(*std::max_element(s.begin(), s.end()), int64_t(1) << 32);  // half the rows lie past 2^32
  // Its first swap is the dense shuffle's: row j of the first draw.
  EXPECT_EQ(s[0], int64_t(b() % uint64_t(n)));
}

}  // namespace

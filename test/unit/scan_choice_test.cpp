// The scan choice (lib/runtime/index/scan_choice.h): which of a monotone metric's two
// scans a search takes, from what each took before.  No GPU: the rule alone.
#include "index/scan_choice.h"

#include <gtest/gtest.h>

using udf::rt::ScanChoice;

namespace {

// Runs `n` blocking searches, the pruning scan taking prune_ms and the plain
// one plain_ms for 1000 pairs each; returns how often each scan ran.
std::pair<int, int> run(ScanChoice& c, int n, float prune_ms, float plain_ms) {
  int prune = 0, plain = 0;
  for (int i = 0; i < n; ++i) {
    const ScanChoice::Pick p = c.next(true);
    (p.scan == ScanChoice::kPrune ? prune : plain)++;
    if (p.measure) c.record(p.scan, p.scan == ScanChoice::kPrune ? prune_ms : plain_ms, 1000.0);
  }
  return {prune, plain};
}

}  // namespace

TEST(ScanChoice, MeasuresThePruningScanThenThePlainOneEachAfterAWarmUp) {
  ScanChoice c;
  const int expected[] = {ScanChoice::kPrune, ScanChoice::kPrune, ScanChoice::kPlain, ScanChoice::kPlain};
  for (int want : expected) {
    const ScanChoice::Pick p = c.next(true);
    EXPECT_EQ(p.scan, want);
    EXPECT_TRUE(p.measure);
    c.record(p.scan, p.scan == ScanChoice::kPrune ? 12.0f : 10.0f, 1000.0);
  }
  EXPECT_EQ(c.best(), ScanChoice::kPlain);
  const ScanChoice::Pick p = c.next(true);
  EXPECT_EQ(p.scan, ScanChoice::kPlain);
  EXPECT_FALSE(p.measure);
}

TEST(ScanChoice, TheWarmUpMeasurementIsNotKept) {
  ScanChoice c;
  c.record(ScanChoice::kPrune, 500.0f, 1000.0);  // the lazy load of the kernel, say
  EXPECT_LT(c.ms_per_pair[ScanChoice::kPrune], 0.0f);
  c.record(ScanChoice::kPrune, 8.0f, 1000.0);
  EXPECT_FLOAT_EQ(c.ms_per_pair[ScanChoice::kPrune], 0.008f);
}

TEST(ScanChoice, TakesTheFasterScanWhicheverItIs) {
  ScanChoice hard, easy;
  auto [hp, hn] = run(hard, 1000, 11.6f, 10.1f);  // overlapping data: pruning pays less than its checks
  auto [ep, en] = run(easy, 1000, 4.0f, 7.0f);    // separated clusters: pruning drops most vectors
  EXPECT_EQ(hard.best(), ScanChoice::kPlain);
  EXPECT_EQ(easy.best(), ScanChoice::kPrune);
  // The slower scan runs only to be measured: twice at first, then after 64, 128, 256 and 512
  // more searches (the interval doubles while the answer holds).
  EXPECT_EQ(hp, 2 + 4);
  EXPECT_EQ(en, 2 + 4);
  EXPECT_EQ(hp + hn, 1000);
  EXPECT_EQ(ep + en, 1000);
  // In the long run once every kMaxRefresh searches.
  auto [lp, ln] = run(hard, 100000, 11.6f, 10.1f);
  EXPECT_LE(lp, 100000 / int(ScanChoice::kMaxRefresh) + 2);
  EXPECT_EQ(lp + ln, 100000);
}

TEST(ScanChoice, FollowsTheDataWhenItChanges) {
  ScanChoice c;
  run(c, 20000, 4.0f, 7.0f);
  EXPECT_EQ(c.best(), ScanChoice::kPrune);
  EXPECT_EQ(c.interval, ScanChoice::kMaxRefresh);
  // The data turns hard: seen within the longest interval.
  uint32_t steps = 0;
  while (c.best() == ScanChoice::kPrune && steps < ScanChoice::kMaxRefresh + 2) {
    run(c, 1, 12.0f, 10.0f);
    ++steps;
  }
  EXPECT_EQ(c.best(), ScanChoice::kPlain);
  run(c, 1, 12.0f, 10.0f);
  EXPECT_EQ(c.interval, ScanChoice::kRefresh);  // after a change the next look comes soon
  // And easy again: seen within kRefresh + 2 searches.
  steps = 0;
  while (c.best() == ScanChoice::kPlain && steps < ScanChoice::kRefresh + 2) {
    run(c, 1, 4.0f, 7.0f);
    ++steps;
  }
  EXPECT_EQ(c.best(), ScanChoice::kPrune);
}

TEST(ScanChoice, ASearchThatCannotBeTimedTakesTheBestKnown) {
  ScanChoice c;
  ScanChoice::Pick p = c.next(false);
  EXPECT_EQ(p.scan, ScanChoice::kPrune);  // nothing measured yet: the declaration's choice
  EXPECT_FALSE(p.measure);
  run(c, 10, 12.0f, 10.0f);
  p = c.next(false);
  EXPECT_EQ(p.scan, ScanChoice::kPlain);
  EXPECT_FALSE(p.measure);
}

TEST(ScanChoice, SearchesThatCannotBeTimedDoNotSkipARefresh) {
  // Every other search asynchronous: the refresh falls due on either kind and the next blocking
  // searches take it, so the data's change is still seen.
  ScanChoice c;
  auto mixed = [&](int n, float prune_ms, float plain_ms) {
    for (int i = 0; i < n; ++i) {
      c.next(false);
      run(c, 1, prune_ms, plain_ms);
    }
  };
  mixed(200, 4.0f, 7.0f);
  EXPECT_EQ(c.best(), ScanChoice::kPrune);
  mixed(2 * int(ScanChoice::kMaxRefresh), 12.0f, 10.0f);
  EXPECT_EQ(c.best(), ScanChoice::kPlain);
}

TEST(ScanChoice, KeysSeparateBucketsFiltersProbesAndBatchSizeClasses) {
  EXPECT_NE(ScanChoice::key(32, -1, 32, 100), ScanChoice::key(128, -1, 32, 100));
  EXPECT_NE(ScanChoice::key(32, -1, 32, 100), ScanChoice::key(32, -1, 128, 100));
  EXPECT_NE(ScanChoice::key(32, -1, 32, 100), ScanChoice::key(32, -1, 32, 10000));
  EXPECT_EQ(ScanChoice::key(32, -1, 32, 100), ScanChoice::key(32, -1, 32, 127));  // one class: 64 .. 127
  EXPECT_NE(ScanChoice::key(32, -1, 32, 127), ScanChoice::key(32, -1, 32, 128));
  EXPECT_NE(ScanChoice::key(32, -1, 1u << 30, 1), ScanChoice::key(32, -1, (1u << 30) - 1, 2));
  // A filter changes what a bound prunes: each filter (and none) has its own.
  EXPECT_NE(ScanChoice::key(32, -1, 32, 100), ScanChoice::key(32, 0, 32, 100));
  EXPECT_NE(ScanChoice::key(32, 0, 32, 100), ScanChoice::key(32, 1, 32, 100));
  EXPECT_NE(ScanChoice::key(32, 0, 32, 100), ScanChoice::key(128, 0, 32, 100));
  EXPECT_NE(ScanChoice::key(32, 65534, 32, 100), ScanChoice::key(32, 0, 32, 100));
}

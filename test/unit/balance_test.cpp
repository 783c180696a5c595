// The build's balanced assignment (lib/runtime/index/balance.h), without a
// GPU: against a plain reference that runs every round over every pending
// row, on random candidates with many equal keys, caps from none to ones
// that send rows out of candidates, and lists that already hold rows; the
// k-means update's grouping of rows by list against a stable sort; and the
// two-level k-means' share of the lists.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "index/balance.h"

namespace {

// Every round over every pending row (the definition balanced_assign keeps).
std::vector<uint32_t> reference(const std::vector<uint32_t>& cand, const std::vector<float>& keys, size_t n, uint32_t c,
                                std::vector<uint64_t>& counts, uint64_t cap) {
  std::vector<uint32_t> label(n), rank(n, 0);
  for (size_t i = 0; i < n; ++i) label[i] = cand[i * c];
  if (cap == 0) {
    for (size_t i = 0; i < n; ++i) ++counts[label[i]];
    return label;
  }
  const size_t n_lists = counts.size();
  std::vector<uint32_t> pending(n), next;
  std::iota(pending.begin(), pending.end(), 0u);
  while (!pending.empty()) {
    std::vector<std::vector<uint32_t>> want(n_lists);
    std::vector<uint32_t> leftover;
    for (uint32_t i : pending) {
      if (rank[i] < c)
        want[cand[size_t(i) * c + rank[i]]].push_back(i);
      else
        leftover.push_back(i);
    }
    next.clear();
    for (size_t l = 0; l < n_lists; ++l) {
      std::vector<uint32_t>& w = want[l];
      const uint64_t room = counts[l] >= cap ? 0 : cap - counts[l];
      std::sort(w.begin(), w.end(), [&](uint32_t a, uint32_t b) {
        const float ka = keys[size_t(a) * c + rank[a]], kb = keys[size_t(b) * c + rank[b]];
        return ka < kb || (ka == kb && a < b);
      });
      for (size_t j = 0; j < w.size(); ++j) {
        if (j < room) {
          label[w[j]] = static_cast<uint32_t>(l);
          ++counts[l];
        } else {
          ++rank[w[j]];
          next.push_back(w[j]);
        }
      }
    }
    for (uint32_t i : leftover) {
      size_t best = 0;
      for (size_t l = 1; l < n_lists; ++l)
        if (counts[l] < counts[best]) best = l;
      label[i] = static_cast<uint32_t>(best);
      ++counts[best];
    }
    pending.swap(next);
  }
  return label;
}

// balanced_assign's and group_by_label's `parallel`: every part on a thread
// of its own, started in reverse order (the results must not depend on it).
void on_threads(size_t parts, const std::function<void(size_t)>& part) {
  std::vector<std::thread> threads;
  for (size_t i = parts; i-- > 0;) threads.emplace_back(part, i);
  for (std::thread& t : threads) t.join();
}

TEST(BalancedAssign, MatchesEveryRoundOverEveryRow) {
  std::mt19937_64 rng(20261129);
  int cases = 0, with_leftovers = 0;
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(300), size_t(5000)}) {
    for (uint32_t n_lists : {1u, 3u, 50u, 300u}) {
      for (uint32_t c : {1u, 2u, 8u}) {
        if (c > n_lists) continue;
        for (double balance : {0.0, 0.5, 1.0, 1.2, 2.0}) {
          // Candidates: c distinct lists a row, skewed towards a few lists so
          // that caps bind; keys from a few values (many ties), ascending.
          std::vector<uint32_t> cand(n * c);
          std::vector<float> keys(n * c);
          for (size_t i = 0; i < n; ++i) {
            // c distinct lists, the first one of lists 0 .. 2 half the time
            std::vector<uint32_t> pick;
            while (pick.size() < c) {
              const uint32_t x = pick.empty() && rng() % 2 == 0 ? static_cast<uint32_t>(rng() % std::min(3u, n_lists))
                                                                 : static_cast<uint32_t>(rng() % n_lists);
              if (std::find(pick.begin(), pick.end(), x) == pick.end()) pick.push_back(x);
            }
            float k = 0;
            for (uint32_t j = 0; j < c; ++j) {
              k += static_cast<float>(rng() % 3);
              cand[i * c + j] = pick[j];
              keys[i * c + j] = k;
            }
          }
          std::vector<uint64_t> held(n_lists);
          for (uint64_t& h : held) h = rng() % 4;  // rows the lists hold already (an add)
          const uint64_t total = n + std::accumulate(held.begin(), held.end(), uint64_t(0));
          const uint64_t cap =
              balance > 0 ? std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(balance * double(total) / n_lists))) : 0;
          std::vector<uint64_t> want_counts = held, got_counts = held;
          const std::vector<uint32_t> want = reference(cand, keys, n, c, want_counts, cap);
          std::vector<uint64_t> threaded_counts = held;
          const std::vector<uint32_t> got = udf::rt::balanced_assign(cand.data(), keys.data(), n, c, got_counts, cap);
          // The lists settled on threads, the parts in reverse order: the same labels.
          const std::vector<uint32_t> threaded = udf::rt::balanced_assign(
              cand.data(), keys.data(), n, c, threaded_counts, cap, on_threads);
          SCOPED_TRACE("n " + std::to_string(n) + ", lists " + std::to_string(n_lists) + ", c " + std::to_string(c) +
                       ", cap " + std::to_string(cap));
          ASSERT_EQ(got, want);
          ASSERT_EQ(got_counts, want_counts);
          ASSERT_EQ(threaded, want);
          ASSERT_EQ(threaded_counts, want_counts);
          ++cases;
          if (cap > 0 && *std::max_element(want_counts.begin(), want_counts.end()) > cap) ++with_leftovers;
        }
      }
    }
  }
  EXPECT_GT(cases, 100);
  EXPECT_GT(with_leftovers, 0) << "some case sends rows out of their candidates";
}

// Rows in several parts of the passes over every row (balance_detail::
// kRowsAPart): the parts' counts added and their pending rows joined in row
// order give the reference's labels, serially and on threads.
TEST(BalancedAssign, ManyRowsInSeveralPartsMatch) {
  std::mt19937_64 rng(20261130);
  const size_t n = 3 * udf::rt::balance_detail::kRowsAPart + 123;
  const uint32_t n_lists = 300, c = 2;
  std::vector<uint32_t> cand(n * c);
  std::vector<float> keys(n * c);
  for (size_t i = 0; i < n; ++i) {
    // Both candidates among lists 0 .. 29 a third of the time: those lists
    // fill, and some of their rows run out of candidates (the emptiest list
    // takes them in pending order, which the parts must keep).
    const bool hot = rng() % 3 == 0;
    const uint32_t l0 = static_cast<uint32_t>(rng() % (hot ? 30 : n_lists));
    float k = static_cast<float>(rng() % 4);
    for (uint32_t j = 0; j < c; ++j) {
      cand[i * c + j] = hot ? (l0 + 7 * j) % 30 : (l0 + 37 * j) % n_lists;
      keys[i * c + j] = k;
      k += static_cast<float>(rng() % 3);
    }
  }
  for (double balance : {1.0, 1.2, 2.0}) {
    const uint64_t cap = static_cast<uint64_t>(std::ceil(balance * double(n) / n_lists));
    std::vector<uint64_t> want_counts(n_lists, 0), got_counts(n_lists, 0), threaded_counts(n_lists, 0);
    const std::vector<uint32_t> want = reference(cand, keys, n, c, want_counts, cap);
    const std::vector<uint32_t> got = udf::rt::balanced_assign(cand.data(), keys.data(), n, c, got_counts, cap);
    const std::vector<uint32_t> threaded = udf::rt::balanced_assign(
        cand.data(), keys.data(), n, c, threaded_counts, cap, on_threads);
    SCOPED_TRACE("balance " + std::to_string(balance));
    ASSERT_EQ(got, want);
    ASSERT_EQ(got_counts, want_counts);
    ASSERT_EQ(threaded, want);
    ASSERT_EQ(threaded_counts, want_counts);
    EXPECT_GT(std::count_if(want_counts.begin(), want_counts.end(), [&](uint64_t x) { return x == cap; }), 0)
        << "some list is full: rows moved on";
    // Rows out of candidates: some row's label is neither of its candidates.
    size_t out = 0;
    for (size_t i = 0; i < n; ++i) out += want[i] != cand[i * c] && want[i] != cand[i * c + 1];
    EXPECT_GT(out, 0u);
  }
}

// The two-level k-means' share of the lists: n_lists in all, none for an
// empty group, 1 .. its rows for the others, and within one of the exact
// proportion wherever that lies in 1 .. rows (largest remainders get the
// rest), on random group sizes with empty, one-row and large groups.
TEST(GroupByLabel, IsAStableSortByLabelForAnyParts) {
  std::mt19937_64 rng(20261130);
  // n from none to many parts (kGroupParts parts of more than kRowsAPart
  // rows at the largest); labels skewed, some never used.
  for (size_t n : {size_t(0), size_t(1), size_t(1000), size_t(65536 * 3 + 17), size_t(65536) * 70 + 5}) {
    for (uint32_t n_labels : {1u, 7u, 4096u}) {
      std::vector<uint32_t> label(n);
      for (uint32_t& l : label) l = static_cast<uint32_t>(rng() % (n_labels > 2 ? n_labels - 2 : n_labels)) * (rng() % 3 == 0 ? 0 : 1);
      std::vector<uint32_t> want(n);
      std::iota(want.begin(), want.end(), 0u);
      std::stable_sort(want.begin(), want.end(), [&](uint32_t a, uint32_t b) { return label[a] < label[b]; });
      std::vector<uint32_t> want_counts(n_labels, 0), want_starts(size_t(n_labels) + 1, 0);
      for (uint32_t l : label) ++want_counts[l];
      for (uint32_t l = 0; l < n_labels; ++l) want_starts[l + 1] = want_starts[l] + want_counts[l];
      SCOPED_TRACE("n " + std::to_string(n) + ", labels " + std::to_string(n_labels));
      std::vector<uint32_t> order(n, ~0u), counts, starts;
      udf::rt::group_by_label(label.data(), n, n_labels, order.data(), counts, starts);
      EXPECT_EQ(order, want);
      EXPECT_EQ(counts, want_counts);
      EXPECT_EQ(starts, want_starts);
      std::vector<uint32_t> threaded(n, ~0u), t_counts, t_starts;
      udf::rt::group_by_label(label.data(), n, n_labels, threaded.data(), t_counts, t_starts, on_threads);
      EXPECT_EQ(threaded, want);
      EXPECT_EQ(t_counts, want_counts);
      EXPECT_EQ(t_starts, want_starts);
    }
  }
}

TEST(ShareCenters, SumsToTheListsWithinOneOfTheProportion) {
  std::mt19937_64 rng(7);
  int cases = 0, proportional = 0;
  for (int round = 0; round < 2000; ++round) {
    const size_t groups = 1 + rng() % 70;
    std::vector<uint64_t> sizes(groups);
    for (uint64_t& x : sizes) {
      const uint64_t kind = rng() % 6;
      x = kind == 0 ? 0 : kind == 1 ? 1 : kind == 2 ? 1 + rng() % 5 : 1 + rng() % 5000;
    }
    const uint64_t total = std::accumulate(sizes.begin(), sizes.end(), uint64_t(0));
    const uint64_t nonempty = std::count_if(sizes.begin(), sizes.end(), [](uint64_t x) { return x > 0; });
    if (nonempty == 0) continue;
    const uint64_t top = std::min<uint64_t>(total, 20000);
    const uint32_t n_lists = static_cast<uint32_t>(nonempty + rng() % (top - nonempty + 1));
    const std::vector<uint32_t> k = udf::rt::share_centers(sizes, n_lists);
    ASSERT_EQ(k.size(), groups);
    SCOPED_TRACE("round " + std::to_string(round) + ": " + std::to_string(groups) + " groups, " + std::to_string(total) +
                 " rows, " + std::to_string(n_lists) + " lists");
    ASSERT_EQ(std::accumulate(k.begin(), k.end(), uint64_t(0)), n_lists);
    bool all_inside = true;
    for (size_t g = 0; g < groups; ++g) {
      if (sizes[g] == 0) {
        ASSERT_EQ(k[g], 0u);
        continue;
      }
      ASSERT_GE(k[g], 1u);
      ASSERT_LE(k[g], sizes[g]);
      const double want = double(n_lists) * double(sizes[g]) / double(total);
      all_inside = all_inside && want >= 1 && want <= double(sizes[g]) - 1;
    }
    if (all_inside) {  // no group clamped: every share within one of its proportion
      ++proportional;
      for (size_t g = 0; g < groups; ++g)
        EXPECT_LT(std::fabs(double(k[g]) - double(n_lists) * double(sizes[g]) / double(total)), 1.0) << "group " << g;
    }
    ASSERT_EQ(udf::rt::share_centers(sizes, n_lists), k);  // the same answer again
    ++cases;
  }
  EXPECT_GT(cases, 1500);
  EXPECT_GT(proportional, 50);
}

}  // namespace

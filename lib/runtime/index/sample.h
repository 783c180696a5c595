// The k-means sample (index/kmeans.cpp): which rows k-means trains on.
// Header-only and free of CUDA, so that it is tested on the CPU
// (test/unit/sample_test.cpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <unordered_map>
#include <vector>

namespace udf::rt {

namespace sample_detail {

// Swaps drawn ahead of the one being made, their targets prefetched.
inline constexpr uint64_t kAhead = 32;

}  // namespace sample_detail

/// n_train of rows 0 .. n - 1 without replacement (n_train <= n), in the
/// order of a partial Fisher-Yates shuffle: swap i takes j = i + rng() %
/// (n - i), one rng() a swap in swap order.  Over a dense array of row
/// numbers, or a sparse map of the swapped ones when there are 2^32 rows or
/// more; the same sample either way.  The dense shuffle draws its swaps
/// kAhead ahead and prefetches their targets, so its random reads overlap
/// rather than wait one after another (the same draws in the same order).
inline std::vector<int64_t> sample_rows(int64_t n, uint64_t n_train, std::mt19937_64& rng) {
  using sample_detail::kAhead;
  std::vector<int64_t> sample;
  if (n_train == static_cast<uint64_t>(n)) {
    sample.resize(n);
    std::iota(sample.begin(), sample.end(), 0);
    std::shuffle(sample.begin(), sample.end(), rng);
  } else if (n < (int64_t(1) << 32)) {
    std::vector<uint32_t> rows(static_cast<size_t>(n));
    std::iota(rows.begin(), rows.end(), 0u);
    sample.resize(n_train);
    const uint64_t un = static_cast<uint64_t>(n);
    uint64_t ahead[kAhead];  // the targets of swaps i .. i + kAhead - 1, at [swap % kAhead]
    auto draw = [&](uint64_t i) {
      const uint64_t j = i + rng() % (un - i);
      __builtin_prefetch(rows.data() + j, 1);
      return j;
    };
    for (uint64_t i = 0; i < std::min(kAhead, n_train); ++i) ahead[i] = draw(i);
    for (uint64_t i = 0; i < n_train; ++i) {
      const uint64_t j = ahead[i % kAhead];
      if (i + kAhead < n_train) ahead[i % kAhead] = draw(i + kAhead);
      std::swap(rows[i], rows[j]);
      sample[i] = rows[i];
    }
  } else {
    std::unordered_map<int64_t, int64_t> swapped;
    for (uint64_t i = 0; i < n_train; ++i) {
      const int64_t j = static_cast<int64_t>(i + rng() % (n - i));
      auto at = [&](int64_t x) {
        auto it = swapped.find(x);
        return it == swapped.end() ? x : it->second;
      };
      const int64_t vi = at(i), vj = at(j);
      swapped[j] = vi;
      sample.push_back(vj);
    }
  }
  return sample;
}

}  // namespace udf::rt

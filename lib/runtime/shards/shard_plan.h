// Which lists each device of a sharded index keeps (shards/build.cpp).
// Pure, header-only: test/unit/shard_plan_test.cpp checks it on the CPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace udf::rt {

/// Contiguous ranges of lists for `shards` devices, as boundaries b[0] = 0 <=
/// b[1] <= ... <= b[shards] = sizes.size(): shard s keeps lists [b[s], b[s+1]).
/// Each boundary is put where the lists before it hold the nearest count to
/// its share of the vectors (s * total / shards), so that no shard holds more
/// than its share plus one list.  Contiguous ranges keep the lists' order:
/// shard s's lists all come before shard s + 1's, which the search's merge
/// relies on (kernels/shard_merge.cuh).
inline std::vector<uint32_t> plan_shard_lists(const std::vector<uint64_t>& sizes, uint32_t shards) {
  const uint32_t n = static_cast<uint32_t>(sizes.size());
  std::vector<uint64_t> prefix(n + 1, 0);
  for (uint32_t l = 0; l < n; ++l) prefix[l + 1] = prefix[l] + sizes[l];
  const uint64_t total = prefix[n];
  std::vector<uint32_t> b(shards + 1, 0);
  b[shards] = n;
  for (uint32_t s = 1; s < shards; ++s) {
    if (total == 0) {  // no vectors yet: the lists by count
      b[s] = static_cast<uint32_t>(uint64_t(n) * s / shards);
      continue;
    }
    // The share in 128-bit-free arithmetic: total * s / shards without overflow for any uint64 total.
    const uint64_t share = total / shards * s + total % shards * s / shards;
    // The first boundary at or above the share, or the one below when nearer.
    uint32_t at = static_cast<uint32_t>(std::lower_bound(prefix.begin(), prefix.end(), share) - prefix.begin());
    if (at > 0 && share - prefix[at - 1] < prefix[at] - share) --at;
    b[s] = std::clamp(at, b[s - 1], n);
  }
  return b;
}

/// By vectors: shard s's part of a list of `size` vectors cut into
/// `shards` equal parts is the one index's positions [part_begin(s),
/// part_begin(s + 1)) of it.
inline uint64_t part_begin(uint64_t size, size_t s, size_t shards) { return size * s / shards; }

/// By vectors: how many of `added` new rows of a list each shard
/// takes, when shard s holds has[s] of its rows now: in shard order, each
/// takes what it falls short of its equal part of the new size (part_begin),
/// until none are left.  The shortfalls add up to at least `added` (the
/// parts add up to the new size), so the result adds up to `added`; a shard
/// never takes more than its shortfall, so one at its part stays there.
inline std::vector<uint64_t> plan_vector_adds(const std::vector<uint64_t>& has, uint64_t added) {
  const size_t S = has.size();
  uint64_t total = added;
  for (uint64_t h : has) total += h;
  std::vector<uint64_t> give(S, 0);
  for (size_t s = 0; s < S && added > 0; ++s) {
    const uint64_t want = part_begin(total, s + 1, S) - part_begin(total, s, S);
    give[s] = std::min(added, want > has[s] ? want - has[s] : 0);
    added -= give[s];
  }
  return give;
}

}  // namespace udf::rt

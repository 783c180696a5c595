// SHARD MERGE (ivf_index_v1.h): the k best of a query's per-shard top-k
// rows, as one index over all the shards' lists would rank them.
//
// Shards by lists hold contiguous ranges of lists in list order (shard 0
// the first lists), and each lays its lists out in list order, so a shard's
// slots are all below the next shard's in the one-index layout.  Each row is that
// shard's k best, sorted by (key, slot), padded at its end with the worst
// distance.  So the one index's order (key, then slot) of the rows' entries
// is (key, then shard, then position in the row), and an entry's place in the
// merged order is its position in its row plus, in every other row, the
// entries before it: those with a smaller key, and in a row of a smaller
// shard those with an equal key.  The places are distinct and cover
// 0 .. shards * k - 1; the entries placed below k are the result.
//
// Shards by vectors each hold part of every list (each part in the one
// index's order), so their slots interleave: their rows carry each entry's
// tie key (list << 32 | position in the one index's list), and an entry of
// equal distance is before another when its tie key is smaller.
//
// Host and device code (the runtime's CPU test runs the same functions).
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define UDF_SHARD_HD __host__ __device__ __forceinline__
#else
#define UDF_SHARD_HD inline
#endif

namespace udf_shard_merge {

// Key of distance d: smaller is better (max order: negated).  The padding's
// worst distance becomes +inf either way.
UDF_SHARD_HD float key_of(float d, bool max_order) { return max_order ? -d : d; }

// Entries of row[0 .. k) (keys ascending) before key `key`: those below it,
// and with `ties` those equal to it too.
UDF_SHARD_HD uint32_t count_before(const float* row, uint32_t k, bool max_order, float key, bool ties) {
  uint32_t lo = 0, hi = k;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const float m = key_of(row[mid], max_order);
    if (m < key || (ties && m == key))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The same for rows ordered by (key, tie key) (shards by vectors): entries
// of row / tie[0 .. k) before (key, tk), and with `ties` those equal to it
// in both.  Tie keys compare unsigned: padding's -1 comes last.
UDF_SHARD_HD uint32_t count_before(const float* row, const long long* tie, uint32_t k, bool max_order, float key,
                                   unsigned long long tk, bool ties) {
  uint32_t lo = 0, hi = k;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const float m = key_of(row[mid], max_order);
    const unsigned long long mt = static_cast<unsigned long long>(tie[mid]);
    if (m < key || (m == key && (mt < tk || (ties && mt == tk))))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The merged place of entry `pos` of shard s's row.  rows(t): shard t's row
// of this query (k distances).
template <class Rows>
UDF_SHARD_HD uint32_t place(const Rows& rows, uint32_t shards, uint32_t k, bool max_order, uint32_t s, uint32_t pos) {
  const float key = key_of(rows(s)[pos], max_order);
  uint32_t at = pos;
  for (uint32_t t = 0; t < shards; ++t)
    if (t != s) at += count_before(rows(t), k, max_order, key, t < s);
  return at;
}

// The same for shards by vectors: ties(t) is shard t's row of tie keys
// (the one index's list << 32 | position, -1 in padding), which order the
// entries of equal distance across the shards as the one index's slots do.
// The order (key, tie key, shard) is total, so the places stay distinct.
template <class Rows, class Ties>
UDF_SHARD_HD uint32_t place(const Rows& rows, const Ties& ties, uint32_t shards, uint32_t k, bool max_order, uint32_t s,
                            uint32_t pos) {
  const float key = key_of(rows(s)[pos], max_order);
  const unsigned long long tk = static_cast<unsigned long long>(ties(s)[pos]);
  uint32_t at = pos;
  for (uint32_t t = 0; t < shards; ++t)
    if (t != s) at += count_before(rows(t), ties(t), k, max_order, key, tk, t < s);
  return at;
}

}  // namespace udf_shard_merge

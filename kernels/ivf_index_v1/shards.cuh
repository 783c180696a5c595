// Stage shards: the merge of the shards' per-query top-k, and result keys
// back to ids.
#pragma once
#include "../shard_merge.cuh"
#include "common.cuh"

// SHARD MERGE: one thread an entry of a shard's row, placed by
// kernels/shard_merge.cuh; those placed below k are written.

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_shard_merge(udf_ivf_shard_merge_args_v1 a) {
  const uint64_t per_shard = uint64_t(a.n_queries) * a.k;
  const uint64_t total = per_shard * a.shards;
  for (uint64_t t = grid_thread(); t < total; t += grid_threads()) {
    const uint32_t s = static_cast<uint32_t>(t / per_shard);
    const uint64_t e = t % per_shard;
    const uint32_t q = static_cast<uint32_t>(e / a.k), pos = static_cast<uint32_t>(e % a.k);
    const uint64_t row0 = uint64_t(q) * a.k;
    auto rows = [&](uint32_t x) { return a.dists + x * a.shard_stride + row0; };
    auto ties = [&](uint32_t x) { return a.keys + x * a.shard_stride + row0; };
    const uint32_t at = a.keys ? udf_shard_merge::place(rows, ties, a.shards, a.k, a.max_order != 0, s, pos)
                               : udf_shard_merge::place(rows, a.shards, a.k, a.max_order != 0, s, pos);
    if (at < a.k) {
      a.out_dists[row0 + at] = a.dists[s * a.shard_stride + row0 + pos];
      a.out_ids[row0 + at] = a.ids[s * a.shard_stride + row0 + pos];
    }
  }
}

// ---------------------------------------------------------------------------
// RESOLVE KEYS (shards by vectors): each result's tie key to its id, by a
// binary search of the key's list (its slots' keys ascend).

extern "C" __global__ void __launch_bounds__(kThreads) udf_ivf_index_v1_resolve_keys(udf_ivf_resolve_keys_args_v1 a) {
  for (uint64_t i = grid_thread(); i < a.n; i += grid_threads()) {
    const long long key = a.keys[i];
    long long id = -1;
    const uint32_t l = static_cast<uint32_t>(static_cast<unsigned long long>(key) >> 32);
    if (key >= 0 && l < a.n_lists) {
      uint64_t lo = a.offsets[l], hi = lo + a.sizes[l];
      while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (a.slot_keys[mid] < key)
          lo = mid + 1;
        else
          hi = mid;
      }
      if (lo < a.offsets[l] + a.sizes[l] && a.slot_keys[lo] == key) id = a.slot_ids[lo];
    }
    a.ids[i] = id;
  }
}

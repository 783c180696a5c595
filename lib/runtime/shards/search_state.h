// A sharded search's state, shared by its stages (shards/search.cpp starts
// the shards, shards/search_merge.cpp brings their results together).
#pragma once

#include <cstdint>

#include "shards/sharded_index.h"

namespace udf::rt {

/// What every chunk of one sharded search call needs.
struct ShardedSearch {
  udf_index* ix = nullptr;
  ShardGroup* group = nullptr;
  ShardGroup::Home* home = nullptr;  // the first device's buffers and events
  udf_runtime* home_rt = nullptr;    // the first shard's runtime
  SearchCall call;                   // checked against the whole index
  uint32_t k = 0;
  uint32_t n_shards = 0;
  bool max_order = false;  // the metric orders its best values first by the largest
  bool by_vectors = false;
  CUstream home_stream = nullptr;  // the first device's: the caller's (asynchronous) or the runtime's
};

/// One chunk of the queries (rows q0 .. q0 + m) of a sharded search.
struct ShardChunk {
  int64_t q0 = 0;
  uint32_t m = 0;
  size_t per_shard = 0;  // m * k: each shard's results
  udf_tensor queries{};  // its rows of the queries (packed when other devices read strided device rows)
  // The host merge (small batches with host outputs): each GPU writes its
  // rows to mapped pinned memory, the host merges them.  A shard's pinned
  // rows: distances, ids (at ids_at), then by vectors tie keys (at keys_at).
  bool host_merge = false;
  size_t ids_at = 0, keys_at = 0;
};

/// A device buffer grown to `bytes`; a buffer that grows first waits for the
/// searches that may still read it.
void ensure(ShardGroup& g, DevBuf& b, size_t bytes, const char* what);
/// Rows [r0, r0 + m) of a tensor (row_stride kept).
udf_tensor rows_of(const udf_tensor& t, int64_t stride, int64_t r0, int64_t m);

// shards/search_merge.cpp
/// The host merge: the shards' rows (in their mapped pinned memory) merged
/// into the outputs' rows of the chunk, by kernels/shard_merge.cuh's placement.
void merge_on_host(const ShardedSearch& ss, const ShardChunk& c);
/// The shards' results to the first device's gather buffers: NCCL, or peer copies.
void gather_results(const ShardedSearch& ss, const ShardChunk& c);
/// The merge kernel on the first device, its rows on to the outputs.  Returns
/// whether it waited for the first device's stream (mapped host outputs).
bool merge_on_device(const ShardedSearch& ss, const ShardChunk& c);

}  // namespace udf::rt

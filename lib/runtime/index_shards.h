// SHARDS: an index over several devices (index_shards.cpp; the C API in
// include/udf/runtime.h, "several GPUs"; docs/scale-out.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "index.h"
#include "nccl_dl.h"
#include "shard_workers.h"

namespace udf::rt {

// How a sharded index's search moves the shards' top-k to the first device,
// and the buffers it uses there and on the other devices.
struct ShardGroup {
  std::string transport = "peer";  // "nccl" or "peer"
  std::string why_not_nccl;        // "peer" although the devices differ: why not NCCL
  bool distinct_runtimes = false;  // every shard on a runtime of its own: they may start on threads of their own
  std::vector<ncclComm_t> comms;   // "nccl": shard s is rank s
  const NcclApi* nccl_api = nullptr;  // "nccl": the library the comms came from
  struct Shard {
    CUcontext ctx = nullptr;
    CUstream stream = nullptr;     // the shard's runtime's stream
    bool home_device = false;      // on the first shard's device: writes the gather buffers directly
    // Not on the first device: its results, and copies of the first
    // device's queries and capture arrays.
    DevBuf dists, ids, keys, queries, caps[8], fcaps[8];
    PinnedBuf rows;                // HOST MERGE: its rows, written by its GPU (mapped)
    Event searched;                // after its part of the last search, on its stream (shards 1 ..)
  };
  std::vector<std::unique_ptr<Shard>> per;  // freed under their contexts (~ShardGroup)
  CUcontext home_ctx = nullptr;
  // On the first device: every shard's results [shard][query][k] (by
  // vectors their tie keys too), the
  // merged ones when they cannot go straight to the outputs, strided device
  // queries packed on their way to other devices, and pinned staging for
  // host outputs.
  struct Home {
    DevBuf gather_dists, gather_ids, gather_keys, merged, packed;
    PinnedBuf h_out;
    Event start, done;             // before the shards start / after the last search's merge
  };
  std::unique_ptr<Home> home;
  bool done_reached = true;        // the last search was waited for (a blocking one): no wait on `done`
  // Distinct runtimes: the threads that start shards 1 .. (shard_workers.h),
  // made at the first search; stopped first in ~ShardGroup.
  std::unique_ptr<ShardWorkers> workers;
  ShardGroup() = default;
  ShardGroup(const ShardGroup&) = delete;
  ShardGroup& operator=(const ShardGroup&) = delete;
  ~ShardGroup();
  /// Waits until no search of the index is running on any device.
  void quiesce();
};

/// A search of a sharded index (udf_index_search / _async).
void search_sharded(udf_index* ix, const udf_tensor* queries, const udf_search_params* params, const udf_tensor* out_d,
                    const udf_tensor* out_i, CUstream stream, bool blocking);

/// One shard's part of a search: udf_index_search_async on `shard` (device
/// outputs, `stream` of its device), without the top-level index's checks.
/// `mapped_out`: the outputs are mapped pinned memory of the runtime's own
/// (their device pointers, k apart), written by the GPU directly.
void search_shard(udf_index* shard, const udf_tensor* queries, const udf_search_params* params, const udf_tensor* out_d,
                  const udf_tensor* out_i, CUstream stream, bool mapped_out = false);

}  // namespace udf::rt

// A sharded index: an index over several devices of one host
// (include/udf/runtime.h, "several GPUs"; docs/scale-out.md).
//
// It is a udf_index that keeps no lists itself: it holds the whole index's
// centroids and list sizes, and one ordinary index a device (its shards),
// each with every centroid and its part of the lists (by lists: a
// contiguous range of whole lists, the others empty; by vectors: a part of
// every list).  Built as one index would be (k-means on the first device,
// helped by the others; the balanced assignment on the host), so its lists
// are that index's.  A search runs the one-index search on every shard at
// once (each probes the same lists: the same centroids and kernels), then
// gathers the shards' top-k on the first device (NCCL, or peer copies) and
// merges them there (udf_ivf_index_v1_shard_merge, kernels/shard_merge.cuh),
// or on the host for small batches: the one index's results, bit for bit.
#pragma once

#include <exception>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "cuda/buffers.h"
#include "cuda/event.h"
#include "index/index.h"
#include "index/search.h"
#include "cuda/nccl_dl.h"
#include "shards/shard_workers.h"

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
    PinnedBuf rows;                // the host merge's input: its rows, written by its GPU (mapped)
    Event searched;                // after its part of the last search, on its stream (shards 1 ..)
    Event probes_sent;             // after its rows of a shared coarse probe went to the others (search.cpp)
    Event staged;                  // after its uploads from the shared query staging (Home::h_in)
  };
  std::vector<std::unique_ptr<Shard>> per;  // freed under their contexts (~ShardGroup)
  CUcontext home_ctx = nullptr;
  // On the first device: every shard's results [shard][query][k] (by
  // vectors their tie keys too), the
  // merged ones when they cannot go straight to the outputs, strided device
  // queries packed on their way to other devices, and pinned staging for
  // host outputs and for host queries that every device reads.
  struct Home {
    DevBuf gather_dists, gather_ids, gather_keys, merged, packed;
    PinnedBuf h_out, h_in;
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

/// The shards of a sharded index (udf_index::shard_set) and how its search
/// reaches them.
struct ShardedIndex {
  std::vector<std::unique_ptr<udf_index, void (*)(udf_index*)>> shards;  // one a device, each a one-GPU index
  uint32_t layout = UDF_SHARD_BY_LISTS;  // how the shards split the vectors
  std::vector<uint32_t> lists;           // by lists: shard s keeps [lists[s], lists[s + 1])
  std::unique_ptr<ShardGroup> group;     // the search's transport and scratch (freed first)
  bool by_vectors() const { return layout == UDF_SHARD_BY_VECTORS; }
};

/// The shards of ix, which is sharded.
inline ShardedIndex& shards_of(const udf_index* ix) { return *ix->shard_set; }

// shards/group.cpp
/// The top-level index and its (empty) shards, one a module, all with
/// coarse weights `coarse_weights` (dim values, or NULL: none); `layout` is
/// checked (UDF_SHARD_BY_LISTS or UDF_SHARD_BY_VECTORS).
std::unique_ptr<udf_index> new_sharded(udf_module* const* modules, size_t n, const char* metric, uint32_t dim,
                                       uint32_t n_lists, uint32_t layout, const float* coarse_weights);
/// Gives a sharded index and each of its shards coarse weights `w` (NULL: none).
void set_coarse_weights_sharded(udf_index* ix, const float* w);
/// Turns on reader's access to the memory of owner's device (another
/// device) where the two allow it; whether reader's kernels may read it.
/// A refusal other than the devices' (cuCtxEnablePeerAccess's) throws when
/// `must`, else says no.
bool peer_access(udf_runtime* reader, udf_runtime* owner, bool must);
/// The search's transport and buffers: NCCL when every shard is on a device
/// of its own and NCCL loads and initializes, else peer copies (with peer
/// access where the devices allow it).  with_nccl false: peer copies until
/// a TransportStart made after it finishes.
void make_group(udf_index* ix, bool with_nccl = true);
/// make_group's NCCL communicators started on a thread of their own, so
/// that a build overlaps their start (slow next to a build's phases): made
/// after make_group(ix, false); finish() waits for them and gives them to
/// the group (peer copies if they failed, as make_group), rethrowing what the
/// thread threw.  Not finished, the destructor waits and destroys them.
struct NcclStart;
class TransportStart {
 public:
  explicit TransportStart(udf_index* ix);
  TransportStart(const TransportStart&) = delete;
  TransportStart& operator=(const TransportStart&) = delete;
  ~TransportStart();
  void finish();

 private:
  udf_index* ix_;
  std::thread thread_;
  std::unique_ptr<NcclStart> result_;
  std::exception_ptr error_;
};

// shards/build.cpp
/// The shard of list l of an index sharded by lists.
std::uint8_t list_owner(const udf_index* ix, uint32_t l);
/// A sharded index's own list sizes, size and next id after its shards
/// placed their rows (they keep those lists each; the parent holds the whole's).
void set_sharded_totals(udf_index* ix, const std::vector<uint64_t>& counts, int64_t size, int64_t next_id);
/// add_rows for a sharded index: each shard stages its share of the rows
/// on its device and finds their nearest lists, the host makes the balanced
/// assignment against the whole index's lists, then each shard places the
/// rows of its lists, read from the shares' devices (the shards at once
/// when each has a runtime of its own).
void add_rows_sharded(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list,
                      const udf_index_params* p);
/// A sharded index's build: the shares staged as add_rows_sharded stages
/// them, the one-GPU build's centroids made on the first shard's device (its
/// k-means sample gathered from the shares, each iteration's nearest lists
/// shared with the other devices; make_centroids), copied to every shard,
/// then the shares added.  The same lists as a one-GPU build.
void build_rows_sharded(udf_index* ix, const udf_tensor* data, int64_t stride, const int64_t* id_list,
                        const udf_index_params& p);
/// A sharded index's centroids: its first shard's, copied to the parent and
/// to every other shard (host and device).
void share_centroids(udf_index* ix);
/// Shard s of `shards` by vectors holding part s of the equal cut
/// (part_begin) of lists of sizes[l] vectors, as a build or a load leaves
/// it: its runs (one a list) and tie keys.
void keep_equal_parts(udf_index* sh, size_t s, size_t shards, const std::vector<uint64_t>& sizes);
/// A sharded index's list sizes, size and next id from a file's lists, and
/// each shard's part of them on its device.
void load_shards(udf_index* ix, const IndexFileHeader& h, IndexFileLists& lists);

// shards/chunked_build.cpp
/// Chunk `chunk` of a chunked build's rows into data (and ids, or ids.data
/// NULL: none), valid until the next call; throws to stop the build.
using ChunkSource = std::function<void(size_t chunk, udf_tensor& data, udf_tensor& ids)>;
/// Fills a new index (one-GPU or sharded, no centroids or lists yet) with
/// the rows of chunks 0 .. n_chunks - 1, as a build over chunk 0 and an add
/// of each further chunk would (the same centroids, labels and list order),
/// but allocating each device's lists once, at their final sizes.  Pass 1
/// reads every chunk for the assignment (chunk 0 first for the centroids),
/// pass 2 again to place its rows; the host keeps the labels in between.  A
/// sharded index's lists are cut between its devices by their final sizes.
void build_in_chunks(udf_index* ix, size_t n_chunks, const ChunkSource& source, const udf_index_params& p);

// shards/save.cpp
/// A sharded index's lists as save_index_file takes them: each list's parts
/// from every shard, as the one-GPU index's file holds them.
void append_shard_lists(const udf_index* ix, Bytes& file);

// shards/search.cpp
/// A search of a sharded index on a call checked against the whole index.
void search_sharded(udf_index* ix, const SearchCall& call);

}  // namespace udf::rt

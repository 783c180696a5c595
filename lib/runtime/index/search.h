// The one-index search (docs/kernels.md, "Search"): queries onto the device,
// the coarse probe, the schedule built on the GPU, the UDF scan and the
// merge, all queued on one stream with no host round trip; the blocking call
// waits once at the end (and between internal chunks), the asynchronous one
// not at all.  The call's arguments are checked by the C API
// (capi/search_api.cpp) before they come here.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "index/index.h"

namespace udf::rt {

/// A sharded search's coarse probe shared out between its devices
/// (shards/search.cpp): of every slice of the queries that the coarse stage
/// takes at once (all of them, or host queries' slices as they arrive),
/// this device probes part `part` of `parts` equal parts only, so that the
/// last slice leaves it as little to probe as the others (host queries
/// staged once for every device: the whole slices that stage_host gives
/// it, as many as every other device's).  `exchange`,
/// called once after those probes are queued with the rows they cover
/// (ranges of rows [first, end) of the call's queries), gives them to the
/// other devices and fills in theirs (at `probes`, n_probes words a row) on
/// the call's stream before the schedule reads them.  The call must fit one
/// chunk (search_chunk_queries).
///
/// Host queries are staged once for every device when `stage_host` is set:
/// stage_host(ready) copies the call's queries into pinned memory that every
/// device reads, in slices of up to kQuerySliceBytes, and calls ready(first,
/// rows, at, probe) on this thread for each slice in order as soon as it is
/// complete (`at`: row `first` in that memory; `probe`: whether this device
/// probes the slice, which every device uploads).
using RowRanges = std::vector<std::pair<uint32_t, uint32_t>>;
struct CoarseShare {
  using SliceReady = std::function<void(uint32_t first, uint32_t rows, const std::uint8_t* at, bool probe)>;
  uint32_t part = 0, parts = 1;
  std::function<void(CUdeviceptr probes, const RowRanges& probed)> exchange;
  std::function<void(const SliceReady& ready)> stage_host;  // null: the device stages its own
};

/// Host queries reach the device in slices of about this many bytes: the
/// coarse probe takes each while the host copies the next.
constexpr size_t kQuerySliceBytes = size_t(1) << 20;

/// A search call whose arguments the C API has checked: the tensors (host
/// or device memory of the index's device), their row strides in elements,
/// and the parameters read in full.
struct SearchCall {
  const udf_tensor* queries = nullptr;
  const udf_tensor* out_dists = nullptr;
  const udf_tensor* out_ids = nullptr;
  int64_t query_stride = 0, dist_stride = 0, id_stride = 0;
  udf_search_params params{};
  CUstream stream = nullptr;  // null: the runtime's stream
  bool blocking = true;       // udf_index_search (host or device outputs); else udf_index_search_async
  const CoarseShare* coarse_share = nullptr;  // a shard's part of a shared coarse probe, or none
};

/// The most queries one chunk of the pipeline takes for these parameters
/// (its candidates and coarse keys stay within a few hundred MB).
int64_t search_chunk_queries(const udf_index* ix, const udf_search_params& p);

/// Runs the search pipeline of a one-GPU index (or of one shard of a
/// sharded one) on a checked call.
void search_index(udf_index* ix, const SearchCall& call);

}  // namespace udf::rt

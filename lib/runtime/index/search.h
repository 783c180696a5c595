// The one-index search (docs/kernels.md, "Search"): queries onto the device,
// the coarse probe, the schedule built on the GPU, the UDF scan and the
// merge, all queued on one stream with no host round trip; the blocking call
// waits once at the end (and between internal chunks), the asynchronous one
// not at all.  The call's arguments are checked by the C API
// (capi/search_api.cpp) before they come here.
#pragma once

#include <cstdint>

#include "index/index.h"

namespace udf::rt {

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
};

/// Runs the search pipeline of a one-GPU index (or of one shard of a
/// sharded one) on a checked call.
void search_index(udf_index* ix, const SearchCall& call);

}  // namespace udf::rt

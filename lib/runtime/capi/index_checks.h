// The C API's checks of an index call's arguments, made once here: the
// layers below take what these return.
#pragma once

#include <cstddef>
#include <cstdint>

#include "index/search.h"
#include "udf/runtime.h"

namespace udf::rt {

/// The checked parameters of a build (udf_index_build, udf_index_build_sharded,
/// udf_index_build_chunked).  capi/index_api.cpp.
udf_index_params checked_build_params(const udf_index_params* params, const udf_tensor* data);
/// A build of index ix (its metric chosen) given `weights`: refused when the
/// metric names a capture as its coarse weights and none are given.
/// capi/index_api.cpp.
void check_declared_weights(const udf_index* ix, const float* weights);
/// A search call checked against index ix (a sharded one as a whole): the
/// parameters read in full, k, n_probes and queries_per_item in range, the
/// queries and outputs checked (outputs on the device when not blocking).
/// capi/search_api.cpp.
SearchCall check_search(udf_index* ix, const udf_tensor* queries, const udf_search_params* params,
                        const udf_tensor* out_distances, const udf_tensor* out_ids, CUstream stream, bool blocking);
/// The modules of a sharded index: 1 .. 64, each holding `metric` with the
/// first's artifact.  capi/shards_api.cpp.
void check_modules(udf_module* const* modules, size_t n, const char* metric);
/// A udf_shard_layout, checked.  capi/shards_api.cpp.
uint32_t checked_layout(uint32_t layout);

}  // namespace udf::rt

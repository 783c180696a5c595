// Exact search and refine (docs/exact-search.md): the rows scans
// (ivf_flat_v1.h, ROWS LAYOUT) over a dataset's rows, through the index
// search's pipeline with lists that are runs of those rows.  Exact: the
// dataset in tiles, every query probing every tile; refine: one list a
// query, its candidates.  The calls' arguments are checked by the C API
// (capi/exact_api.cpp) on the index these return.
#pragma once

#include <cstdint>

#include "index/search.h"

namespace udf::rt {

/// The rows index of metric `metric` of m (the module keeps one a metric,
/// reused with its scratch), bound to `dataset` (n x dim rows of the metric's
/// element type, host or device memory): exact search's tiles over it, as
/// many as n_queries queries for k want.
udf_index* exact_index(udf_module* m, const char* metric, const udf_tensor* dataset, int64_t n_queries, uint32_t k);
/// The same for a refine of `candidates` (n_queries x m int64 row numbers,
/// host or device; -1 pads, repeats count once): one list a query.  An id
/// that is not a row is dropped from its list (no scan reads it), and the
/// first one's place is kept for check_candidates.
udf_index* refine_index(udf_module* m, const char* metric, const udf_tensor* dataset, const udf_tensor* candidates,
                        int64_t n_queries);
/// Runs a checked call on a rows index (its probes: every list, or the
/// query's own).
void search_rows(udf_index* ix, SearchCall call);
/// After a refine's search: an id of `candidates` that is not a row of
/// `dataset` is UDF_ERROR_INVALID_ARGUMENT naming the first one and its
/// place (the outputs then hold the other candidates' result).
void check_candidates(udf_index* ix, const udf_tensor* dataset, const udf_tensor* candidates);

}  // namespace udf::rt

/*
 * UDF ABI "ivf_flat.filter.v1" -- a predicate inside the scan.
 *
 * A filter is a device function with C linkage that decides, for one query
 * and one stored vector, whether the vector may be a result:
 *
 *     bool keep(uint32_t query, int64_t id, const udf_ctx_v1 *ctx);
 *
 * query is the query's row in the batch given to the search (0 .. n - 1),
 * id the stored vector's user id (as given to the index build or add), and
 * ctx carries the filter's own captures (udf_ctx_v1 of metric_v1.h: dim is
 * 0, n_dims the index's dimension, captures[] the filter's, declared with
 * `udfc --kind filter --capture ...` exactly as for metrics: arrays and
 * scalars of the same types, up to 8).  Arrays of a filter are indexed by
 * whatever the filter chooses (an id, a query row), so their length is not
 * tied to the dimension; the filter must keep its reads in bounds, for
 * example against a scalar capture holding the length.
 *
 * The scan calls keep() for every (query, vector) pair it visits before the
 * metric: a rejected vector is never scored for that query (no metric call)
 * and never becomes a candidate.  Rows with fewer than k kept vectors are
 * padded with id -1 and the worst distance, as for any short result.
 *
 * Filters are linked into modules beside metrics (udf-link); a search names
 * one (udf_search_params.filter) and binds its captures.
 */
#ifndef UDF_ABI_FILTER_V1_H
#define UDF_ABI_FILTER_V1_H

#include <udf/abi/metric_v1.h>

#if defined(__CUDACC_RTC__)
typedef long long int64_t;
#elif !defined(__cplusplus)
#include <stdbool.h>
#endif

#define UDF_ABI_FILTER_V1_ID "ivf_flat.filter.v1"
#define UDF_ABI_FILTER_V1_VERSION 1
#define UDF_ABI_FILTER_V1_MAX_CAPTURES UDF_ABI_METRIC_V1_MAX_CAPTURES

typedef bool (*udf_filter_v1_fn)(uint32_t query, int64_t id, const udf_ctx_v1 *ctx);

#endif /* UDF_ABI_FILTER_V1_H */

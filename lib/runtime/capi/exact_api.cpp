// The C API of exact search and refine (index/rows_search.h): the module's
// rows index bound to the dataset (and the candidates), then the call
// checked on it as a search of an index is, and run.
#include "capi/api_guard.h"
#include "capi/index_checks.h"
#include "cuda/context.h"
#include "index/rows_search.h"

using namespace udf;
using namespace udf::rt;

extern "C" {

UDF_API udf_status udf_exact_search(udf_module* m, const char* metric, const udf_tensor* dataset, const udf_tensor* queries,
                                    const udf_search_params* params, const udf_tensor* out_distances,
                                    const udf_tensor* out_ids) {
  return guarded([&] {
    require(m != nullptr, "module is NULL");
    require(queries != nullptr, "queries is NULL");
    require(params != nullptr, "params is NULL");
    CtxGuard g(m->rt->ctx);
    udf_index* ix = exact_index(m, metric, dataset, queries->rows, params->k);
    search_rows(ix, check_search(ix, queries, params, out_distances, out_ids, nullptr, true));
  });
}

UDF_API udf_status udf_refine(udf_module* m, const char* metric, const udf_tensor* dataset, const udf_tensor* queries,
                              const udf_tensor* candidates, const udf_search_params* params, const udf_tensor* out_distances,
                              const udf_tensor* out_ids) {
  return guarded([&] {
    require(m != nullptr, "module is NULL");
    require(queries != nullptr, "queries is NULL");
    CtxGuard g(m->rt->ctx);
    udf_index* ix = refine_index(m, metric, dataset, candidates, queries->rows);
    search_rows(ix, check_search(ix, queries, params, out_distances, out_ids, nullptr, true));
    check_candidates(ix, dataset, candidates);
  });
}

}  // extern "C"

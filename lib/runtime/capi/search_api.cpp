// The C API of the search: the call's arguments checked once, then the
// one-index search (index/search.h) or the sharded one
// (shards/sharded_index.h).
#include "capi/api_guard.h"
#include "capi/index_checks.h"
#include "capi/versioned.h"
#include "cuda/context.h"
#include "cuda/tensors.h"
#include "shards/sharded_index.h"

using namespace udf;
using namespace udf::rt;

SearchCall udf::rt::check_search(udf_index* ix, const udf_tensor* queries, const udf_search_params* params,
                                 const udf_tensor* out_distances, const udf_tensor* out_ids, CUstream stream,
                                 bool blocking) {
  require(params != nullptr, "params is NULL");
  udf_runtime* rt = ix->mod->rt;
  SearchCall call;
  call.stream = stream;
  call.blocking = blocking;
  call.params = read_versioned(*params, search_params_defaults(), kSearchParamsMinSize, "params", "udf_search_params");
  const udf_search_params& p = call.params;
  const uint32_t max_k = ix->mod->metrics[ix->metric].info.max_k;
  require(p.k >= 1, "k = 0: k must be at least 1");
  // (The messages are built only on failure: these checks run on every search.)
  require(p.k <= max_k, [&] {
    return "k = " + std::to_string(p.k) + " exceeds the largest k of metric " + ix->symbol + " (" + std::to_string(max_k) +
           ")";
  });
  // (A rows index's probes are its own: index/rows_search.h.)
  require(ix->rows_mode != udf_index::RowsMode::None || (p.n_probes >= 1 && p.n_probes <= ix->n_lists), [&] {
    return "n_probes = " + std::to_string(p.n_probes) + " must be in 1 .. n_lists (" + std::to_string(ix->n_lists) + ")";
  });
  require(p.queries_per_item <= 64,
          [&] { return "queries_per_item = " + std::to_string(p.queries_per_item) + " is above 64"; });
  require(queries != nullptr, "queries is NULL");
  if (queries->cols != static_cast<int64_t>(ix->dim))
    fail(UDF_ERROR_INVALID_ARGUMENT, "queries have dimension " + std::to_string(queries->cols) + "; the index has " +
                                         std::to_string(ix->dim));
  call.query_stride = check_tensor(rt, queries, "queries", to_dtype(ix->elem), ix->dim);
  const int64_t n = queries->rows;
  require(n <= 100000000, "too many queries");
  call.dist_stride = check_tensor(rt, out_distances, "out_distances", UDF_DTYPE_F32, p.k, n);
  call.id_stride = check_tensor(rt, out_ids, "out_ids", UDF_DTYPE_I64, p.k, n);
  if (!blocking)
    require(out_distances->device != UDF_HOST_DEVICE && out_ids->device != UDF_HOST_DEVICE,
            "udf_index_search_async writes device outputs only; out_distances / out_ids are host memory "
            "(use udf_index_search)");
  call.queries = queries;
  call.out_dists = out_distances;
  call.out_ids = out_ids;
  return call;
}

namespace {

void search(udf_index* ix, const udf_tensor* queries, const udf_search_params* params, const udf_tensor* out_distances,
            const udf_tensor* out_ids, CUstream stream, bool blocking) {
  require(ix != nullptr, "index is NULL");
  CtxGuard g(ix->mod->rt->ctx);
  const SearchCall call = check_search(ix, queries, params, out_distances, out_ids, stream, blocking);
  if (ix->sharded())
    search_sharded(ix, call);
  else
    search_index(ix, call);
}

}  // namespace

extern "C" {

UDF_API udf_status udf_index_search(udf_index* ix, const udf_tensor* queries, const udf_search_params* params,
                                    const udf_tensor* out_distances, const udf_tensor* out_ids) {
  return guarded([&] { search(ix, queries, params, out_distances, out_ids, nullptr, true); });
}

UDF_API udf_status udf_index_search_async(udf_index* ix, const udf_tensor* queries, const udf_search_params* params,
                                          const udf_tensor* out_distances, const udf_tensor* out_ids, void* stream) {
  return guarded(
      [&] { search(ix, queries, params, out_distances, out_ids, static_cast<CUstream>(stream), false); });
}

}  // extern "C"

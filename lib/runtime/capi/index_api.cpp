// The C API of indexes: parameters, build / add, save / load, rebinding to
// another metric, destruction and queries about an index.  A sharded index
// (shards/sharded_index.h) goes to the shards layer here; the search is in
// capi/search_api.cpp, the sharded builds and loads in capi/shards_api.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "capi/api_guard.h"
#include "capi/index_checks.h"
#include "capi/versioned.h"
#include "cuda/context.h"
#include "cuda/tensors.h"
#include "index/index.h"
#include "shards/sharded_index.h"

using namespace udf;
using namespace udf::rt;

udf_index_params udf::rt::index_params_defaults() {
  udf_index_params p{};
  p.struct_size = sizeof p;
  p.n_lists = 1024;
  p.kmeans_iters = 20;
  p.seed = 1234;
  p.balance = 2.0;
  return p;
}

udf_search_params udf::rt::search_params_defaults() {
  udf_search_params p{};
  p.struct_size = sizeof p;
  p.k = 10;
  p.n_probes = 32;
  return p;
}

udf_index_params udf::rt::checked_build_params(const udf_index_params* params, const udf_tensor* data) {
  require(params != nullptr, "params is NULL");
  require(data != nullptr, "data is NULL");
  const udf_index_params p = read_versioned(*params, index_params_defaults(), kIndexParamsMinSize, "params", "udf_index_params");
  require(p.n_lists >= 1 && p.n_lists <= kMaxLists,
          "n_lists = " + std::to_string(p.n_lists) + " must be in 1 .. " + std::to_string(kMaxLists));
  require(p.shard_layout <= UDF_SHARD_BY_VECTORS, [&] {
    return "shard_layout = " + std::to_string(p.shard_layout) + " is not a udf_shard_layout (0 the default, 1 lists, 2 vectors)";
  });
  require(p.kmeans_mesoclusters <= p.n_lists, [&] {
    return "kmeans_mesoclusters = " + std::to_string(p.kmeans_mesoclusters) + " must be at most n_lists = " +
           std::to_string(p.n_lists) + " (0: the default)";
  });
  require(std::isfinite(p.balance) && (p.balance == 0 || p.balance >= 1.0),
          "balance = " + std::to_string(p.balance) + " must be 0 (no cap) or >= 1");
  require(data->cols >= 1 && data->cols <= 65536, "data has " + std::to_string(data->cols) + " columns (dim must be 1 .. 65536)");
  if (p.coarse_weights) {
    bool any = false;
    for (int64_t d = 0; d < data->cols; ++d) {
      const float w = p.coarse_weights[d];
      require(std::isfinite(w) && w >= 0, [&] {
        return "coarse_weights[" + std::to_string(d) + "] = " + std::to_string(w) + " must be finite and >= 0";
      });
      any = any || w > 0;
    }
    require(any, "coarse_weights are all 0: at least one must be positive");
  }
  if (p.centroids)
    require(data->rows >= 1, "data has no rows");
  else
    require(data->rows >= p.n_lists, "data has " + std::to_string(data->rows) + " rows: fewer than n_lists = " +
                                         std::to_string(p.n_lists) + " (k-means needs a row a list; or pass centroids)");
  return p;
}

void udf::rt::check_declared_weights(const udf_index* ix, const float* weights) {
  const int32_t c = declared_coarse_weights(ix->mod, ix->metric);
  if (c < 0 || weights) return;
  fail(UDF_ERROR_CAPTURE, "metric " + ix->symbol + " takes its coarse weights from capture '" +
                              *ix->mod->manifest.artifacts[ix->metric].coarse_weights +
                              "' (udfc --coarse-weights): pass its value as udf_index_params.coarse_weights");
}

extern "C" {

UDF_API void udf_index_params_init(udf_index_params* p, size_t struct_size) {
  init_versioned(p, struct_size, index_params_defaults());
}

UDF_API void udf_search_params_init(udf_search_params* p, size_t struct_size) {
  init_versioned(p, struct_size, search_params_defaults());
}

UDF_API udf_status udf_index_build(udf_module* m, const char* metric, const udf_tensor* data, const udf_tensor* ids,
                                   const udf_index_params* params, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    require(m != nullptr, "module is NULL");
    const udf_index_params p = checked_build_params(params, data);
    udf_runtime* rt = m->rt;
    CtxGuard g(rt->ctx);
    auto ix = new_index(m, metric, static_cast<uint32_t>(data->cols), p.n_lists);
    check_declared_weights(ix.get(), p.coarse_weights);
    ix->balance = p.balance;
    set_coarse_weights(ix.get(), p.coarse_weights);
    const int64_t stride = check_tensor(rt, data, "data", to_dtype(ix->elem), data->cols);
    std::vector<int64_t> id_list;
    check_ids(rt, ids, data->rows, id_list);
    build_rows(ix.get(), data, stride, ids ? id_list.data() : nullptr, p);
    ++m->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_add(udf_index* ix, const udf_tensor* data, const udf_tensor* ids) {
  return guarded([&] {
    require(ix != nullptr, "index is NULL");
    udf_runtime* rt = ix->mod->rt;
    CtxGuard g(rt->ctx);
    const int64_t stride = check_tensor(rt, data, "data", to_dtype(ix->elem), ix->dim);
    std::vector<int64_t> id_list;
    check_ids(rt, ids, data->rows, id_list);
    if (ix->sharded())
      add_rows_sharded(ix, data, stride, ids ? id_list.data() : nullptr, nullptr);
    else
      add_rows(ix, data, stride, ids ? id_list.data() : nullptr, nullptr);
  });
}

UDF_API udf_status udf_index_save(const udf_index* ix, const char* path) {
  return guarded([&] {
    require(ix != nullptr, "index is NULL");
    require(path != nullptr && *path, "path is NULL or empty");
    if (ix->sharded())
      save_index_file(ix, path, [&](Bytes& file) { append_shard_lists(ix, file); });
    else
      save_index_file(ix, path, [&](Bytes& file) { append_lists(ix, file); });
  });
}

UDF_API udf_status udf_index_load(udf_module* m, const char* path, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    const IndexFile f = read_index_file(path);
    const std::string file_path = path;
    const IndexFileHeader& h = f.header;
    const std::string& symbol = h.symbol;
    // The file is checked before the module, so a corrupt file is reported as such.
    require(m != nullptr, "module is NULL");
    check_index_file_module(m, h, file_path);
    CtxGuard g(m->rt->ctx);
    auto ix = new_index(m, symbol.c_str(), h.dim, h.n_lists);
    check_index_file_coarse(ix.get(), h, file_path);
    set_coarse_weights(ix.get(), h.coarse_weights.empty() ? nullptr : h.coarse_weights.data());
    ix->size = h.size;
    ix->next_id = h.next_id;
    ix->balance = h.balance;
    auto lists = parse_index_file_lists(f.bytes, h, file_path);
    if (!lists) fail(UDF_ERROR_BAD_FORMAT, lists.error().message());
    ix->centroids = std::move(lists->centroids);
    upload_lists(ix.get(), lists->ids, lists->vecs);
    ++m->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_with_metric(const udf_index* ix, udf_module* m, const char* metric, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    require(ix != nullptr, "index is NULL");
    require(m != nullptr, "module is NULL");
    if (ix->sharded()) fail(UDF_ERROR_UNSUPPORTED, "udf_index_with_metric does not take a sharded index (one over several GPUs)");
    require(m->rt == ix->mod->rt, "the module was loaded by another runtime than the index's");
    CtxGuard g(m->rt->ctx);
    auto nx = new_index(m, metric, ix->dim, ix->n_lists);
    if (nx->elem != ix->elem)
      fail(UDF_ERROR_MISMATCH, "metric " + nx->symbol + " takes " + std::string(to_string(nx->elem)) + " elements; the index (metric " +
                                   ix->symbol + ") holds " + std::string(to_string(ix->elem)));
    if (nx->coarse != ix->coarse || nx->normalize != ix->normalize)
      fail(UDF_ERROR_MISMATCH, "metric " + nx->symbol + " has another coarse metric than the index's (metric " +
                                   ix->symbol + "): its lists were clustered for that one");
    nx->balance = ix->balance;
    set_coarse_weights(nx.get(), ix->coarse_weights.empty() ? nullptr : ix->coarse_weights.data());
    nx->size = ix->size;
    nx->next_id = ix->next_id;
    nx->centroids = ix->centroids;
    copy_lists(nx.get(), ix);
    ++m->live_indexes;
    *out = nx.release();
  });
}

UDF_API void udf_index_destroy(udf_index* ix) {
  if (!ix) return;
  udf_module* m = ix->mod;
  try {
    CtxGuard g(m->rt->ctx);
    delete ix;
  } catch (...) {
  }
  --m->live_indexes;
  if (m->released) udf_module_destroy(m);  // the module was destroyed while this index lived
}

UDF_API udf_status udf_index_info_get(const udf_index* ix, udf_index_info* out) {
  return guarded([&] {
    require(ix && out, "index or out is NULL");
    out->metric = ix->symbol.c_str();
    out->elem = to_dtype(ix->elem);
    out->dim = ix->dim;
    out->n_lists = ix->n_lists;
    out->max_list_size = ix->max_list_size;
    out->size = ix->size;
  });
}

UDF_API udf_status udf_index_list_sizes(const udf_index* ix, uint32_t* sizes, size_t n) {
  return guarded([&] {
    require(ix && sizes, "index or sizes is NULL");
    require(n >= ix->n_lists, "sizes has room for " + std::to_string(n) + " lists; the index has " + std::to_string(ix->n_lists));
    std::copy(ix->sizes.begin(), ix->sizes.end(), sizes);
  });
}

UDF_API udf_status udf_index_centroids(const udf_index* ix, float* out, size_t n) {
  return guarded([&] {
    require(ix && out, "index or out is NULL");
    require(n >= ix->centroids.size(), "out has room for " + std::to_string(n) + " floats; the index's centroids are " +
                                           std::to_string(ix->n_lists) + " x " + std::to_string(ix->dim));
    std::copy(ix->centroids.begin(), ix->centroids.end(), out);
  });
}

UDF_API udf_status udf_index_coarse_weights(const udf_index* ix, float* out, size_t n, size_t* count) {
  return guarded([&] {
    require(ix && count, "index or count is NULL");
    *count = ix->coarse_weights.size();
    if (!out) return;
    require(n >= ix->coarse_weights.size(), "out has room for " + std::to_string(n) + " floats; the index has " +
                                                std::to_string(ix->coarse_weights.size()) + " coarse weights");
    std::copy(ix->coarse_weights.begin(), ix->coarse_weights.end(), out);
  });
}

UDF_API udf_status udf_index_last_search_stats(const udf_index* ix, udf_search_stats* out) {
  return guarded([&] {
    require(ix && out, "index or out is NULL");
    *out = ix->stats;
  });
}

UDF_API udf_status udf_index_set_stage_timing(udf_index* ix, int enabled) {
  return guarded([&] {
    require(ix, "index is NULL");
    ix->stage_timing = enabled != 0;
  });
}

UDF_API udf_status udf_index_last_search_work(const udf_index* ix, udf_search_work* out) {
  return guarded([&] {
    require(ix && out, "index or out is NULL");
    *out = ix->work;
  });
}

}  // extern "C"

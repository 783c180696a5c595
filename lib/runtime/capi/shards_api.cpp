// The C API of sharded indexes (include/udf/runtime.h, "several GPUs"):
// builds over several modules, the chunked build, loads, and queries about
// the shards.  The shards layer (shards/sharded_index.h) does the work.
#include <algorithm>

#include "capi/api_guard.h"
#include "capi/index_checks.h"
#include "cuda/context.h"
#include "cuda/tensors.h"
#include "shards/sharded_index.h"

using namespace udf;
using namespace udf::rt;

// The modules of a sharded index: each holds `metric` with the first's artifact.
void udf::rt::check_modules(udf_module* const* modules, size_t n, const char* metric) {
  require(modules != nullptr, "modules is NULL");
  require(n >= 1 && n <= 64, "n_modules = " + std::to_string(n) + " must be in 1 .. 64");
  require(metric != nullptr, "metric is NULL");
  std::string key;
  for (size_t i = 0; i < n; ++i) {
    require(modules[i] != nullptr, "modules[" + std::to_string(i) + "] is NULL");
    size_t mi = 0;
    if (udf_module_find_metric(modules[i], metric, &mi) != UDF_OK)
      fail(UDF_ERROR_INVALID_ARGUMENT, "modules[" + std::to_string(i) + "]: " + udf_last_error());
    const std::string& k = modules[i]->manifest.artifacts[mi].cache_key;
    if (i == 0) key = k;
    if (k != key)
      fail(UDF_ERROR_MISMATCH, "modules[" + std::to_string(i) + "] holds another artifact for metric " + metric +
                                   " than modules[0] (cache key " + k.substr(0, 16) + "..., modules[0] has " +
                                   key.substr(0, 16) + "...): a sharded index takes the same module on every device");
  }
}

// A udf_shard_layout, checked: the default (by vectors), UDF_SHARD_BY_LISTS or UDF_SHARD_BY_VECTORS.
uint32_t udf::rt::checked_layout(uint32_t layout) {
  if (layout == UDF_SHARD_DEFAULT) return layout;
  require(layout == UDF_SHARD_BY_LISTS || layout == UDF_SHARD_BY_VECTORS,
          [&] { return "shard_layout = " + std::to_string(layout) + " is not a udf_shard_layout (0, 1 lists, 2 vectors)"; });
  return layout;
}

extern "C" {

UDF_API udf_status udf_index_build_sharded(udf_module* const* modules, size_t n_modules, const char* metric,
                                           const udf_tensor* data, const udf_tensor* ids, const udf_index_params* params,
                                           udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    check_modules(modules, n_modules, metric);
    const udf_index_params p = checked_build_params(params, data);
    udf_runtime* hrt = modules[0]->rt;
    auto ix = new_sharded(modules, n_modules, metric, static_cast<uint32_t>(data->cols), p.n_lists, p.shard_layout,
                          p.coarse_weights);
    check_declared_weights(ix.get(), p.coarse_weights);
    ix->balance = p.balance;
    for (auto& sh : shards_of(ix.get()).shards) sh->balance = p.balance;
    int64_t stride = 0;
    std::vector<int64_t> id_list;
    {
      CtxGuard g(hrt->ctx);
      stride = check_tensor(hrt, data, "data", to_dtype(ix->elem), data->cols);
      check_ids(hrt, ids, data->rows, id_list);
    }
    make_group(ix.get(), false);
    TransportStart transport(ix.get());  // NCCL's start overlaps the build
    build_rows_sharded(ix.get(), data, stride, ids ? id_list.data() : nullptr, p);
    {
      BuildProfile prof(hrt);
      transport.finish();
      prof.lap("shards: wait for the transport");
    }
    ++modules[0]->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_build_chunked(udf_module* const* modules, size_t n_modules, const char* metric, size_t n_chunks,
                                           udf_chunk_fn chunk, void* user, const udf_index_params* params, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    require(chunk != nullptr, "chunk (the callback) is NULL");
    check_modules(modules, n_modules, metric);
    auto source = [&](size_t c, udf_tensor& data, udf_tensor& ids) {
      data = udf_tensor{};
      ids = udf_tensor{};
      const int r = chunk(user, c, &data, &ids);
      if (r != 0)
        fail(UDF_ERROR_IO, "the chunk callback returned " + std::to_string(r) + " for chunk " + std::to_string(c) +
                               " of " + std::to_string(n_chunks));
    };
    require(n_chunks >= 1, "n_chunks = 0: there must be at least one chunk");
    udf_tensor first{}, first_ids{};
    source(0, first, first_ids);  // its width, and the build's checks
    const udf_index_params p = checked_build_params(params, &first);
    std::unique_ptr<udf_index> ix;
    if (n_modules == 1) {
      CtxGuard g(modules[0]->rt->ctx);
      ix = new_index(modules[0], metric, static_cast<uint32_t>(first.cols), p.n_lists);
      check_declared_weights(ix.get(), p.coarse_weights);
      ix->balance = p.balance;
      set_coarse_weights(ix.get(), p.coarse_weights);
    } else {
      ix = new_sharded(modules, n_modules, metric, static_cast<uint32_t>(first.cols), p.n_lists, p.shard_layout,
                       p.coarse_weights);
      check_declared_weights(ix.get(), p.coarse_weights);
      ix->balance = p.balance;
      for (auto& sh : shards_of(ix.get()).shards) sh->balance = p.balance;
      make_group(ix.get());
    }
    build_in_chunks(ix.get(), n_chunks, source, p);
    ++modules[0]->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_load_sharded(udf_module* const* modules, size_t n_modules, const char* path, udf_index** out) {
  return udf_index_load_sharded_layout(modules, n_modules, path, UDF_SHARD_DEFAULT, out);
}

UDF_API udf_status udf_index_load_sharded_layout(udf_module* const* modules, size_t n_modules, const char* path,
                                                 uint32_t shard_layout, udf_index** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    checked_layout(shard_layout);  // (before the file is read)
    const IndexFile f = read_index_file(path);
    const std::string file_path = path;
    const IndexFileHeader& h = f.header;
    require(modules != nullptr, "modules is NULL");
    require(n_modules >= 1 && n_modules <= 64, "n_modules = " + std::to_string(n_modules) + " must be in 1 .. 64");
    for (size_t i = 0; i < n_modules; ++i) {
      require(modules[i] != nullptr, "modules[" + std::to_string(i) + "] is NULL");
      check_index_file_module(modules[i], h, file_path);
    }
    check_modules(modules, n_modules, h.symbol.c_str());
    auto lists = parse_index_file_lists(f.bytes, h, file_path);
    if (!lists) fail(UDF_ERROR_BAD_FORMAT, lists.error().message());
    auto ix = new_sharded(modules, n_modules, h.symbol.c_str(), h.dim, h.n_lists, shard_layout, nullptr);
    check_index_file_coarse(ix.get(), h, file_path);
    set_coarse_weights_sharded(ix.get(), h.coarse_weights.empty() ? nullptr : h.coarse_weights.data());
    ix->size = h.size;
    ix->next_id = h.next_id;
    ix->balance = h.balance;
    ix->centroids = std::move(lists->centroids);
    load_shards(ix.get(), h, *lists);
    make_group(ix.get());
    ++modules[0]->live_indexes;
    *out = ix.release();
  });
}

UDF_API udf_status udf_index_shard_count(const udf_index* ix, size_t* count) {
  return guarded([&] {
    require(ix && count, "index or count is NULL");
    *count = ix->sharded() ? shards_of(ix).shards.size() : 1;
  });
}

UDF_API udf_status udf_index_shard_info(const udf_index* ix, size_t shard, udf_shard_info* out) {
  return guarded([&] {
    require(ix && out, "index or out is NULL");
    const size_t n = ix->sharded() ? shards_of(ix).shards.size() : 1;
    require(shard < n, "shard " + std::to_string(shard) + " is out of range: the index has " + std::to_string(n));
    *out = udf_shard_info{};
    if (!ix->sharded()) {
      out->device = ix->mod->rt->ordinal;
      out->layout = UDF_SHARD_BY_LISTS;
      out->list_begin = 0;
      out->list_end = ix->n_lists;
      out->size = ix->size;
      return;
    }
    const ShardedIndex& set = shards_of(ix);
    const udf_index* sh = set.shards[shard].get();
    out->device = sh->mod->rt->ordinal;
    out->layout = set.layout;
    out->list_begin = set.by_vectors() ? 0 : set.lists[shard];
    out->list_end = set.by_vectors() ? ix->n_lists : set.lists[shard + 1];
    out->size = sh->size;
  });
}

UDF_API const char* udf_index_shard_transport(const udf_index* ix) {
  if (!ix || !ix->sharded() || shards_of(ix).shards.size() < 2) return "none";
  return shards_of(ix).group->transport.c_str();
}

}  // extern "C"

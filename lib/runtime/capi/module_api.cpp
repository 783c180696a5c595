// The C API of modules: loading a serialized module, its metrics and
// filters, destruction; and the on-demand module that udf_module_link_ex
// makes (capi/link_api.cpp).
#include <cstring>

#include "capi/api_guard.h"
#include "capi/link_api.h"
#include "module/module.h"
#include "udf/support/fs.h"

using namespace udf;
using namespace udf::rt;

udf_status udf::rt::load_on_demand(udf_runtime* rt, LinkSession session, const std::string& name, uint32_t prefetch_k,
                                   udf_module** out) {
  return guarded([&] {
    auto m = new_on_demand_module(rt, std::move(session), name, prefetch_k);
    ++rt->live_children;
    *out = m.release();
  });
}

extern "C" {

UDF_API udf_status udf_module_load_file(udf_runtime* rt, const char* path, udf_module** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    require(rt != nullptr, "runtime is NULL");
    require(path != nullptr && *path, "path is NULL or empty");
    auto bytes = read_file(path, limits::kModule);
    if (!bytes) fail(UDF_ERROR_IO, bytes.error().message());
    *out = load_module(rt, *bytes, path);
  });
}

UDF_API udf_status udf_module_load_memory(udf_runtime* rt, const void* data, size_t size, const char* name,
                                          udf_module** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    require(rt != nullptr, "runtime is NULL");
    require(data != nullptr && size > 0, "data is NULL or size is 0");
    *out = load_module(rt, std::span(static_cast<const std::uint8_t*>(data), size), name ? name : "<memory>");
  });
}

UDF_API void udf_module_destroy(udf_module* m) {
  if (!m) return;
  if (m->live_indexes > 0) {  // freed when its last index is (udf_index_destroy)
    m->released = true;
    return;
  }
  try {
    CtxGuard g(m->rt->ctx);
    m->rows_indexes.clear();  // exact search's and refine's scratch (device memory)
    m->libs.clear();
  } catch (...) {
  }
  udf_runtime* rt = m->rt;
  // prepare_smem's record is keyed by CUfunction: a module loaded later may
  // get this one's handles back, without their shared-memory attribute
  // (a launch then fails with CUDA_ERROR_INVALID_VALUE).  Forget them all;
  // each kernel is asked again on its next launch.
  rt->smem_checked.clear();
  --rt->live_children;
  delete m;
  if (rt->released) udf_runtime_destroy(rt);
}

UDF_API udf_status udf_module_metric_count(const udf_module* m, size_t* count) {
  return guarded([&] {
    require(m && count, "module or count is NULL");
    *count = m->metrics.size();
  });
}

UDF_API udf_status udf_module_metric_info(const udf_module* m, size_t index, udf_metric_info* out) {
  return guarded([&] {
    require(m && out, "module or out is NULL");
    require(index < m->metrics.size(), "metric index " + std::to_string(index) + " is out of range (" +
                                           std::to_string(m->metrics.size()) + " metrics)");
    *out = m->metrics[index].info;
  });
}

UDF_API udf_status udf_module_metric_abi(const udf_module* m, size_t index, udf_metric_abi* out) {
  return guarded([&] {
    require(m && out, "module or out is NULL");
    require(index < m->metrics.size(), "metric index " + std::to_string(index) + " is out of range (" +
                                           std::to_string(m->metrics.size()) + " metrics)");
    *out = m->metrics[index].abi;
  });
}

UDF_API udf_status udf_module_find_metric(const udf_module* m, const char* symbol, size_t* index) {
  return guarded([&] {
    require(m && symbol && index, "module, symbol or index is NULL");
    *index = find_metric(m, symbol);
  });
}

UDF_API udf_status udf_module_capture_info(const udf_module* m, size_t metric, size_t capture, udf_capture_info* out) {
  return guarded([&] {
    require(m && out, "module or out is NULL");
    require(metric < m->metrics.size(), "metric index " + std::to_string(metric) + " is out of range");
    require(capture < m->metrics[metric].captures.size(), "capture index " + std::to_string(capture) + " is out of range");
    *out = m->metrics[metric].captures[capture];
  });
}

UDF_API udf_status udf_module_metric_coarse_weights(const udf_module* m, size_t metric, int32_t* capture) {
  return guarded([&] {
    require(m && capture, "module or capture is NULL");
    require(metric < m->metrics.size(), "metric index " + std::to_string(metric) + " is out of range");
    *capture = declared_coarse_weights(m, metric);
  });
}

UDF_API udf_status udf_module_filter_count(const udf_module* m, size_t* count) {
  return guarded([&] {
    require(m && count, "module or count is NULL");
    *count = m->filters.size();
  });
}

UDF_API udf_status udf_module_filter_info(const udf_module* m, size_t index, udf_filter_info* out) {
  return guarded([&] {
    require(m && out, "module or out is NULL");
    require(index < m->filters.size(), "filter index " + std::to_string(index) + " is out of range (" +
                                           std::to_string(m->filters.size()) + " filters)");
    *out = m->filters[index].info;
  });
}

UDF_API udf_status udf_module_find_filter(const udf_module* m, const char* symbol, size_t* index) {
  return guarded([&] {
    require(m && symbol && index, "module, symbol or index is NULL");
    *index = find_filter(m, symbol);
  });
}

UDF_API udf_status udf_module_filter_capture_info(const udf_module* m, size_t filter, size_t capture, udf_capture_info* out) {
  return guarded([&] {
    require(m && out, "module or out is NULL");
    require(filter < m->filters.size(), "filter index " + std::to_string(filter) + " is out of range");
    require(capture < m->filters[filter].captures.size(), "capture index " + std::to_string(capture) + " is out of range");
    *out = m->filters[filter].captures[capture];
  });
}

UDF_API const char* udf_module_manifest_json(const udf_module* m) { return m ? m->json.c_str() : ""; }
UDF_API const char* udf_module_cache_key(const udf_module* m) { return m ? m->manifest.cache_key.c_str() : ""; }

}  // extern "C"

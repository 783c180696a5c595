// The C API boundary (errors -> udf_status + udf_last_error), the runtime
// (device, primary context, stream, the embedded index kernels) and modules.
#include <algorithm>
#include <cstring>
#include <new>
#include <regex>

#include "api_guard.h"
#include "internal.h"
#include "schedule_plan.h"
#include "udf/support/fs.h"
#include "udf/support/hash.h"

extern "C" const unsigned char udf_ivf_index_v1_fatbin[];

namespace udf::rt {

thread_local std::string g_last_error;

void set_last_error(const std::string& m) { g_last_error = m; }

udf_status to_status(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const RuntimeFailure& f) {
    set_last_error(f.what());
    return f.status;
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return UDF_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& x) {
    set_last_error(std::string("internal error: ") + x.what());
    return UDF_ERROR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return UDF_ERROR_INTERNAL;
  }
}

void prepare_smem_now(udf_runtime* rt, CUfunction f, size_t bytes, const std::string& what) {
  int static_smem = 0;
  CU(cuFuncGetAttribute, &static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f);
  if (bytes + static_cast<size_t>(static_smem) > static_cast<size_t>(rt->max_smem_optin))
    fail(UDF_ERROR_UNSUPPORTED, what + " needs " + std::to_string(bytes + static_smem) +
                                    " bytes of shared memory per block; this GPU allows " +
                                    std::to_string(rt->max_smem_optin));
  // Static and dynamic together above 48 KB need the opt-in (the direct
  // selection's 1024-thread block has 18 KB of static shared memory).
  if (bytes + static_cast<size_t>(static_smem) > 48 * 1024)
    CU(cuFuncSetAttribute, f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes));
  size_t& checked = rt->smem_checked[f];
  checked = std::max(checked, bytes);
}

void launch(udf_runtime* rt, CUfunction f, unsigned grid, size_t smem, void* args) {
  launch_on(rt->stream, f, grid, 1, 128, smem, args);
}

void launch_on(CUstream stream, CUfunction f, unsigned grid_x, unsigned grid_y, unsigned block, size_t smem, void* args) {
  if (grid_x == 0 || grid_y == 0) return;
  void* params[] = {args};
  CU(cuLaunchKernel, f, grid_x, grid_y, 1, block, 1, 1, static_cast<unsigned>(smem), stream, params, nullptr);
}

void sync(udf_runtime* rt) { CU(cuStreamSynchronize, rt->stream); }

udf_dtype to_dtype(ElemType e) {
  switch (e) {
    case ElemType::F32: return UDF_DTYPE_F32;
    case ElemType::F16: return UDF_DTYPE_F16;
    case ElemType::I8: return UDF_DTYPE_I8;
    case ElemType::U8: return UDF_DTYPE_U8;
  }
  return UDF_DTYPE_F32;
}

size_t elem_size(ElemType e) { return udf_dtype_size(to_dtype(e)); }

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

void require(bool ok, const std::string& m) {
  if (!ok) fail(UDF_ERROR_INVALID_ARGUMENT, m);
}

udf_dtype capture_dtype(CaptureType t) {
  switch (t) {
    case CaptureType::F32: return UDF_DTYPE_F32;
    case CaptureType::F16: return UDF_DTYPE_F16;
    case CaptureType::I32: return UDF_DTYPE_I32;
    case CaptureType::U8: return UDF_DTYPE_U8;
  }
  return UDF_DTYPE_F32;
}

int k_max_of(const ModuleEntry& e) {
  auto it = e.launch.find("k_max");
  if (it != e.launch.end()) return static_cast<int>(it->second);
  std::smatch m;
  static const std::regex re("_k([0-9]+)$");
  if (std::regex_search(e.variant, m, re)) return std::stoi(m[1]);
  return 0;
}

std::string archs_of(const ModuleManifest& m) {
  std::string s;
  for (Arch a : m.archs) s += (s.empty() ? "" : ", ") + arch_name(a);
  return s;
}

// The module's checks before anything is loaded.
void check_manifest(const ModuleManifest& mf, const std::string& name) {
  if (mf.abi_id != "ivf_flat.metric.v1" || mf.abi_version != 1)
    fail(UDF_ERROR_MISMATCH, name + ": module ABI " + mf.abi_id + " version " + std::to_string(mf.abi_version) +
                                 " is not supported (this runtime runs ivf_flat.metric.v1 version 1)");
  if (mf.version_minor > kModuleManifestMinor)
    fail(UDF_ERROR_MISMATCH, name + ": module manifest version 1." + std::to_string(mf.version_minor) +
                                 " is newer than this runtime reads (1." + std::to_string(kModuleManifestMinor) +
                                 "): its kernels may take arguments this runtime does not pass; load it with a newer runtime");
  if (mf.kernel_pack_name != "ivf_flat_v1")
    fail(UDF_ERROR_MISMATCH, name + ": module was linked with kernel pack '" + mf.kernel_pack_name +
                                 "'; this runtime runs ivf_flat_v1");
  if (mf.artifacts.empty()) fail(UDF_ERROR_BAD_FORMAT, name + ": module has no metrics");
}

udf_module* load_module(udf_runtime* rt, std::span<const std::uint8_t> bytes, const std::string& name) {
  require(rt != nullptr, "runtime is NULL");
  auto parsed = parse_module(bytes, name);
  if (!parsed) fail(UDF_ERROR_BAD_FORMAT, parsed.error().message());
  check_manifest(parsed->manifest, name);
  std::vector<ModuleEntry> entries = std::move(parsed->manifest.entries);
  parsed->manifest.entries.clear();
  auto m = new_module(rt, name, std::move(parsed->manifest), entries);
  load_images(m.get(), parsed->images, entries);
  ++rt->live_children;
  return m.release();
}

}  // namespace

std::unique_ptr<udf_module> new_module(udf_runtime* rt, std::string name, ModuleManifest manifest,
                                       const std::vector<ModuleEntry>& available) {
  auto m = std::make_unique<udf_module>();
  m->rt = rt;
  m->name = std::move(name);
  m->manifest = std::move(manifest);
  const ModuleManifest& mf = m->manifest;
  // Each metric's largest k: its largest unfiltered scan with a merge of the same k_max.
  auto max_k_of = [&](std::size_t i, Order order) {
    int max_k = 0;
    for (const auto& s : available) {
      const int kmax = k_max_of(s);
      if (!s.artifact || *s.artifact != static_cast<int>(i) || s.filter) continue;
      const bool merge = std::any_of(available.begin(), available.end(), [&](const ModuleEntry& e) {
        return !e.artifact && e.variant.rfind("udf_ivf_merge_v1_", 0) == 0 && k_max_of(e) == kmax &&
               (e.variant.find("_max_") != std::string::npos) == (order == Order::Max);
      });
      if (merge) max_k = std::max(max_k, kmax);
    }
    return max_k;
  };
  for (size_t i = 0; i < mf.artifacts.size(); ++i) {
    const ModuleArtifact& a = mf.artifacts[i];
    udf_module::Metric mt;
    mt.finalize = a.finalize.value_or("");
    for (const Capture& c : a.captures)
      mt.captures.push_back(udf_capture_info{c.name.c_str(), capture_dtype(c.type), c.array ? 1 : 0});
    const int max_k = max_k_of(i, a.order);
    if (max_k == 0)
      fail(UDF_ERROR_BAD_FORMAT, m->name + ": metric " + a.symbol + " has no scan entry with a matching merge kernel");
    udf_metric_info& inf = mt.info;
    inf.symbol = a.symbol.c_str();
    inf.finalize = nullptr;
    inf.source_name = a.source_name.c_str();
    inf.cache_key = a.cache_key.c_str();
    inf.elem = to_dtype(a.elem);
    inf.acc = a.acc == AccType::F32 ? UDF_DTYPE_F32 : UDF_DTYPE_I32;
    inf.order = a.order == Order::Min ? UDF_ORDER_MIN : UDF_ORDER_MAX;
    inf.coarse_metric = a.coarse_metric == CoarseMetric::L2             ? UDF_COARSE_L2
                        : a.coarse_metric == CoarseMetric::InnerProduct ? UDF_COARSE_INNER_PRODUCT
                                                                        : UDF_COARSE_COSINE;
    inf.initial = a.shape ? 0.0 : a.initial.value;
    mt.abi = !a.shape ? UDF_METRIC_ABI_V1 : *a.shape == MetricShape::State ? UDF_METRIC_ABI_V2_STATE : UDF_METRIC_ABI_V2_VECTOR;
    inf.n_captures = static_cast<uint32_t>(a.captures.size());
    inf.max_k = static_cast<uint32_t>(max_k);
    m->metrics.push_back(std::move(mt));
  }
  for (auto& mt : m->metrics) mt.info.finalize = mt.finalize.empty() ? nullptr : mt.finalize.c_str();
  for (const ModuleFilter& f : mf.filters) {
    udf_module::Filter ft;
    for (const Capture& c : f.captures)
      ft.captures.push_back(udf_capture_info{c.name.c_str(), capture_dtype(c.type), c.array ? 1 : 0});
    ft.info.symbol = f.symbol.c_str();
    ft.info.source_name = f.source_name.c_str();
    ft.info.cache_key = f.cache_key.c_str();
    ft.info.n_captures = static_cast<uint32_t>(f.captures.size());
    m->filters.push_back(std::move(ft));
  }
  m->json = to_json(m->manifest);
  return m;
}

void load_images(udf_module* m, std::span<const Bytes> images, const std::vector<ModuleEntry>& entries) {
  CtxGuard g(m->rt->ctx);
  const int first = static_cast<int>(m->libs.size());
  const bool describe = m->manifest.images.size() == m->libs.size();  // linked here: no manifest entry yet
  for (const auto& image : images) {
    CUlibrary lib = nullptr;
    CU(cuLibraryLoadData, &lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    m->libs.emplace_back(lib);
    if (describe) m->manifest.images.push_back(ModuleImage{image.size(), sha256_hex(image)});
  }
  const ModuleManifest& mf = m->manifest;
  // Lazy loading: code for this GPU is looked up only here, so fetch every entry now.
  for (ModuleEntry e : entries) {
    e.image += first;
    CUkernel k = nullptr;
    CUresult r = cuda().cuLibraryGetKernel(&k, m->libs.at(e.image).get(), e.name.c_str());
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
      fail(UDF_ERROR_NO_BINARY_FOR_GPU, m->name + ": the module has no code for this GPU (" + m->rt->info.name + ", sm_" +
                                            std::to_string(m->rt->info.arch) + "); it was linked for " + archs_of(mf) +
                                            ": link it again with --arch sm_" + std::to_string(m->rt->info.arch));
    cu_check(r, "cuLibraryGetKernel", m->name + ": entry " + e.name);
    CUfunction f = nullptr;
    cu_check(cuda().cuKernelGetFunction(&f, k), "cuKernelGetFunction", m->name + ": entry " + e.name);
    const int kmax = k_max_of(e);
    if (e.artifact) {
      if (*e.artifact < 0 || static_cast<size_t>(*e.artifact) >= mf.artifacts.size() || kmax <= 0)
        fail(UDF_ERROR_BAD_FORMAT, m->name + ": entry " + e.name + " has a bad artifact index or k_max");
      if (e.filter && (*e.filter < 0 || static_cast<size_t>(*e.filter) >= mf.filters.size()))
        fail(UDF_ERROR_BAD_FORMAT, m->name + ": entry " + e.name + " has a bad filter index");
      auto rq = e.launch.find("recommended_queries_per_item");
      auto flag = [&](const char* key) {
        auto it = e.launch.find(key);
        return it != e.launch.end() && it->second == 1;
      };
      m->scans.push_back(udf_module::Scan{*e.artifact, e.filter.value_or(-1), kmax,
                                          rq == e.launch.end() ? 8 : static_cast<int>(rq->second), e.name, f,
                                          flag("tail_merge"), flag("query_bound"), flag("prune"),
                                          scan_sort_capacity(e.launch, static_cast<uint32_t>(kmax))});
    } else if (e.variant.rfind("udf_ivf_merge_v1_", 0) == 0 && kmax > 0) {
      const bool is_max = e.variant.find("_max_") != std::string::npos;
      m->merges.push_back(udf_module::Merge{is_max ? Order::Max : Order::Min, kmax, e.name, f});
    }
    m->manifest.entries.push_back(std::move(e));
  }
  m->json = to_json(m->manifest);
}

}  // namespace udf::rt

using namespace udf;
using namespace udf::rt;

extern "C" {

UDF_API uint32_t udf_runtime_api_version(void) { return UDF_RUNTIME_API_VERSION; }

// The fault hook for tests (not in runtime.h; test/unit/runtime_fault_test.cpp
// and docs/runtime.md): the call of the driver function `function` after the
// next `calls_first` ones fails with `cuda_result` (a CUresult) instead of
// reaching the driver, once; calls_first < 0 disarms.  *pending (if not
// NULL) gets what was left of the previous arming: > 0 when its fault has
// not happened.  Loads the driver.
UDF_API udf_status udf_testing_cuda_fault(const char* function, int64_t calls_first, int cuda_result, int64_t* pending) {
  return guarded([&] {
    if (!function) fail(UDF_ERROR_INVALID_ARGUMENT, "udf_testing_cuda_fault: function is NULL");
    cuda();  // the wrappers exist once the driver is loaded
    int64_t left = 0;
    if (!arm_cuda_fault(function, calls_first, cuda_result, &left))
      fail(UDF_ERROR_INVALID_ARGUMENT, std::string("udf_testing_cuda_fault: the runtime does not call ") + function);
    if (pending) *pending = left;
  });
}
UDF_API const char* udf_last_error(void) { return g_last_error.c_str(); }

UDF_API const char* udf_status_name(udf_status s) {
  switch (s) {
#define UDF_CASE(x) \
  case x: return #x;
    UDF_CASE(UDF_OK)
    UDF_CASE(UDF_ERROR_INVALID_ARGUMENT)
    UDF_CASE(UDF_ERROR_NO_DRIVER)
    UDF_CASE(UDF_ERROR_NO_DEVICE)
    UDF_CASE(UDF_ERROR_CUDA)
    UDF_CASE(UDF_ERROR_OUT_OF_MEMORY)
    UDF_CASE(UDF_ERROR_IO)
    UDF_CASE(UDF_ERROR_BAD_FORMAT)
    UDF_CASE(UDF_ERROR_MISMATCH)
    UDF_CASE(UDF_ERROR_NO_BINARY_FOR_GPU)
    UDF_CASE(UDF_ERROR_CAPTURE)
    UDF_CASE(UDF_ERROR_UNSUPPORTED)
    UDF_CASE(UDF_ERROR_NOT_IMPLEMENTED)
    UDF_CASE(UDF_ERROR_INTERNAL)
#undef UDF_CASE
  }
  return "UDF_ERROR_UNKNOWN";
}

UDF_API size_t udf_dtype_size(udf_dtype t) {
  switch (t) {
    case UDF_DTYPE_F32: return 4;
    case UDF_DTYPE_F16: return 2;
    case UDF_DTYPE_I8: return 1;
    case UDF_DTYPE_U8: return 1;
    case UDF_DTYPE_I32: return 4;
    case UDF_DTYPE_I64: return 8;
  }
  return 0;
}

UDF_API const char* udf_dtype_name(udf_dtype t) {
  switch (t) {
    case UDF_DTYPE_F32: return "f32";
    case UDF_DTYPE_F16: return "f16";
    case UDF_DTYPE_I8: return "i8";
    case UDF_DTYPE_U8: return "u8";
    case UDF_DTYPE_I32: return "i32";
    case UDF_DTYPE_I64: return "i64";
  }
  return nullptr;
}

UDF_API udf_status udf_driver_version(int32_t* version) {
  return guarded([&] {
    require(version != nullptr, "version is NULL");
    *version = cuda().driver_version;
  });
}

UDF_API udf_status udf_runtime_create(int32_t ordinal, udf_runtime** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL");
    *out = nullptr;
    const CudaApi& c = cuda();
    int count = 0;
    CU(cuDeviceGetCount, &count);
    if (count == 0) fail(UDF_ERROR_NO_DEVICE, "no CUDA device");
    if (ordinal < 0 || ordinal >= count)
      fail(UDF_ERROR_NO_DEVICE, "device ordinal " + std::to_string(ordinal) + " is out of range: " +
                                    std::to_string(count) + " device(s)");
    auto rt = std::unique_ptr<udf_runtime, void (*)(udf_runtime*)>(new udf_runtime, udf_runtime_destroy);
    rt->ordinal = ordinal;
    CU(cuDeviceGet, &rt->dev, ordinal);
    int major = 0, minor = 0, sms = 0;
    CU(cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, rt->dev);
    CU(cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, rt->dev);
    CU(cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, rt->dev);
    CU(cuDeviceGetAttribute, &rt->max_smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, rt->dev);
    CU(cuDeviceGetName, rt->info.name, static_cast<int>(sizeof rt->info.name), rt->dev);
    size_t mem = 0;
    CU(cuDeviceTotalMem, &mem, rt->dev);
    rt->info.ordinal = ordinal;
    rt->info.arch = major * 10 + minor;
    rt->info.sm_count = sms;
    rt->info.total_memory = static_cast<int64_t>(mem);
    rt->info.max_shared_per_block = rt->max_smem_optin;
    CUcontext ctx = nullptr;
    CU(cuDevicePrimaryCtxRetain, &ctx, rt->dev);
    rt->ctx = ctx;
    CtxGuard g(rt->ctx);
    CU(cuStreamCreate, &rt->stream, CU_STREAM_NON_BLOCKING);
    CU(cuStreamCreate, &rt->aux_stream, CU_STREAM_NON_BLOCKING);
    CU(cuStreamCreate, &rt->wake_stream, CU_STREAM_NON_BLOCKING);
    CUlibrary lib = nullptr;
    cu_check(c.cuLibraryLoadData(&lib, udf_ivf_index_v1_fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0),
             "cuLibraryLoadData", "loading the runtime's index kernels");
    rt->index_lib = Library(lib);
    auto get = [&](const char* n) {
      CUkernel k = nullptr;
      cu_check(c.cuLibraryGetKernel(&k, lib, n), "cuLibraryGetKernel", std::string("index kernel ") + n);
      CUfunction f = nullptr;
      cu_check(c.cuKernelGetFunction(&f, k), "cuKernelGetFunction", std::string("index kernel ") + n);
      return f;
    };
    rt->f_convert = get("udf_ivf_index_v1_convert");
    rt->f_accumulate = get("udf_ivf_index_v1_accumulate");
    rt->f_coarse_keys = get("udf_ivf_index_v1_coarse_keys");
    rt->f_coarse_keys_few = get("udf_ivf_index_v1_coarse_keys_few");
    rt->f_coarse_keys_inline = get("udf_ivf_index_v1_coarse_keys_inline");
    rt->f_select = get("udf_ivf_index_v1_select");
    rt->f_select_direct = get("udf_ivf_index_v1_select_direct");
    rt->f_list_rows = get("udf_ivf_index_v1_list_rows");
    rt->f_move_lists = get("udf_ivf_index_v1_move_lists");
    rt->f_shard_merge = get("udf_ivf_index_v1_shard_merge");
    rt->f_resolve_keys = get("udf_ivf_index_v1_resolve_keys");
    rt->f_sched_small = get("udf_ivf_index_v1_sched_small");
    rt->f_sched_count = get("udf_ivf_index_v1_sched_count");
    rt->f_sched_plan = get("udf_ivf_index_v1_sched_plan");
    rt->f_sched_scatter_rows = get("udf_ivf_index_v1_sched_scatter_rows");
    rt->f_sched_query_rows = get("udf_ivf_index_v1_sched_query_rows");
    rt->f_sched_fill = get("udf_ivf_index_v1_sched_fill");
    *out = rt.release();
  });
}

UDF_API void udf_runtime_destroy(udf_runtime* rt) {
  if (!rt) return;
  if (rt->live_children > 0) {  // freed when its last module is (udf_module_destroy)
    rt->released = true;
    return;
  }
  try {
    if (rt->ctx) {
      {
        CtxGuard g(rt->ctx);
        rt->index_lib.reset();
        if (rt->stream) cuda().cuStreamDestroy(rt->stream);
        if (rt->aux_stream) cuda().cuStreamDestroy(rt->aux_stream);
        if (rt->wake_stream) {  // its host functions use the host pool, freed below
          cuda().cuStreamSynchronize(rt->wake_stream);
          cuda().cuStreamDestroy(rt->wake_stream);
        }
      }
      cuda().cuDevicePrimaryCtxRelease(rt->dev);
    }
  } catch (...) {
  }
  delete rt;
}

UDF_API udf_status udf_runtime_device_info(const udf_runtime* rt, udf_device_info* out) {
  return guarded([&] {
    require(rt && out, "runtime or out is NULL");
    *out = rt->info;
  });
}

UDF_API udf_status udf_runtime_stream(const udf_runtime* rt, void** stream) {
  return guarded([&] {
    require(rt && stream, "runtime or stream is NULL");
    *stream = rt->stream;
  });
}

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
    std::string names;
    for (size_t i = 0; i < m->metrics.size(); ++i) {
      if (std::strcmp(m->metrics[i].info.symbol, symbol) == 0) {
        *index = i;
        return;
      }
      names += (names.empty() ? "" : ", ") + std::string(m->metrics[i].info.symbol);
    }
    fail(UDF_ERROR_INVALID_ARGUMENT, std::string("metric '") + symbol + "' is not in module " + m->name +
                                         " (it has: " + names + ")");
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
    std::string names;
    for (size_t i = 0; i < m->filters.size(); ++i) {
      if (std::strcmp(m->filters[i].info.symbol, symbol) == 0) {
        *index = i;
        return;
      }
      names += (names.empty() ? "" : ", ") + std::string(m->filters[i].info.symbol);
    }
    fail(UDF_ERROR_INVALID_ARGUMENT, std::string("filter '") + symbol + "' is not in module " + m->name + " (it has " +
                                         (names.empty() ? std::string("no filters") : "filters: " + names) + ")");
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

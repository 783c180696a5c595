// The C API boundary (errors -> udf_status + udf_last_error) and the
// runtime: the device, its primary context and streams, and the runtime's own
// index kernels (embedded, cuda/embed_index_kernels.cpp).
#include <cstring>
#include <new>

#include "capi/api_guard.h"
#include "cuda/context.h"
#include "cuda/runtime.h"
#include "index/testing_paths.h"

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
// The path hook for tests (not in runtime.h; docs/runtime.md): the bits of
// `paths` choose paths that give the same results as the default, for the
// tests that compare them bit for bit: 1 the plain scan of a monotone metric
// everywhere, 2 its pruning scan everywhere, 4 no near-first list for a
// pruning scan, 8 no tail merge, 16 no query bounds, 32 a build's rows
// copied again for the placement, 64 a build's nearest lists from the
// coarse keys, 128 a sharded build's placement without peer reads, 256 no
// tiled fold in exact search, 512 no coarse probe shared out between a
// sharded search's devices, 1024 a batch's coarse selection by the select
// kernel only, 2048 a sharded search's host queries staged by each device
// itself (index/testing_paths.h).  Process-wide; 0 (the default) restores
// the runtime's own choices.
UDF_API udf_status udf_testing_paths(uint32_t paths) {
  return guarded([&] {
    constexpr uint32_t kKnown = (kTestingNarrowNearest << 1) - 1;
    if (paths & ~kKnown) fail(UDF_ERROR_INVALID_ARGUMENT, "udf_testing_paths: unknown bits in " + std::to_string(paths));
    testing_paths_word().store(paths, std::memory_order_relaxed);
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
    rt->kernels.load(lib);
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
        if (rt->wait_event) cuda().cuEventDestroy(rt->wait_event);
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

UDF_API udf_status udf_runtime_wait_stream(udf_runtime* rt, void* stream) {
  return guarded([&] {
    require(rt != nullptr, "runtime is NULL");
    CtxGuard g(rt->ctx);
    if (!rt->wait_event) CU(cuEventCreate, &rt->wait_event, CU_EVENT_DISABLE_TIMING);
    CU(cuEventRecord, rt->wait_event, static_cast<CUstream>(stream));
    CU(cuStreamWaitEvent, rt->stream, rt->wait_event, 0);
  });
}
}  // extern "C"

// nvJitLink, loaded with dlopen on first use instead of at start-up.
//
// libnvJitLink.so.13 is ~100 MB with ~150k relocations: linking it normally
// costs every udf-link run ~5 ms before main, even a cache hit that links
// nothing.  nvJitLink.h turns each call into a versioned symbol
// (__nvJitLinkCreate_13_0, ...); these definitions forward them to the
// library, found as udf/support/cuda_libs.h says (the Python environment's
// wheel, the toolkit, the loader path).  If it cannot be loaded, every call
// fails with NVJITLINK_ERROR_INTERNAL and the error log says why.
#include <dlfcn.h>
#include <nvJitLink.h>

#include <cstring>
#include <string>

#include "udf/link/jitlink.h"
#include "udf/support/cuda_libs.h"

namespace {

const udf::DynamicLibrary& lib() { return udf::cuda_library(udf::CudaLibrary::NvJitLink); }

template <class Fn>
Fn sym(const char* name) {
  return lib().function<Fn>(name);
}

}  // namespace

#define UDF_NVJITLINK_FORWARD(name, params, args)                   \
  extern "C" nvJitLinkResult name params {                          \
    static const auto fn = sym<decltype(&name)>(#name);            \
    return fn ? fn args : NVJITLINK_ERROR_INTERNAL;                 \
  }

UDF_NVJITLINK_FORWARD(__nvJitLinkCreate_13_0, (nvJitLinkHandle * handle, uint32_t n, const char* const* options),
                      (handle, n, options))
UDF_NVJITLINK_FORWARD(__nvJitLinkDestroy_13_0, (nvJitLinkHandle * handle), (handle))
UDF_NVJITLINK_FORWARD(__nvJitLinkAddData_13_0,
                      (nvJitLinkHandle handle, nvJitLinkInputType type, const void* data, size_t size, const char* name),
                      (handle, type, data, size, name))
UDF_NVJITLINK_FORWARD(__nvJitLinkAddFile_13_0, (nvJitLinkHandle handle, nvJitLinkInputType type, const char* file),
                      (handle, type, file))
UDF_NVJITLINK_FORWARD(__nvJitLinkComplete_13_0, (nvJitLinkHandle handle), (handle))
UDF_NVJITLINK_FORWARD(__nvJitLinkGetLinkedCubinSize_13_0, (nvJitLinkHandle handle, size_t* size), (handle, size))
UDF_NVJITLINK_FORWARD(__nvJitLinkGetLinkedCubin_13_0, (nvJitLinkHandle handle, void* cubin), (handle, cubin))
UDF_NVJITLINK_FORWARD(__nvJitLinkGetLinkedPtxSize_13_0, (nvJitLinkHandle handle, size_t* size), (handle, size))
UDF_NVJITLINK_FORWARD(__nvJitLinkGetLinkedPtx_13_0, (nvJitLinkHandle handle, char* ptx), (handle, ptx))
UDF_NVJITLINK_FORWARD(__nvJitLinkGetInfoLogSize_13_0, (nvJitLinkHandle handle, size_t* size), (handle, size))
UDF_NVJITLINK_FORWARD(__nvJitLinkGetInfoLog_13_0, (nvJitLinkHandle handle, char* log), (handle, log))
UDF_NVJITLINK_FORWARD(nvJitLinkVersion, (unsigned int* major, unsigned int* minor), (major, minor))

// The error log also carries the load failure, so that it reaches the user.
extern "C" nvJitLinkResult __nvJitLinkGetErrorLogSize_13_0(nvJitLinkHandle handle, size_t* size) {
  static const auto fn = sym<decltype(&__nvJitLinkGetErrorLogSize_13_0)>("__nvJitLinkGetErrorLogSize_13_0");
  if (fn) return fn(handle, size);
  *size = lib().error().size() + 1;
  return NVJITLINK_SUCCESS;
}
extern "C" nvJitLinkResult __nvJitLinkGetErrorLog_13_0(nvJitLinkHandle handle, char* log) {
  static const auto fn = sym<decltype(&__nvJitLinkGetErrorLog_13_0)>("__nvJitLinkGetErrorLog_13_0");
  if (fn) return fn(handle, log);
  std::memcpy(log, lib().error().c_str(), lib().error().size() + 1);
  return NVJITLINK_SUCCESS;
}

namespace udf {

std::string nvjitlink_load_error() { return lib().loaded() ? std::string() : lib().error(); }

LibraryStatus nvjitlink_library_status() {
  LibraryStatus s = cuda_library_status(CudaLibrary::NvJitLink);
  unsigned major = 0, minor = 0;
  if (auto fn = lib().function<nvJitLinkResult (*)(unsigned*, unsigned*)>("nvJitLinkVersion");
      fn && fn(&major, &minor) == NVJITLINK_SUCCESS)
    s.version = std::to_string(major) + "." + std::to_string(minor);
  return s;
}

std::string nvjitlink_identity() {
  // The first candidate file: the one lib() loads.  Its identity needs a
  // stat, not a 100 MB library load.
  if (auto id = cuda_library_file_identity(CudaLibrary::NvJitLink); !id.empty()) return id;
  return nvjitlink_version_string();
}

}  // namespace udf

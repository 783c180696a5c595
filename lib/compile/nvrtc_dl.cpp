// NVRTC, loaded with dlopen on first use instead of at start-up.
//
// libnvrtc.so.13 is ~110 MB with ~200k relocations: linking it normally
// costs every run of udfc and udf-link ~8 ms before main, even a cache hit
// that never compiles.  These definitions of the NVRTC C API (the functions
// lib/ calls; add any new one here) forward to the library, found as
// udf/support/cuda_libs.h says (the Python environment's wheel, the toolkit,
// the loader path).  If it cannot be loaded, every call fails with
// NVRTC_ERROR_INTERNAL_ERROR and nvrtcGetErrorString says why.
#include <dlfcn.h>
#include <nvrtc.h>

#include <string>

#include "udf/compile/nvrtc_dl.h"
#include "udf/support/cuda_libs.h"

namespace {

const udf::DynamicLibrary& lib() { return udf::cuda_library(udf::CudaLibrary::Nvrtc); }

template <class Fn>
Fn sym(const char* name) {
  return lib().function<Fn>(name);
}

}  // namespace

#define UDF_NVRTC_FORWARD(name, params, args)                       \
  extern "C" nvrtcResult name params {                              \
    static const auto fn = sym<decltype(&name)>(#name);            \
    return fn ? fn args : NVRTC_ERROR_INTERNAL_ERROR;               \
  }

namespace udf {
std::string nvrtc_identity() {
  // As nvjitlink_identity: the file's identity (a stat) rather than a load.
  if (auto id = cuda_library_file_identity(CudaLibrary::Nvrtc); !id.empty()) return id;
  int major = 0, minor = 0;
  return nvrtcVersion(&major, &minor) == NVRTC_SUCCESS ? "nvrtc " + std::to_string(major) + "." + std::to_string(minor)
                                                       : "nvrtc unknown";
}

LibraryStatus nvrtc_library_status() {
  LibraryStatus s = cuda_library_status(CudaLibrary::Nvrtc);
  int major = 0, minor = 0;
  if (auto fn = lib().function<nvrtcResult (*)(int*, int*)>("nvrtcVersion"); fn && fn(&major, &minor) == NVRTC_SUCCESS)
    s.version = std::to_string(major) + "." + std::to_string(minor);
  return s;
}
}  // namespace udf

extern "C" const char* nvrtcGetErrorString(nvrtcResult result) {
  static const auto fn = sym<decltype(&nvrtcGetErrorString)>("nvrtcGetErrorString");
  return fn ? fn(result) : lib().error().c_str();
}

UDF_NVRTC_FORWARD(nvrtcVersion, (int* major, int* minor), (major, minor))
UDF_NVRTC_FORWARD(nvrtcGetNumSupportedArchs, (int* n), (n))
UDF_NVRTC_FORWARD(nvrtcGetSupportedArchs, (int* archs), (archs))
UDF_NVRTC_FORWARD(nvrtcCreateProgram,
                  (nvrtcProgram * prog, const char* src, const char* name, int numHeaders, const char* const* headers,
                   const char* const* includeNames),
                  (prog, src, name, numHeaders, headers, includeNames))
UDF_NVRTC_FORWARD(nvrtcDestroyProgram, (nvrtcProgram * prog), (prog))
UDF_NVRTC_FORWARD(nvrtcCompileProgram, (nvrtcProgram prog, int numOptions, const char* const* options),
                  (prog, numOptions, options))
UDF_NVRTC_FORWARD(nvrtcGetPTXSize, (nvrtcProgram prog, size_t* size), (prog, size))
UDF_NVRTC_FORWARD(nvrtcGetPTX, (nvrtcProgram prog, char* ptx), (prog, ptx))
UDF_NVRTC_FORWARD(nvrtcGetCUBINSize, (nvrtcProgram prog, size_t* size), (prog, size))
UDF_NVRTC_FORWARD(nvrtcGetCUBIN, (nvrtcProgram prog, char* cubin), (prog, cubin))
UDF_NVRTC_FORWARD(nvrtcGetLTOIRSize, (nvrtcProgram prog, size_t* size), (prog, size))
UDF_NVRTC_FORWARD(nvrtcGetLTOIR, (nvrtcProgram prog, char* ltoir), (prog, ltoir))
UDF_NVRTC_FORWARD(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t* size), (prog, size))
UDF_NVRTC_FORWARD(nvrtcGetProgramLog, (nvrtcProgram prog, char* log), (prog, log))
UDF_NVRTC_FORWARD(nvrtcAddNameExpression, (nvrtcProgram prog, const char* const name), (prog, name))
UDF_NVRTC_FORWARD(nvrtcGetLoweredName, (nvrtcProgram prog, const char* const name, const char** lowered),
                  (prog, name, lowered))

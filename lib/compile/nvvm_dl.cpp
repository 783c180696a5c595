// libNVVM, loaded with dlopen on first use instead of at start-up (as
// nvrtc_dl.cpp does for NVRTC): a cache hit or a CUDA compile never pays for
// it.  These definitions of the libNVVM C API forward to the library, found
// as udf/support/cuda_libs.h says.  If it cannot be loaded, every call fails
// with NVVM_ERROR_INVALID_PROGRAM and nvvmGetErrorString says why.
#include <dlfcn.h>
#include <nvvm.h>

#include <string>

#include "udf/support/cuda_libs.h"

namespace {

const udf::DynamicLibrary& lib() { return udf::cuda_library(udf::CudaLibrary::Nvvm); }

template <class Fn>
Fn sym(const char* name) {
  return lib().function<Fn>(name);
}

}  // namespace

#define UDF_NVVM_FORWARD(name, params, args)                 \
  extern "C" nvvmResult name params {                        \
    static const auto fn = sym<decltype(&name)>(#name);     \
    return fn ? fn args : NVVM_ERROR_INVALID_PROGRAM;        \
  }

namespace udf {
LibraryStatus nvvm_library_status() {
  LibraryStatus s = cuda_library_status(CudaLibrary::Nvvm);
  int major = 0, minor = 0;
  if (auto fn = lib().function<nvvmResult (*)(int*, int*)>("nvvmVersion"); fn && fn(&major, &minor) == NVVM_SUCCESS)
    s.version = std::to_string(major) + "." + std::to_string(minor);
  return s;
}
}  // namespace udf

extern "C" const char* nvvmGetErrorString(nvvmResult result) {
  static const auto fn = sym<decltype(&nvvmGetErrorString)>("nvvmGetErrorString");
  return fn ? fn(result) : lib().error().c_str();
}

UDF_NVVM_FORWARD(nvvmVersion, (int* major, int* minor), (major, minor))
UDF_NVVM_FORWARD(nvvmIRVersion, (int* majorIR, int* minorIR, int* majorDbg, int* minorDbg),
                 (majorIR, minorIR, majorDbg, minorDbg))
UDF_NVVM_FORWARD(nvvmCreateProgram, (nvvmProgram * prog), (prog))
UDF_NVVM_FORWARD(nvvmDestroyProgram, (nvvmProgram * prog), (prog))
UDF_NVVM_FORWARD(nvvmAddModuleToProgram, (nvvmProgram prog, const char* buffer, size_t size, const char* name),
                 (prog, buffer, size, name))
UDF_NVVM_FORWARD(nvvmLazyAddModuleToProgram, (nvvmProgram prog, const char* buffer, size_t size, const char* name),
                 (prog, buffer, size, name))
UDF_NVVM_FORWARD(nvvmCompileProgram, (nvvmProgram prog, int numOptions, const char** options),
                 (prog, numOptions, options))
UDF_NVVM_FORWARD(nvvmVerifyProgram, (nvvmProgram prog, int numOptions, const char** options),
                 (prog, numOptions, options))
UDF_NVVM_FORWARD(nvvmGetCompiledResultSize, (nvvmProgram prog, size_t* size), (prog, size))
UDF_NVVM_FORWARD(nvvmGetCompiledResult, (nvvmProgram prog, char* buffer), (prog, buffer))
UDF_NVVM_FORWARD(nvvmGetProgramLogSize, (nvvmProgram prog, size_t* size), (prog, size))
UDF_NVVM_FORWARD(nvvmGetProgramLog, (nvvmProgram prog, char* buffer), (prog, buffer))

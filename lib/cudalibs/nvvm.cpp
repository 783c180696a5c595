#include "udf/cudalibs/nvvm.h"

#include <fmt/format.h>

#include "udf/cudalibs/check.h"
#include "udf/cudalibs/dl_api.h"
#include "udf/support/cuda_libs.h"

// The libNVVM functions lib/ calls (add any new one here), forwarded to the
// library or failing with NVVM_ERROR_INVALID_PROGRAM ...
#define UDF_NVVM_FORWARDED(X)                                                                                      \
  X(nvvmVersion, (int* major, int* minor), (major, minor))                                                        \
  X(nvvmIRVersion, (int* majorIR, int* minorIR, int* majorDbg, int* minorDbg), (majorIR, minorIR, majorDbg, minorDbg)) \
  X(nvvmCreateProgram, (nvvmProgram * prog), (prog))                                                               \
  X(nvvmDestroyProgram, (nvvmProgram * prog), (prog))                                                              \
  X(nvvmAddModuleToProgram, (nvvmProgram prog, const char* buffer, size_t size, const char* name),                 \
    (prog, buffer, size, name))                                                                                    \
  X(nvvmLazyAddModuleToProgram, (nvvmProgram prog, const char* buffer, size_t size, const char* name),             \
    (prog, buffer, size, name))                                                                                    \
  X(nvvmCompileProgram, (nvvmProgram prog, int numOptions, const char** options), (prog, numOptions, options))     \
  X(nvvmVerifyProgram, (nvvmProgram prog, int numOptions, const char** options), (prog, numOptions, options))      \
  X(nvvmGetCompiledResultSize, (nvvmProgram prog, size_t* size), (prog, size))                                    \
  X(nvvmGetCompiledResult, (nvvmProgram prog, char* buffer), (prog, buffer))                                      \
  X(nvvmGetProgramLogSize, (nvvmProgram prog, size_t* size), (prog, size))                                        \
  X(nvvmGetProgramLog, (nvvmProgram prog, char* buffer), (prog, buffer))
// ... and the one whose fallback is written below: the load failure as the error string.
#define UDF_NVVM_FUNCTIONS(X) UDF_NVVM_FORWARDED(X) X(nvvmGetErrorString, (nvvmResult result), (result))

namespace {

struct NvvmApi {
  UDF_DL_FUNCTIONS(UDF_NVVM_FUNCTIONS)
};

const udf::LoadedFunctions<NvvmApi>& nvvm() {
  static const auto l = udf::load_functions<NvvmApi>(udf::cuda_library(udf::CudaLibrary::Nvvm));
  return l;
}

}  // namespace

#define UDF_NVVM_FORWARD(name, params, args) UDF_DL_FORWARD(nvvm, NVVM_ERROR_INVALID_PROGRAM, name, params, args)
UDF_NVVM_FORWARDED(UDF_NVVM_FORWARD)

extern "C" const char* nvvmGetErrorString(nvvmResult result) {
  const auto f = nvvm().fn.nvvmGetErrorString;
  return f ? f(result) : nvvm().library->error().c_str();
}

namespace udf {

std::string nvvm_version_string() {
  int major = 0, minor = 0;
  if (nvvmVersion(&major, &minor) != NVVM_SUCCESS) return "libnvvm unknown";
  return fmt::format("libnvvm {}.{}", major, minor);
}

LibraryStatus nvvm_library_status() {
  LibraryStatus s = cuda_library_status(CudaLibrary::Nvvm);
  int major = 0, minor = 0;
  if (const auto f = nvvm().fn.nvvmVersion; f && f(&major, &minor) == NVVM_SUCCESS)
    s.version = std::to_string(major) + "." + std::to_string(minor);
  return s;
}

Error nvvm_failure(nvvmResult r, std::string_view call) {
  return library_call_failed("libNVVM", call, nvvmGetErrorString(r), static_cast<int>(r));
}

std::string nvvm_program_log(nvvmProgram p) { return read_library_log(p, nvvmGetProgramLogSize, nvvmGetProgramLog); }

}  // namespace udf

#include "udf/cudalibs/nvrtc.h"

#include <fmt/format.h>

#include "udf/cudalibs/check.h"
#include "udf/cudalibs/dl_api.h"
#include "udf/support/cuda_libs.h"

// The NVRTC functions lib/ calls (add any new one here), forwarded to the
// library or failing with NVRTC_ERROR_INTERNAL_ERROR ...
#define UDF_NVRTC_FORWARDED(X)                                                                                   \
  X(nvrtcVersion, (int* major, int* minor), (major, minor))                                                     \
  X(nvrtcGetNumSupportedArchs, (int* n), (n))                                                                    \
  X(nvrtcGetSupportedArchs, (int* archs), (archs))                                                               \
  X(nvrtcCreateProgram,                                                                                          \
    (nvrtcProgram * prog, const char* src, const char* name, int numHeaders, const char* const* headers,         \
     const char* const* includeNames),                                                                           \
    (prog, src, name, numHeaders, headers, includeNames))                                                        \
  X(nvrtcDestroyProgram, (nvrtcProgram * prog), (prog))                                                          \
  X(nvrtcCompileProgram, (nvrtcProgram prog, int numOptions, const char* const* options), (prog, numOptions, options)) \
  X(nvrtcGetPTXSize, (nvrtcProgram prog, size_t* size), (prog, size))                                           \
  X(nvrtcGetPTX, (nvrtcProgram prog, char* ptx), (prog, ptx))                                                   \
  X(nvrtcGetCUBINSize, (nvrtcProgram prog, size_t* size), (prog, size))                                         \
  X(nvrtcGetCUBIN, (nvrtcProgram prog, char* cubin), (prog, cubin))                                             \
  X(nvrtcGetLTOIRSize, (nvrtcProgram prog, size_t* size), (prog, size))                                         \
  X(nvrtcGetLTOIR, (nvrtcProgram prog, char* ltoir), (prog, ltoir))                                             \
  X(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t* size), (prog, size))                                    \
  X(nvrtcGetProgramLog, (nvrtcProgram prog, char* log), (prog, log))                                            \
  X(nvrtcAddNameExpression, (nvrtcProgram prog, const char* const name), (prog, name))                          \
  X(nvrtcGetLoweredName, (nvrtcProgram prog, const char* const name, const char** lowered), (prog, name, lowered))
// ... and the one whose fallback is written below: the load failure as the error string.
#define UDF_NVRTC_FUNCTIONS(X) UDF_NVRTC_FORWARDED(X) X(nvrtcGetErrorString, (nvrtcResult result), (result))

namespace {

struct NvrtcApi {
  UDF_DL_FUNCTIONS(UDF_NVRTC_FUNCTIONS)
};

const udf::LoadedFunctions<NvrtcApi>& nvrtc() {
  static const auto l = udf::load_functions<NvrtcApi>(udf::cuda_library(udf::CudaLibrary::Nvrtc));
  return l;
}

}  // namespace

#define UDF_NVRTC_FORWARD(name, params, args) UDF_DL_FORWARD(nvrtc, NVRTC_ERROR_INTERNAL_ERROR, name, params, args)
UDF_NVRTC_FORWARDED(UDF_NVRTC_FORWARD)

extern "C" const char* nvrtcGetErrorString(nvrtcResult result) {
  const auto f = nvrtc().fn.nvrtcGetErrorString;
  return f ? f(result) : nvrtc().library->error().c_str();
}

namespace udf {

std::string nvrtc_identity() {
  // The file's identity (a stat) rather than a load.
  if (auto id = cuda_library_file_identity(CudaLibrary::Nvrtc); !id.empty()) return id;
  int major = 0, minor = 0;
  return nvrtcVersion(&major, &minor) == NVRTC_SUCCESS ? "nvrtc " + std::to_string(major) + "." + std::to_string(minor)
                                                       : "nvrtc unknown";
}

std::string nvrtc_version_string() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "nvrtc unknown";
  return fmt::format("nvrtc {}.{}", major, minor);
}

LibraryStatus nvrtc_library_status() {
  LibraryStatus s = cuda_library_status(CudaLibrary::Nvrtc);
  int major = 0, minor = 0;
  if (const auto f = nvrtc().fn.nvrtcVersion; f && f(&major, &minor) == NVRTC_SUCCESS)
    s.version = std::to_string(major) + "." + std::to_string(minor);
  return s;
}

Error nvrtc_failure(nvrtcResult r, std::string_view call) {
  return library_call_failed("NVRTC", call, nvrtcGetErrorString(r), static_cast<int>(r));
}

std::string nvrtc_program_log(nvrtcProgram p) { return read_library_log(p, nvrtcGetProgramLogSize, nvrtcGetProgramLog); }

Expected<Bytes> nvrtc_ltoir(nvrtcProgram p, std::string_view what) {
  size_t n = 0;
  if (auto r = nvrtcGetLTOIRSize(p, &n); r != NVRTC_SUCCESS) return nvrtc_failure(r, "nvrtcGetLTOIRSize");
  if (n == 0) return library_failure(fmt::format("NVRTC produced no LTO-IR for {}", what));
  Bytes ir(n);
  if (auto r = nvrtcGetLTOIR(p, reinterpret_cast<char*>(ir.data())); r != NVRTC_SUCCESS)
    return nvrtc_failure(r, "nvrtcGetLTOIR");
  return ir;
}

}  // namespace udf

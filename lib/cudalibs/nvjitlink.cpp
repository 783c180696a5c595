#include "udf/cudalibs/nvjitlink.h"

#include <nvJitLink.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <regex>

#include <fmt/format.h>

#include "udf/cudalibs/check.h"
#include "udf/cudalibs/dl_api.h"
#include "udf/support/cuda_libs.h"

// The nvJitLink functions lib/ calls (add any new one here).  nvJitLink.h
// turns each call into a versioned symbol (nvJitLinkCreate ->
// __nvJitLinkCreate_13_0), defined here: forwarded to the library, or
// failing with NVJITLINK_ERROR_INTERNAL ...
#define UDF_NVJITLINK_FORWARDED(X)                                                                               \
  X(__nvJitLinkCreate_13_0, (nvJitLinkHandle * handle, uint32_t n, const char* const* options), (handle, n, options)) \
  X(__nvJitLinkDestroy_13_0, (nvJitLinkHandle * handle), (handle))                                               \
  X(__nvJitLinkAddData_13_0,                                                                                     \
    (nvJitLinkHandle handle, nvJitLinkInputType type, const void* data, size_t size, const char* name),          \
    (handle, type, data, size, name))                                                                            \
  X(__nvJitLinkAddFile_13_0, (nvJitLinkHandle handle, nvJitLinkInputType type, const char* file), (handle, type, file)) \
  X(__nvJitLinkComplete_13_0, (nvJitLinkHandle handle), (handle))                                                \
  X(__nvJitLinkGetLinkedCubinSize_13_0, (nvJitLinkHandle handle, size_t* size), (handle, size))                 \
  X(__nvJitLinkGetLinkedCubin_13_0, (nvJitLinkHandle handle, void* cubin), (handle, cubin))                     \
  X(__nvJitLinkGetLinkedPtxSize_13_0, (nvJitLinkHandle handle, size_t* size), (handle, size))                   \
  X(__nvJitLinkGetLinkedPtx_13_0, (nvJitLinkHandle handle, char* ptx), (handle, ptx))                           \
  X(__nvJitLinkGetInfoLogSize_13_0, (nvJitLinkHandle handle, size_t* size), (handle, size))                     \
  X(__nvJitLinkGetInfoLog_13_0, (nvJitLinkHandle handle, char* log), (handle, log))                             \
  X(nvJitLinkVersion, (unsigned int* major, unsigned int* minor), (major, minor))
// ... and the two whose fallback is written below: the error log carries the
// load failure, so that it reaches the user.
#define UDF_NVJITLINK_FUNCTIONS(X)                                                                 \
  UDF_NVJITLINK_FORWARDED(X)                                                                       \
  X(__nvJitLinkGetErrorLogSize_13_0, (nvJitLinkHandle handle, size_t* size), (handle, size))       \
  X(__nvJitLinkGetErrorLog_13_0, (nvJitLinkHandle handle, char* log), (handle, log))

namespace {

struct NvJitLinkApi {
  UDF_DL_FUNCTIONS(UDF_NVJITLINK_FUNCTIONS)
};

const udf::LoadedFunctions<NvJitLinkApi>& nvjitlink() {
  static const auto l = udf::load_functions<NvJitLinkApi>(udf::cuda_library(udf::CudaLibrary::NvJitLink));
  return l;
}

}  // namespace

#define UDF_NVJITLINK_FORWARD(name, params, args) UDF_DL_FORWARD(nvjitlink, NVJITLINK_ERROR_INTERNAL, name, params, args)
UDF_NVJITLINK_FORWARDED(UDF_NVJITLINK_FORWARD)

extern "C" nvJitLinkResult __nvJitLinkGetErrorLogSize_13_0(nvJitLinkHandle handle, size_t* size) {
  if (const auto f = nvjitlink().fn.__nvJitLinkGetErrorLogSize_13_0) return f(handle, size);
  *size = nvjitlink().library->error().size() + 1;
  return NVJITLINK_SUCCESS;
}
extern "C" nvJitLinkResult __nvJitLinkGetErrorLog_13_0(nvJitLinkHandle handle, char* log) {
  if (const auto f = nvjitlink().fn.__nvJitLinkGetErrorLog_13_0) return f(handle, log);
  const std::string& e = nvjitlink().library->error();
  std::memcpy(log, e.c_str(), e.size() + 1);
  return NVJITLINK_SUCCESS;
}

namespace udf {
namespace {

struct Handle {
  nvJitLinkHandle h = nullptr;
  ~Handle() {
    if (h) nvJitLinkDestroy(&h);
  }
};

std::string error_log(nvJitLinkHandle h) { return read_library_log(h, nvJitLinkGetErrorLogSize, nvJitLinkGetErrorLog); }

std::string info_log(nvJitLinkHandle h) { return read_library_log(h, nvJitLinkGetInfoLogSize, nvJitLinkGetInfoLog); }

const char* result_name(nvJitLinkResult r) {
  switch (r) {
    case NVJITLINK_SUCCESS: return "NVJITLINK_SUCCESS";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION: return "NVJITLINK_ERROR_UNRECOGNIZED_OPTION";
    case NVJITLINK_ERROR_MISSING_ARCH: return "NVJITLINK_ERROR_MISSING_ARCH";
    case NVJITLINK_ERROR_INVALID_INPUT: return "NVJITLINK_ERROR_INVALID_INPUT";
    case NVJITLINK_ERROR_PTX_COMPILE: return "NVJITLINK_ERROR_PTX_COMPILE";
    case NVJITLINK_ERROR_NVVM_COMPILE: return "NVJITLINK_ERROR_NVVM_COMPILE";
    case NVJITLINK_ERROR_INTERNAL: return "NVJITLINK_ERROR_INTERNAL";
    default: return "nvJitLink error";
  }
}

// "nvJitLink <call> failed: <result name> (<code>)".
Error nvjitlink_failure(nvJitLinkResult r, std::string_view call) {
  return library_call_failed("nvJitLink", call, result_name(r), static_cast<int>(r));
}

nvJitLinkInputType input_type(LinkInputKind k) {
  switch (k) {
    case LinkInputKind::LtoIr: return NVJITLINK_INPUT_LTOIR;
    case LinkInputKind::Cubin: return NVJITLINK_INPUT_CUBIN;
    case LinkInputKind::Ptx: return NVJITLINK_INPUT_PTX;
    case LinkInputKind::Fatbin: return NVJITLINK_INPUT_FATBIN;
  }
  return NVJITLINK_INPUT_ANY;
}

}  // namespace

Expected<JitLinkOutput> jit_link(const std::vector<std::string>& options, const std::vector<LinkInput>& inputs,
                                 bool want_ptx) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> opts = options;
  if (want_ptx) opts.push_back("-ptx");
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  Handle h;
  if (auto r = nvJitLinkCreate(&h.h, static_cast<uint32_t>(argv.size()), argv.data()); r != NVJITLINK_SUCCESS) {
    std::string joined;
    for (const auto& o : opts) joined += (joined.empty() ? "" : " ") + o;
    if (auto why = nvjitlink_load_error(); !why.empty()) return diagnosed(DiagCode::LibraryMissing, why);
    return nvjitlink_failure(r, "nvJitLinkCreate(" + joined + ")");
  }
  for (const auto& in : inputs) {
    nvJitLinkResult r = nvJitLinkAddData(h.h, input_type(in.kind), in.data.data(), in.data.size(), in.name.c_str());
    std::string log = error_log(h.h);
    // An AddData failure poisons the handle: Complete would then report
    // success with an empty image.  Stop here.
    if (r != NVJITLINK_SUCCESS) {
      std::string why = log.empty() ? result_name(r) : log;
      if (why.find("LTOIR arch newer than target arch") != std::string::npos)
        why = "its LTO-IR was built for a newer arch than the link target";
      else if (why.find("may need newer version of nvJitLink") != std::string::npos)
        why += fmt::format(
            "; its LTO-IR comes from a newer NVRTC or libNVVM than this {} ({}): use an nvJitLink at least as "
            "new as the compiler of every input (pip install -U nvidia-nvjitlink, a newer toolkit, or "
            "$UDF_NVJITLINK_LIBRARY), or compile the artifact again with the NVRTC beside this one",
            nvjitlink_version_string(), nvjitlink_library_status().path);
      return Error(ErrorKind::Diagnosed, DiagCode::LinkFailed, fmt::format("{}: nvJitLink rejected this input: {}", in.name, why)).with_raw_log(log);
    }
  }
  nvJitLinkResult r = nvJitLinkComplete(h.h);
  std::string elog = error_log(h.h);
  JitLinkOutput out;
  out.info_log = info_log(h.h);
  if (r != NVJITLINK_SUCCESS)
    return Error(ErrorKind::Diagnosed, DiagCode::LinkFailed, fmt::format("link failed: {}", elog.empty() ? result_name(r) : elog)).with_raw_log(elog);
  if (!elog.empty() && elog.find("error") != std::string::npos)
    return Error(ErrorKind::Diagnosed, DiagCode::LinkFailed, fmt::format("link reported errors despite success: {}", elog)).with_raw_log(elog);
  size_t n = 0;
  if (want_ptx) {
    if (auto rr = nvJitLinkGetLinkedPtxSize(h.h, &n); rr != NVJITLINK_SUCCESS)
      return nvjitlink_failure(rr, "nvJitLinkGetLinkedPtxSize");
    out.ptx.assign(n, '\0');
    if (auto rr = nvJitLinkGetLinkedPtx(h.h, out.ptx.data()); rr != NVJITLINK_SUCCESS)
      return nvjitlink_failure(rr, "nvJitLinkGetLinkedPtx");
    while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  } else {
    if (auto rr = nvJitLinkGetLinkedCubinSize(h.h, &n); rr != NVJITLINK_SUCCESS)
      return nvjitlink_failure(rr, "nvJitLinkGetLinkedCubinSize");
    if (n == 0) return library_failure("nvJitLink reported success but produced an empty cubin");
    out.cubin.resize(n);
    if (auto rr = nvJitLinkGetLinkedCubin(h.h, out.cubin.data()); rr != NVJITLINK_SUCCESS)
      return nvjitlink_failure(rr, "nvJitLinkGetLinkedCubin");
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string nvjitlink_load_error() { return nvjitlink().loaded() ? std::string() : nvjitlink().library->error(); }

LibraryStatus nvjitlink_library_status() {
  LibraryStatus s = cuda_library_status(CudaLibrary::NvJitLink);
  unsigned major = 0, minor = 0;
  if (const auto f = nvjitlink().fn.nvJitLinkVersion; f && f(&major, &minor) == NVJITLINK_SUCCESS)
    s.version = std::to_string(major) + "." + std::to_string(minor);
  return s;
}

std::string nvjitlink_identity() {
  // The first candidate file: the one that would be loaded.  Its identity
  // needs a stat, not a load of the library.
  if (auto id = cuda_library_file_identity(CudaLibrary::NvJitLink); !id.empty()) return id;
  return nvjitlink_version_string();
}

std::string nvjitlink_version_string() {
  unsigned major = 0, minor = 0;
  if (nvJitLinkVersion(&major, &minor) != NVJITLINK_SUCCESS) return "nvjitlink unknown";
  return fmt::format("nvjitlink {}.{}", major, minor);
}

std::vector<std::string> ptx_extern_functions(const std::string& ptx) {
  static const std::regex ext(R"(\.extern \.func\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)\s*\()");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), ext); it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1];
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

}  // namespace udf

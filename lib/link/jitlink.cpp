#include "udf/link/jitlink.h"

#include <nvJitLink.h>

#include <algorithm>
#include <chrono>
#include <regex>

#include <fmt/format.h>

namespace udf {
namespace {

struct Handle {
  nvJitLinkHandle h = nullptr;
  ~Handle() {
    if (h) nvJitLinkDestroy(&h);
  }
};

std::string error_log(nvJitLinkHandle h) {
  size_t n = 0;
  if (nvJitLinkGetErrorLogSize(h, &n) != NVJITLINK_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  if (nvJitLinkGetErrorLog(h, s.data()) != NVJITLINK_SUCCESS) return {};
  while (!s.empty() && (s.back() == '\0' || s.back() == '\n')) s.pop_back();
  return s;
}

std::string info_log(nvJitLinkHandle h) {
  size_t n = 0;
  if (nvJitLinkGetInfoLogSize(h, &n) != NVJITLINK_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  if (nvJitLinkGetInfoLog(h, s.data()) != NVJITLINK_SUCCESS) return {};
  while (!s.empty() && (s.back() == '\0' || s.back() == '\n')) s.pop_back();
  return s;
}

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
    return library_failure(fmt::format("nvJitLinkCreate({}) failed: {} ({})", joined, result_name(r), static_cast<int>(r)));
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
      return library_failure(fmt::format("nvJitLinkGetLinkedPtxSize failed: {}", result_name(rr)));
    out.ptx.assign(n, '\0');
    if (auto rr = nvJitLinkGetLinkedPtx(h.h, out.ptx.data()); rr != NVJITLINK_SUCCESS)
      return library_failure(fmt::format("nvJitLinkGetLinkedPtx failed: {}", result_name(rr)));
    while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  } else {
    if (auto rr = nvJitLinkGetLinkedCubinSize(h.h, &n); rr != NVJITLINK_SUCCESS)
      return library_failure(fmt::format("nvJitLinkGetLinkedCubinSize failed: {}", result_name(rr)));
    if (n == 0) return library_failure("nvJitLink reported success but produced an empty cubin");
    out.cubin.resize(n);
    if (auto rr = nvJitLinkGetLinkedCubin(h.h, out.cubin.data()); rr != NVJITLINK_SUCCESS)
      return library_failure(fmt::format("nvJitLinkGetLinkedCubin failed: {}", result_name(rr)));
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
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

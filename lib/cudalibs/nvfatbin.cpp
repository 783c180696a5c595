#include "udf/cudalibs/nvfatbin.h"

#include <fmt/format.h>

#include "udf/cudalibs/check.h"
#include "udf/support/cuda_libs.h"

namespace udf {

const LoadedFunctions<NvFatbinApi>& nvfatbin() {
  static const auto l = load_functions<NvFatbinApi>(cuda_library(CudaLibrary::NvFatbin));
  return l;
}

const std::string& nvfatbin_why_not() {
  static const std::string why = [] {
    const auto& l = nvfatbin();
    if (!l.loaded()) return l.library->error();
    if (!l.missing.empty())
      return "nvFatbin at " + l.library->path() + " lacks part of the nvFatbin API (need CUDA 12.4 or newer)";
    return std::string();
  }();
  return why;
}

Error nvfatbin_failure(nvFatbinResult r, std::string_view call) {
  return library_call_failed("nvFatbin", call, nvfatbin().fn.nvFatbinGetErrorString(r), r);
}

NvFatbinInfo nvfatbin_info() {
  NvFatbinInfo i;
  i.available = nvfatbin_why_not().empty();
  i.path = nvfatbin().library->path();
  i.why_not = nvfatbin_why_not();
  if (i.available) {
    unsigned major = 0, minor = 0;
    i.version = nvfatbin().fn.nvFatbinVersion(&major, &minor) == 0 ? fmt::format("nvfatbin {}.{}", major, minor)
                                                                   : "nvfatbin unknown";
  }
  return i;
}

std::string nvfatbin_version(Cache* memo) {
  auto ask = [] {
    NvFatbinInfo i = nvfatbin_info();
    return i.available ? i.version : std::string();
  };
  return memo ? remembered_library_version(CudaLibrary::NvFatbin, *memo, ask) : ask();
}

LibraryStatus nvfatbin_library_status() {
  NvFatbinInfo i = nvfatbin_info();
  LibraryStatus s = cuda_library_status(CudaLibrary::NvFatbin);
  s.loaded = i.available;
  s.error = i.why_not;
  s.version = i.version.rfind("nvfatbin ", 0) == 0 ? i.version.substr(9) : i.version;
  return s;
}

}  // namespace udf

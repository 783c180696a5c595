// NVRTC, loaded with dlopen on first use (udf/cudalibs/dl_api.h): lib/ calls
// its C API (nvrtc.h) as usual, and lib/cudalibs/nvrtc.cpp defines those
// functions, forwarding to the library found as udf/support/cuda_libs.h says.
// Loaded at start-up instead, it would cost every run of udfc and udf-link,
// even a cache hit that compiles nothing.  If it cannot be loaded, every call
// fails with NVRTC_ERROR_INTERNAL_ERROR and nvrtcGetErrorString says why.
#pragma once

#include <nvrtc.h>

#include <string>
#include <string_view>

#include "udf/support/dynlib.h"
#include "udf/support/error.h"
#include "udf/support/fs.h"

namespace udf {

/// Identifies NVRTC for cache keys without loading it (a stat of the file
/// that would be loaded; its version when it is found by soname only).
std::string nvrtc_identity();

/// "nvrtc 13.0", from the loaded library ("nvrtc unknown" without one).
std::string nvrtc_version_string();

/// Where NVRTC was loaded from and its version, or why it could not be (--version).
LibraryStatus nvrtc_library_status();

/// An NVRTC program, destroyed with this.
struct NvrtcProgram {
  nvrtcProgram p = nullptr;
  NvrtcProgram() = default;
  NvrtcProgram(const NvrtcProgram&) = delete;
  NvrtcProgram& operator=(const NvrtcProgram&) = delete;
  ~NvrtcProgram() {
    if (p) nvrtcDestroyProgram(&p);
  }
};

/// "NVRTC <call> failed: <nvrtcGetErrorString> (<code>)".
Error nvrtc_failure(nvrtcResult r, std::string_view call);

/// The program's log (udf/cudalibs/check.h's read_library_log).
std::string nvrtc_program_log(nvrtcProgram p);

/// The compiled program's LTO-IR (-dlto); "NVRTC produced no LTO-IR for
/// <what>" when there is none.
Expected<Bytes> nvrtc_ltoir(nvrtcProgram p, std::string_view what);

}  // namespace udf

// libNVVM, loaded with dlopen on first use as NVRTC is (udf/cudalibs/nvrtc.h):
// a cache hit or a CUDA compile never pays for it.  lib/cudalibs/nvvm.cpp
// defines the libNVVM C API (nvvm.h) that lib/ calls, forwarding to the
// library found as udf/support/cuda_libs.h says.  If it cannot be loaded,
// every call fails with NVVM_ERROR_INVALID_PROGRAM and nvvmGetErrorString
// says why.
#pragma once

#include <nvvm.h>

#include <string>
#include <string_view>

#include "udf/support/dynlib.h"
#include "udf/support/error.h"

namespace udf {

/// "libnvvm 2.0", from the loaded library ("libnvvm unknown" without one).
std::string nvvm_version_string();

/// Where libNVVM was loaded from and its version, or why not (--version).
LibraryStatus nvvm_library_status();

/// A libNVVM program, destroyed with this.
struct NvvmProgram {
  nvvmProgram p = nullptr;
  NvvmProgram() = default;
  NvvmProgram(const NvvmProgram&) = delete;
  NvvmProgram& operator=(const NvvmProgram&) = delete;
  ~NvvmProgram() {
    if (p) nvvmDestroyProgram(&p);
  }
};

/// "libNVVM <call> failed: <nvvmGetErrorString> (<code>)".
Error nvvm_failure(nvvmResult r, std::string_view call);

/// The program's log (udf/cudalibs/check.h's read_library_log).
std::string nvvm_program_log(nvvmProgram p);

}  // namespace udf

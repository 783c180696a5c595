// The check of a CUDA library call: its result code, and the library's log
// read before that code is trusted, turned into udf's error value.  Every
// library's wrapper (udf/cudalibs/*.h) builds on these; the runtime's driver
// and NCCL checks throw its own error type instead (lib/runtime/cuda/cuda_dl.h,
// nccl_dl.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "udf/support/error.h"

namespace udf {

/// A library's log, read with its size and get calls (nvrtcGetProgramLogSize
/// and nvrtcGetProgramLog, nvvmGetProgramLogSize and nvvmGetProgramLog,
/// nvJitLinkGetErrorLogSize and nvJitLinkGetErrorLog, ...): empty when either
/// call fails, without the trailing NULs and newlines.
template <class Handle, class SizeFn, class GetFn>
std::string read_library_log(Handle h, SizeFn size, GetFn get) {
  std::size_t n = 0;
  if (static_cast<int>(size(h, &n)) != 0 || n == 0) return {};
  std::string log(n, '\0');
  if (static_cast<int>(get(h, log.data())) != 0) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

/// The error of a library call that failed where it should not:
/// "<library> <call> failed: <text> (<code>)", e.g.
/// "NVRTC nvrtcGetPTX failed: NVRTC_ERROR_INVALID_INPUT (3)".
Error library_call_failed(std::string_view library, std::string_view call, std::string_view text, int code);

}  // namespace udf

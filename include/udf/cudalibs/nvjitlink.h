// nvJitLink, loaded with dlopen on first use as NVRTC is (udf/cudalibs/nvrtc.h):
// lib/cudalibs/nvjitlink.cpp defines the versioned symbols nvJitLink.h calls,
// forwarding to the library found as udf/support/cuda_libs.h says.  If it
// cannot be loaded, every call fails with NVJITLINK_ERROR_INTERNAL and the
// error log says why.  jit_link() guards every trap in TOOLCHAIN-FACTS.md:
// each call's result checked, the error and info logs read before any result
// is trusted.  Used by the link and by udfc's LTO-IR check.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "udf/support/dynlib.h"
#include "udf/support/error.h"
#include "udf/support/fs.h"

namespace udf {

enum class LinkInputKind { LtoIr, Cubin, Ptx, Fatbin };

struct LinkInput {
  std::string name;  // shown in diagnostics: the artifact or pack file it came from
  LinkInputKind kind;
  std::span<const std::uint8_t> data;
};

struct JitLinkOutput {
  Bytes cubin;           // empty when want_ptx
  std::string ptx;       // only when want_ptx
  std::string info_log;  // nvJitLink's info log (-verbose, -time)
  double seconds = 0;
};

/// Links `inputs` with `options` (which must include -arch=sm_XX).  With
/// want_ptx, asks for -ptx output instead of a cubin (used to list every
/// unresolved function: ptxas stops at the first one).
/// Errors carry nvJitLink's error log as the raw log and name the failing input.
Expected<JitLinkOutput> jit_link(const std::vector<std::string>& options, const std::vector<LinkInput>& inputs,
                                 bool want_ptx = false);

/// "nvjitlink 13.0"
std::string nvjitlink_version_string();

/// Identifies the nvJitLink library for cache keys without loading it: the
/// real path, size and mtime of the file it is loaded from (or, when that is
/// found by soname only, nvjitlink_version_string()).
std::string nvjitlink_identity();

/// Why libnvJitLink could not be loaded; empty once it is loaded.
std::string nvjitlink_load_error();

/// Where nvJitLink was loaded from and its version, or why not (--version).
LibraryStatus nvjitlink_library_status();

/// Functions declared `.extern .func` in PTX: what a link left unresolved.
std::vector<std::string> ptx_extern_functions(const std::string& ptx);

}  // namespace udf

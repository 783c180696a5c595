// CUDA C++ front end: NVRTC -> one LTO-IR payload per arch, checked against UDF ABI v1.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "udf/artifact/artifact.h"
#include "udf/compile/metadata.h"
#include "udf/compile/nvrtc_dl.h"
#include "udf/support/dynlib.h"

namespace udf {

struct CudaSource {
  std::string text;
  std::string display_name;  // used in diagnostics: the path as typed, "<string>" or "<stdin>"
  std::string directory;     // searched first for #include "..."; empty for strings and stdin
};

struct CudaCompileOptions {
  std::vector<std::string> include_dirs;  // -I
  std::vector<std::string> defines;       // -D NAME or NAME=VALUE
  std::vector<std::string> extra_nvrtc_options;  // passed through (validated by NVRTC)
  // Fill CompileOutput::dependencies (for a depfile): NVRTC's time trace
  // names every header it reads, at the cost of a clock_gettime system call
  // per traced event (hundreds a compile, and slow system calls in some VMs):
  // only asked for when a depfile needs the list.
  bool list_dependencies = false;
};

struct CompileOutput {
  Artifact artifact;
  std::vector<Diagnostic> warnings;  // compiler warnings, mapped to file:line:col
  std::string raw_log;               // the compiler's own log, for -v
  std::vector<std::string> dependencies;  // files the compiler read besides the input (CUDA: every header NVRTC opened,
                                          // with CudaCompileOptions::list_dependencies)
};

/// Compiles `src` for every arch in `meta.archs`.  Fails with every compiler
/// error mapped to file:line:col, or with an ABI error naming the symbol.
Expected<CompileOutput> compile_cuda(const CudaSource& src, const UdfMetadata& meta, const CudaCompileOptions& opts);

/// The artifact's cache key, computed from the inputs alone (source, resolved
/// headers, metadata, options, archs, tool and NVRTC versions), so that it can
/// be looked up before compiling.  compile_cuda records the same key.
/// nvrtc_version: nvrtc_version_string()'s answer when the caller has it
/// (remembered_library_version: a cache hit then loads no NVRTC); empty: asked here.
std::string cuda_cache_key(const CudaSource& src, const UdfMetadata& meta, const CudaCompileOptions& opts,
                           const std::string& nvrtc_version = {});

/// The headers a CUDA source may read, found without compiling: every
/// #include resolved through the source's folder, -I and the toolkit,
/// recursively (a superset of what NVRTC opens: inactive #if branches count
/// too).  `computed_include` is set when an #include names a macro, which
/// only the compiler can resolve: such a source cannot be keyed without
/// compiling it.  udfc's depfiles and cache keys both come from this scan.
/// A header larger than limits::kCudaSource is refused (UDF3007).
struct CudaSourceScan {
  std::vector<std::string> headers;  // absolute paths, as found (folder/name)
  bool computed_include = false;
};
Expected<CudaSourceScan> scan_cuda_source(const CudaSource& src, const std::vector<Capture>& captures,
                                          const CudaCompileOptions& opts);

/// "nvrtc 13.0", from the loaded library.
std::string nvrtc_version_string();

/// The prelude udfc includes before a CUDA UDF: the ABI header of the kind
/// (metric_v1.h, or filter_v1.h which includes it) and one accessor per
/// capture.  Exposed for tests and for `udfc --print-prelude`.
/// `metric_abi` 2: the ABI v2 header and accessors taking `const udf_ctx_v2 *`.
std::string cuda_prelude(const std::vector<Capture>& captures, UdfKind kind = UdfKind::Metric, int metric_abi = 1);

}  // namespace udf

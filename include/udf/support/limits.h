// Resource limits, all in one place: the largest file of each kind that the
// tools read into memory, and the default time and memory limits of a
// compile or link.  docs/diagnostics.md (UDF3007, UDF5003) and docs/tools.md
// list them; change them here and there together.
#pragma once

#include <cstdint>
#include <string>

#include "udf/support/error.h"

namespace udf {

inline constexpr std::uint64_t kKiB = 1024;
inline constexpr std::uint64_t kMiB = 1024 * kKiB;
inline constexpr std::uint64_t kGiB = 1024 * kMiB;

/// A kind of input and the most bytes a tool reads of one such file.  A
/// larger file is refused from its size (stat) before anything is allocated
/// or read (UDF3007).
struct FileLimit {
  std::uint64_t max_bytes;
  const char* what;  // for the message: "the limit for <what> is ..."
};

namespace limits {

// CUDA C++ sources (a file or standard input), and every header udfc reads
// itself to key the cache and write the depfile.
inline constexpr FileLimit kCudaSource{16 * kMiB, "CUDA sources and headers"};
// MLIR and LLVM IR inputs (text or bitcode), and libdevice.
inline constexpr FileLimit kIr{256 * kMiB, "MLIR and LLVM IR files"};
// LTO-IR: udfc's .ltoir inputs and the kernel pack's LTO-IR files.
inline constexpr FileLimit kLtoIr{256 * kMiB, "LTO-IR files"};
// UDF artifacts (.udfa): udf-link's inputs, udfc --inspect.
inline constexpr FileLimit kArtifact{1 * kGiB, "artifacts"};
// Modules (.udfm): udf-run's input, udfc --inspect; also the fatbin that the
// toolkit's `fatbinary` writes for udf-link.
inline constexpr FileLimit kModule{1 * kGiB, "modules"};
// The kernel pack's manifest (JSON).
inline constexpr FileLimit kKernelPackManifest{16 * kMiB, "kernel pack manifests"};
// Response files (@FILE), and what udfc reads of an input for
// --flags-from-first-line (its first line, at most this much).
inline constexpr FileLimit kResponseFile{1 * kMiB, "response files"};
// Vector files for udf-run (.npy .fvecs .bvecs .ivecs): as large as the
// largest GPUs hold.  Their headers are checked against the file's size, so
// nothing larger than the file is ever allocated.
inline constexpr FileLimit kVectorFile{256 * kGiB, "vector files"};
// Whatever is read without a limit of its own (NVRTC's header trace, the
// runtime's index and module files): the same bound as vector files.
inline constexpr FileLimit kAnyFile{256 * kGiB, "files"};

// A compile or link (NVRTC, libNVVM, nvJitLink, every arch together) is
// stopped after this many seconds of wall-clock time.  0: no limit.
// --compile-timeout SECONDS, $UDF_COMPILE_TIMEOUT.
inline constexpr double kCompileTimeoutSeconds = 300;
// ... or when the tool's resident memory passes this many MiB.  0: no limit.
// --compile-memory-limit MiB, $UDF_COMPILE_MEMORY_LIMIT.
inline constexpr std::uint64_t kCompileMemoryMiB = 8192;

}  // namespace limits

/// UDF3007 when `size` is larger than `limit`: the message names the file
/// (`path`; "-" is standard input), its size and the limit.
Expected<void> check_file_size(const std::string& path, std::uint64_t size, const FileLimit& limit);

/// A size for people: "512 bytes", "16 MiB", "1.5 GiB".
std::string format_size(std::uint64_t bytes);

}  // namespace udf

// Time and memory limits for a compile or link.  NVRTC, libNVVM and
// nvJitLink run in-process and cannot be cancelled, and libNVVM and
// nvJitLink abort the process when an allocation fails (measured under
// RLIMIT_AS: "LLVM ERROR: out of memory", SIGABRT), so neither a cancel
// call nor an rlimit can stop a runaway compile with a clear error.  A
// watchdog thread does: it watches the wall-clock time and the process's
// resident memory (/proc/self/statm) and, when a limit is passed, hands the
// error to a handler that ends the process (the tools report it and call
// _exit(1)).  Outputs are written only after the compile, atomically, so
// nothing half-written remains; temporary files that exist during a compile
// are registered with TempPathGuard and removed first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "udf/support/error.h"
#include "udf/support/limits.h"

namespace udf {

struct CompileLimits {
  double timeout_s = limits::kCompileTimeoutSeconds;     // wall clock; 0: no limit
  std::uint64_t memory_mib = limits::kCompileMemoryMiB;  // resident memory of the process; 0: no limit
};

/// The limits from --compile-timeout / --compile-memory-limit when given,
/// else $UDF_COMPILE_TIMEOUT / $UDF_COMPILE_MEMORY_LIMIT, else the defaults.
/// Seconds may have a fraction; MiB may end in M or G (GiB).  A bad flag is
/// UDF0002, a bad variable UDF0004 (usage errors).
Expected<CompileLimits> resolve_compile_limits(const std::optional<std::string>& timeout_flag,
                                               const std::optional<std::string>& memory_flag);

/// Ends the process with `error` reported: called on the watchdog's thread
/// while the compile goes on in another.  It must not return (if it does,
/// the watchdog calls _exit(1)).  Libraries never set one themselves: a
/// caller without a handler (the runtime, a test) gets no limits.
using LimitHandler = std::function<void(const Error&)>;

/// Watches the process while it lives: from construction to destruction.
/// `subject` names what is compiled, for the message: "compiling 'wl2.cu'".
/// The destructor waits for the watchdog's thread; once a limit is passed it
/// never returns (the handler ends the process), so the caller never goes on
/// to write an output.
class CompileWatchdog {
 public:
  CompileWatchdog(const CompileLimits& limits, std::string subject, LimitHandler on_limit);
  ~CompileWatchdog();
  CompileWatchdog(const CompileWatchdog&) = delete;
  CompileWatchdog& operator=(const CompileWatchdog&) = delete;

  /// A step of the work finished (one link of udf-link's many): the time
  /// limit starts again, so that it bounds each step rather than the sum.
  /// Thread-safe.
  void progress();

  struct State;

 private:
  std::unique_ptr<State> state_;
};

/// The process's resident memory in bytes (/proc/self/statm), 0 if unknown.
std::uint64_t resident_memory_bytes();

/// Registers a temporary file or folder (removed recursively) that a
/// watchdog removes before ending the process; unregisters it when
/// destroyed.  The owner still removes it normally.
class TempPathGuard {
 public:
  explicit TempPathGuard(std::string path);
  ~TempPathGuard();
  TempPathGuard(const TempPathGuard&) = delete;
  TempPathGuard& operator=(const TempPathGuard&) = delete;

 private:
  std::string path_;
};

/// Removes every registered temporary path (the watchdog calls it).
void remove_registered_temp_paths();

}  // namespace udf

// Stable diagnostic codes: every error and warning the tools report carries
// one (`UDF1001`), in text, JSON and SARIF output.  Codes are never reused
// or renumbered; docs/diagnostics.md lists them (a test checks that it does).
//
//   UDF0xxx  command line and environment      UDF3xxx  files and formats
//   UDF1xxx  UDF sources and the ABI (udfc)    UDF4xxx  the on-disk cache
//   UDF2xxx  linking (udf-link)                UDF5xxx  CUDA libraries
//   UDF6xxx  the runtime (udf-run)             UDF9xxx  internal errors
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace udf {

enum class DiagCode : std::uint16_t {
  Usage = 1,                 // a missing, unknown or conflicting command-line option
  InvalidOptionValue = 2,    // a flag's value is invalid (arch, type, capture spec, ...)
  ResponseFile = 3,          // a response file is missing, malformed or recursive
  Environment = 4,           // an environment variable has an invalid value

  CompileError = 1001,       // the CUDA compiler reported an error in the source
  CompileWarning = 1002,     // the CUDA compiler reported a warning
  BadSource = 1003,          // the input is empty or not of the expected kind
  CompilerOption = 1004,     // the compiler rejected an option
  SymbolNotFound = 1010,     // the metric or finalize function is not defined with C linkage
  SymbolAmbiguous = 1011,    // several candidate functions: pick one with --symbol
  AbiSignature = 1012,       // the function's type does not match the ABI
  CaptureUndeclared = 1013,  // a capture is used but not declared
  IrParse = 1020,            // MLIR or LLVM IR that cannot be parsed or does not verify
  IrUnsupported = 1021,      // IR the target's reader cannot take
  IrLowering = 1022,         // lowering MLIR to LLVM IR failed
  LtoIrInvalid = 1023,       // LTO-IR input of the wrong arch, or without the symbol
  NvvmError = 1024,          // libNVVM rejected the module

  UndefinedSymbol = 2001,    // a symbol the link needs is defined nowhere
  DuplicateSymbol = 2002,    // a symbol is defined more than once
  IncompatibleArtifact = 2003,  // ABI, types, order or archs do not fit the kernel pack
  LinkFailed = 2004,         // nvJitLink rejected an input or the link
  NotInlined = 2005,         // the UDF stayed a call in the scan kernel (slow)
  KernelPack = 2006,         // the kernel pack is missing or corrupt
  Fatbin = 2007,             // packing the fatbin failed, or fell back to `fatbinary`
  MissingEntry = 2008,       // an expected entry kernel is missing from a cubin

  ReadFailed = 3001,         // a file could not be read
  WriteFailed = 3002,        // a file (output, depfile, diagnostics file) could not be written
  BadContainer = 3003,       // an artifact or module file is truncated, corrupt or of another version
  BadManifest = 3004,        // a manifest field is missing or invalid
  BadDataFile = 3005,        // a vector or .npy file is invalid
  BadElf = 3006,             // a cubin is not a valid ELF file
  FileTooLarge = 3007,       // an input is larger than its documented limit (udf/support/limits.h)

  CacheUnavailable = 4001,   // the cache folder cannot be used (warning; the run goes on)
  CacheIo = 4002,            // a cache entry could not be read or written (warning)

  LibraryMissing = 5001,     // NVRTC, nvJitLink, nvFatbin, libNVVM or a plugin cannot be loaded
  LibraryFailure = 5002,     // a CUDA library call failed unexpectedly
  CompileLimit = 5003,       // a compile or link passed its time or memory limit and was stopped

  Runtime = 6001,            // a runtime call failed (udf-run)
  InputMismatch = 6002,      // inputs that do not fit together (dimensions, capture kinds)
  SearchAdjusted = 6003,     // a search parameter was adjusted (warning)

  Internal = 9001,           // a bug in udf
};

struct DiagCodeInfo {
  DiagCode code;
  const char* name;     // kebab-case, e.g. "compile-error" (SARIF rule name)
  const char* summary;  // one line (SARIF shortDescription)
};

/// "UDF1001".
std::string diag_code_id(DiagCode c);
/// The table entry of `c` (every enumerator has one).
const DiagCodeInfo& diag_code_info(DiagCode c);
/// Every code, in numeric order.
std::span<const DiagCodeInfo> all_diag_codes();

}  // namespace udf

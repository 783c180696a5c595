#include "udf/support/diag_codes.h"

#include <algorithm>
#include <array>
#include <cstdio>

namespace udf {
namespace {

constexpr DiagCodeInfo kCodes[] = {
    {DiagCode::Usage, "usage", "A command-line option is missing, unknown or conflicts with another."},
    {DiagCode::InvalidOptionValue, "invalid-option-value", "A command-line option has an invalid value."},
    {DiagCode::ResponseFile, "response-file", "A response file (@FILE) is missing, malformed or recursive."},
    {DiagCode::Environment, "environment", "An environment variable has an invalid value."},
    {DiagCode::CompileError, "compile-error", "The CUDA compiler reported an error in the UDF source."},
    {DiagCode::CompileWarning, "compile-warning", "The CUDA compiler reported a warning in the UDF source."},
    {DiagCode::BadSource, "bad-source", "The input is empty or not of the expected kind."},
    {DiagCode::CompilerOption, "compiler-option", "The compiler rejected an option."},
    {DiagCode::SymbolNotFound, "symbol-not-found", "The metric or finalize function is not defined with C linkage."},
    {DiagCode::SymbolAmbiguous, "symbol-ambiguous", "Several functions could be the metric: choose one with --symbol."},
    {DiagCode::AbiSignature, "abi-signature", "A function's type does not match the UDF ABI."},
    {DiagCode::CaptureUndeclared, "capture-undeclared", "A capture is used but not declared with --capture."},
    {DiagCode::IrParse, "ir-parse", "MLIR or LLVM IR that cannot be parsed or does not verify."},
    {DiagCode::IrUnsupported, "ir-unsupported", "IR that the target's IR reader cannot take."},
    {DiagCode::IrLowering, "ir-lowering", "Lowering MLIR to LLVM IR failed."},
    {DiagCode::LtoIrInvalid, "ltoir-invalid", "LTO-IR input of the wrong arch, or without the named symbol."},
    {DiagCode::NvvmError, "nvvm-error", "libNVVM rejected the module."},
    {DiagCode::UndefinedSymbol, "undefined-symbol", "A symbol the link needs is defined nowhere."},
    {DiagCode::DuplicateSymbol, "duplicate-symbol", "A symbol is defined more than once."},
    {DiagCode::IncompatibleArtifact, "incompatible-artifact",
     "An artifact's ABI, types, order or archs do not fit the kernel pack or the other artifacts."},
    {DiagCode::LinkFailed, "link-failed", "nvJitLink rejected an input or the link."},
    {DiagCode::NotInlined, "not-inlined", "The UDF stayed a function call in the scan kernel (slower)."},
    {DiagCode::KernelPack, "kernel-pack", "The kernel pack is missing or corrupt."},
    {DiagCode::Fatbin, "fatbin", "Packing the fatbin failed, or fell back to the fatbinary tool."},
    {DiagCode::MissingEntry, "missing-entry", "An expected entry kernel is missing from a linked cubin."},
    {DiagCode::ReadFailed, "read-failed", "A file could not be read."},
    {DiagCode::WriteFailed, "write-failed", "A file (output, depfile or diagnostics file) could not be written."},
    {DiagCode::BadContainer, "bad-container", "An artifact or module file is truncated, corrupt or of another version."},
    {DiagCode::BadManifest, "bad-manifest", "A manifest field is missing or invalid."},
    {DiagCode::BadDataFile, "bad-data-file", "A vector or .npy file is invalid."},
    {DiagCode::BadElf, "bad-elf", "A cubin is not a valid ELF file."},
    {DiagCode::FileTooLarge, "file-too-large", "An input file is larger than its documented size limit."},
    {DiagCode::CacheUnavailable, "cache-unavailable", "The on-disk cache cannot be used; the run goes on without it."},
    {DiagCode::CacheIo, "cache-io", "A cache entry could not be read or written; the run goes on."},
    {DiagCode::LibraryMissing, "library-missing",
     "NVRTC, nvJitLink, nvFatbin, libNVVM, the CUDA driver or udfc's IR plugin cannot be loaded."},
    {DiagCode::LibraryFailure, "library-failure", "A CUDA library call failed unexpectedly."},
    {DiagCode::CompileLimit, "compile-limit", "A compile or link ran past its time or memory limit and was stopped."},
    {DiagCode::Runtime, "runtime", "A udf runtime call failed."},
    {DiagCode::InputMismatch, "input-mismatch", "Inputs that do not fit together (dimensions, capture kinds)."},
    {DiagCode::SearchAdjusted, "search-adjusted", "A search parameter was adjusted to fit the index."},
    {DiagCode::Internal, "internal", "An internal error: a bug in udf."},
};

static_assert(std::is_sorted(std::begin(kCodes), std::end(kCodes),
                             [](const DiagCodeInfo& a, const DiagCodeInfo& b) { return a.code < b.code; }),
              "keep kCodes in numeric order");

}  // namespace

std::string diag_code_id(DiagCode c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "UDF%04u", static_cast<unsigned>(c));
  return buf;
}

const DiagCodeInfo& diag_code_info(DiagCode c) {
  auto it = std::lower_bound(std::begin(kCodes), std::end(kCodes), c,
                             [](const DiagCodeInfo& i, DiagCode v) { return i.code < v; });
  if (it != std::end(kCodes) && it->code == c) return *it;
  return kCodes[std::size(kCodes) - 1];  // Internal: an enumerator without an entry is a bug
}

std::span<const DiagCodeInfo> all_diag_codes() { return {std::begin(kCodes), std::end(kCodes)}; }

}  // namespace udf

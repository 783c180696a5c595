// IR front ends: MLIR, LLVM IR (text or bitcode) and LTO-IR made elsewhere,
// each to one LTO-IR payload per arch, checked against UDF ABI v1 like the
// CUDA front end (cuda.h).  docs/frontends.md describes the conventions.
//
// LLVM IR and MLIR go through libNVVM: for compute_75..90 its reader takes
// only LLVM 7.0.1 IR, so udfc prints typed-pointer LLVM 7 text itself
// (llvm7_writer.cpp); for compute_100 and newer it hands over the modern
// module, adapted.  Only the driver links this library (it needs libLLVM and
// libMLIR); the link step and the runtime never do.
#pragma once

#include <string>

#include "udf/compile/cuda.h"
#include "udf/compile/metadata.h"
#include "udf/cudalibs/nvvm.h"

namespace udf {

struct IrSource {
  Bytes bytes;
  std::string display_name;  // the path as typed: used in diagnostics; the file name goes in the manifest
};

/// LLVM IR, text (.ll) or bitcode (.bc), from current LLVM or older producers.
Expected<CompileOutput> compile_llvm_ir(const IrSource& src, const UdfMetadata& meta);

/// MLIR in the func, arith, math, scf, cf and llvm dialects, lowered by udfc.
Expected<CompileOutput> compile_mlir(const IrSource& src, const UdfMetadata& meta);

/// LTO-IR made by another compiler (NVRTC, nvcc -dlto, numba-cuda), one or
/// more inputs of different archs: each checked (magic, arch, the symbol
/// defined with the ABI's call type); each requested arch stores the newest
/// input not newer than it.
Expected<CompileOutput> compile_ltoir(const std::vector<IrSource>& srcs, const UdfMetadata& meta);

/// The cache key of one or more LTO-IR inputs (one per arch); for one input
/// the same as ir_cache_key.
std::string ltoir_cache_key(const std::vector<IrSource>& srcs, const UdfMetadata& meta);

/// The cache key of an IR input, from the inputs alone (like cuda_cache_key).
/// nvvm_version: nvvm_version_string()'s answer when the caller has it (remembered in the
/// cache: a hit then loads no libNVVM); empty: asked here.
std::string ir_cache_key(SourceKind kind, const IrSource& src, const UdfMetadata& meta,
                         const std::string& nvvm_version = {});

/// Where udfc's IR front-end plugin was loaded from, or why not (--version).
LibraryStatus ir_frontend_library_status();
/// Files an MLIR or LLVM IR compile reads besides its input (libdevice), for depfiles.
std::vector<std::string> ir_frontend_dependencies();

/// The arch recorded in an LTO-IR header (e.g. 90), or 0 when `bytes` is not
/// LTO-IR.  Exposed for tests.
Arch ltoir_arch(const Bytes& bytes);

}  // namespace udf

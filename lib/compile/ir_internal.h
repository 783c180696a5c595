// Shared by the IR front ends (llvm_ir.cpp, mlir.cpp, llvm7_writer.cpp):
// not installed, not part of the public API.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "udf/compile/ir.h"

namespace llvm {
class Module;
class Instruction;
class Function;
}  // namespace llvm
namespace mlir {
class MLIRContext;
}  // namespace mlir

namespace udf::ir {

/// The front ends proper, in the plugin libudf_frontend_ir.so (ir_plugin.cpp
/// exports them); compile_llvm_ir / compile_mlir (ir_frontend.cpp) load it.
Expected<CompileOutput> compile_llvm_ir_impl(const IrSource& src, const UdfMetadata& meta);
Expected<CompileOutput> compile_mlir_impl(const IrSource& src, const UdfMetadata& meta);

/// The plugin's entry point: fills *out.  Same compiler, same headers: C++
/// types cross the boundary.
using PluginCompileFn = void (*)(int kind, const IrSource* src, const UdfMetadata* meta,
                                 std::optional<Expected<CompileOutput>>* out);
inline constexpr const char* kPluginEntry = "udf_frontend_ir_compile_v1";

/// The front ends without code generation (no libNVVM): parse (MLIR: lower
/// and translate to LLVM IR), then check_module.  The metric's symbol.  For
/// the fuzz targets (test/fuzz).
Expected<std::string> check_llvm_ir_impl(const IrSource& src, const UdfMetadata& meta);
/// `ctx`: an MLIR context from make_mlir_context() to parse in, reused over
/// many inputs (the mlir fuzz target: making one, with its dialects loaded,
/// costs more than most inputs do); null: a fresh one, as every compile has.
Expected<std::string> check_mlir_impl(const IrSource& src, const UdfMetadata& meta, mlir::MLIRContext* ctx = nullptr);

/// A context with the dialects udfc takes and their LLVM IR translations
/// loaded, threading off (what compile_mlir_impl makes for each compile).
std::shared_ptr<mlir::MLIRContext> make_mlir_context();

/// The ABI checks of compile_module on a parsed, verified module: the
/// target, the metric and finalize functions and their signatures, every
/// read of ctx.  Sets the NVPTX target and runs mem2reg.  The metric's symbol;
/// `shape_out`: an ABI v2 metric's shape (inferred from the signature when
/// meta has none).
Expected<std::string> check_module(llvm::Module& m, const IrSource& src, const UdfMetadata& meta,
                                   std::optional<MetricShape>* shape_out = nullptr);

/// Checks the ABI (check_module), lowers and compiles a parsed, verified
/// module for every arch in `meta`.  Locations in diagnostics come from the
/// module's debug locations (the front ends attach them: .ll positions, MLIR
/// locations).
Expected<CompileOutput> compile_module(llvm::Module& m, const IrSource& src, SourceKind kind, const UdfMetadata& meta);

/// Prints `m` as LLVM 7.0.1 textual IR for libNVVM's compute_75..90 reader:
/// typed pointers (every pointer value is `i8 addrspace(N)*`, cast at each
/// load, store and GEP), LLVM 7 syntax, no attributes, no metadata but
/// !nvvmir.version.  Every construct it cannot express is an error at its
/// location.
Expected<std::string> write_llvm7(const llvm::Module& m, const std::string& display_name);

/// file:line:col of an instruction or function, from its debug location.
Diagnostic diag_at(DiagCode code, const llvm::Instruction& i, const std::string& display_name, std::string message);
Diagnostic diag_at(DiagCode code, const llvm::Function& f, const std::string& display_name, std::string message);

}  // namespace udf::ir

// The MLIR front end: parse (func, arith, math, scf, cf, llvm), lower to the
// LLVM dialect in process -- scf to cf, math to libdevice calls (__nv_*,
// the same patterns as MLIR's gpu-to-nvvm) or LLVM intrinsics, arith, cf and
// func to llvm -- give every function a debug scope so that MLIR locations
// survive as debug locations, translate to an LLVM module, and hand it to
// compile_module (llvm_ir.cpp), which checks the ABI and runs libNVVM.
// The only translation unit that includes MLIR headers.
#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <mlir/Conversion/ArithToLLVM/ArithToLLVM.h>
#include <mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h>
#include <mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h>
#include <mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h>
#include <mlir/Conversion/LLVMCommon/ConversionTarget.h>
#include <mlir/Conversion/LLVMCommon/TypeConverter.h>
#include <mlir/Conversion/MathToLLVM/MathToLLVM.h>
#include <mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h>
#include <mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h>
#include <mlir/Dialect/Arith/IR/Arith.h>
#include <mlir/Dialect/ControlFlow/IR/ControlFlow.h>
#include <mlir/Dialect/Func/IR/FuncOps.h>
#include <mlir/Dialect/LLVMIR/LLVMDialect.h>
#include <mlir/Dialect/LLVMIR/Transforms/Passes.h>
#include <mlir/Dialect/Math/IR/Math.h>
#include <mlir/Dialect/SCF/IR/SCF.h>
#include <mlir/IR/BuiltinOps.h>
#include <mlir/IR/Diagnostics.h>
#include <mlir/IR/MLIRContext.h>
#include <mlir/Parser/Parser.h>
#include <mlir/Pass/PassManager.h>
#include <mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h>
#include <mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h>
#include <mlir/Target/LLVMIR/Export.h>
#include <mlir/Transforms/DialectConversion.h>

#include "ir_internal.h"

namespace udf {

namespace {

Diagnostic to_diag(DiagCode code, mlir::Location loc, const std::string& display, std::string message) {
  Diagnostic d(code, display, 0, 0, std::move(message));
  if (auto flc = loc->findInstanceOf<mlir::FileLineColLoc>()) {
    d.file = flc.getFilename().str();
    d.line = static_cast<int>(flc.getLine());
    d.column = static_cast<int>(flc.getColumn());
  }
  return d;
}

// Parses, lowers and translates the MLIR into an LLVM module in `llctx`.
Expected<std::unique_ptr<llvm::Module>> mlir_to_llvm(const IrSource& src, mlir::MLIRContext& ctx,
                                                     llvm::LLVMContext& llctx) {
  const std::string& display = src.display_name;
  if (src.bytes.empty()) return diagnosed(DiagCode::BadSource, display + ": empty input: no MLIR to compile");

  std::vector<Diagnostic> errs;
  DiagCode phase = DiagCode::IrParse;  // what MLIR's errors are, by the step that reports them
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic& diag) {
    if (diag.getSeverity() != mlir::DiagnosticSeverity::Error) return mlir::success();
    Diagnostic d = to_diag(phase, diag.getLocation(), display, diag.str());
    for (auto& note : diag.getNotes()) {
      Diagnostic n = to_diag(phase, note.getLocation(), display, note.str());
      d.notes.push_back(n.line ? fmt::format("{}:{}:{}: {}", n.file, n.line, n.column, n.message) : n.message);
    }
    errs.push_back(std::move(d));
    return mlir::success();
  });

  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(reinterpret_cast<const char*>(src.bytes.data()), src.bytes.size()),
                                           display),
      llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceFile<mlir::ModuleOp>(sm, &ctx);
  if (!module) {
    if (errs.empty()) errs.push_back(Diagnostic(DiagCode::IrParse, display, 0, 0, "cannot parse this MLIR"));
    for (auto& e : errs)
      if (e.message.find("unregistered dialect") != std::string::npos || e.message.find("not found for custom op") != std::string::npos)
        e.notes.push_back("udfc takes the func, arith, math, scf, cf and llvm dialects");
    return Error(ErrorKind::Diagnosed, std::move(errs));
  }

  // Lower.  Conversion failures ("failed to legalize operation 'x'") come
  // back through the handler with the op's location.
  phase = DiagCode::IrLowering;
  {
    mlir::PassManager pm(&ctx);
    pm.addPass(mlir::createSCFToControlFlowPass());
    if (mlir::failed(pm.run(*module))) {
      if (errs.empty()) errs.push_back(Diagnostic(DiagCode::IrLowering, display, 0, 0, "lowering scf to cf failed"));
      return Error(ErrorKind::Diagnosed, std::move(errs));
    }
    mlir::LLVMConversionTarget target(ctx);
    target.addLegalOp<mlir::ModuleOp>();
    mlir::LLVMTypeConverter tc(&ctx);
    mlir::RewritePatternSet patterns(&ctx);
    mlir::populateLibDeviceConversionPatterns(tc, patterns, /*benefit=*/10);
    mlir::populateMathToLLVMConversionPatterns(tc, patterns);
    mlir::arith::populateArithToLLVMConversionPatterns(tc, patterns);
    mlir::cf::populateControlFlowToLLVMConversionPatterns(tc, patterns);
    mlir::populateFuncToLLVMConversionPatterns(tc, patterns);
    if (mlir::failed(mlir::applyFullConversion(*module, target, std::move(patterns)))) {
      if (errs.empty()) errs.push_back(Diagnostic(DiagCode::IrLowering, display, 0, 0, "lowering to the LLVM dialect failed"));
      for (auto& e : errs)
        if (e.message.find("failed to legalize") != std::string::npos)
          e.notes.push_back("udfc lowers func, arith, math, scf and cf ops, and takes llvm ops as they are");
      return Error(ErrorKind::Diagnosed, std::move(errs));
    }
    mlir::PassManager pm2(&ctx);
    pm2.addPass(mlir::createReconcileUnrealizedCastsPass());
    pm2.addPass(mlir::LLVM::createDIScopeForLLVMFuncOpPass());
    if (mlir::failed(pm2.run(*module))) {
      if (errs.empty()) errs.push_back(Diagnostic(DiagCode::IrLowering, display, 0, 0, "lowering to the LLVM dialect failed"));
      return Error(ErrorKind::Diagnosed, std::move(errs));
    }
  }
  std::unique_ptr<llvm::Module> m = mlir::translateModuleToLLVMIR(*module, llctx, "udf");
  if (!m) {
    if (errs.empty()) errs.push_back(Diagnostic(DiagCode::IrLowering, display, 0, 0, "translation to LLVM IR failed"));
    return Error(ErrorKind::Diagnosed, std::move(errs));
  }
  // The functions' own columns, for signature errors (debug info has lines only).
  module->walk([&](mlir::LLVM::LLVMFuncOp op) {
    auto flc = op.getLoc()->findInstanceOf<mlir::FileLineColLoc>();
    llvm::Function* f = m->getFunction(op.getSymName());
    if (!flc || !f) return;
    auto* i32 = llvm::Type::getInt32Ty(llctx);
    f->setMetadata("udf.column", llvm::MDNode::get(llctx, {llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32, flc.getColumn()))}));
  });
  return m;
}

}  // namespace

std::shared_ptr<mlir::MLIRContext> ir::make_mlir_context() {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::arith::ArithDialect, mlir::math::MathDialect, mlir::scf::SCFDialect,
                  mlir::cf::ControlFlowDialect, mlir::LLVM::LLVMDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  auto ctx = std::make_shared<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  return ctx;
}

Expected<CompileOutput> ir::compile_mlir_impl(const IrSource& src, const UdfMetadata& meta) {
  UDF_TRY_VOID(validate(meta));
  auto ctx = make_mlir_context();
  llvm::LLVMContext llctx;
  UDF_TRY(m, mlir_to_llvm(src, *ctx, llctx));
  return ir::compile_module(*m, src, SourceKind::Mlir, meta);
}

Expected<std::string> ir::check_mlir_impl(const IrSource& src, const UdfMetadata& meta, mlir::MLIRContext* ctx) {
  UDF_TRY_VOID(validate(meta));
  std::shared_ptr<mlir::MLIRContext> own;
  if (!ctx) {
    own = make_mlir_context();
    ctx = own.get();
  }
  llvm::LLVMContext llctx;
  UDF_TRY(m, mlir_to_llvm(src, *ctx, llctx));
  return ir::check_module(*m, src, meta);
}

}  // namespace udf

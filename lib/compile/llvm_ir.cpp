// The LLVM IR front end, and the part every IR front end shares
// (compile_module): ABI checks on the parsed module, cleanup passes, math
// intrinsics to libdevice, then libNVVM per arch -- LLVM 7 text
// (llvm7_writer.cpp) for compute_75..90, the adapted modern module for
// compute_100 and newer.

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <llvm/AsmParser/AsmParserContext.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/DIBuilder.h>
#include <llvm/IR/DebugInfo.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/ReplaceConstant.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/IPO/GlobalDCE.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/EarlyCSE.h>
#include <llvm/Transforms/Scalar/SROA.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>
#include <llvm/Transforms/Utils/Mem2Reg.h>

#include "ir_internal.h"
#include "udf/abi/metric_v1.h"
#include "udf/cudalibs/nvvm.h"
#include "udf/support/cuda_libs.h"
#include "udf/support/hash.h"
#include "udf/support/version.h"

namespace udf {

namespace ir {

namespace {

constexpr const char* kNvptxLayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64";
constexpr const char* kNvptxTriple = "nvptx64-nvidia-cuda";

Diagnostic at_debug_loc(DiagCode code, const llvm::DILocation* dl, const std::string& display, std::string message,
                        const llvm::Function* fn = nullptr) {
  Diagnostic d(code, display, 0, 0, std::move(message));
  if (fn && (!dl || dl->getLine() == 0)) d.message += fmt::format(" (in function '{}')", fn->getName().str());
  if (dl) {
    if (!dl->getFilename().empty()) d.file = dl->getFilename().str();
    d.line = static_cast<int>(dl->getLine());
    d.column = static_cast<int>(dl->getColumn());
  }
  return d;
}

}  // namespace

Diagnostic diag_at(DiagCode code, const llvm::Instruction& i, const std::string& display, std::string message) {
  return at_debug_loc(code, i.getDebugLoc().get(), display, std::move(message), i.getFunction());
}

Diagnostic diag_at(DiagCode code, const llvm::Function& f, const std::string& display, std::string message) {
  Diagnostic d(code, display, 0, 0, std::move(message));
  if (auto* sp = f.getSubprogram()) {
    if (!sp->getFilename().empty()) d.file = sp->getFilename().str();
    d.line = static_cast<int>(sp->getLine());
    // The column of the first instruction is not the function's: leave it out
    // unless the front end recorded one (udf.column).
    if (auto* md = f.getMetadata("udf.column"))
      if (auto* c = llvm::mdconst::dyn_extract<llvm::ConstantInt>(md->getOperand(0))) d.column = static_cast<int>(c->getZExtValue());
  }
  return d;
}

namespace {

std::string type_str(const llvm::Type* t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t->print(os);
  return s;
}

std::string file_name(const std::string& display) {
  if (display.empty() || display[0] == '<') return display;
  return std::filesystem::path(display).filename().string();
}

std::string captures_list(const UdfMetadata& meta) {
  std::string list;
  for (const auto& c : meta.captures) list += (list.empty() ? "" : ", ") + to_string(c);
  return list.empty() ? std::string("none") : list;
}

// ---- ABI checks

bool is_acc(const llvm::Type* t, AccType acc) {
  return acc == AccType::F32 ? t->isFloatTy() : t->isIntegerTy(32);
}

// Follows the ctx pointer through constant-offset GEPs, casts and calls to
// defined functions, and checks every load at a known offset: the header
// (dim, n_dims, n_captures, reserved) or a declared capture of the right type.
// Stores through `p` (an argument the ABI passes as const), through GEPs and casts.
void check_read_only(const llvm::Value& p, const char* name, const std::string& display, std::vector<Diagnostic>& errs,
                     int depth = 0) {
  if (depth > 16) return;
  for (const llvm::User* u : p.users()) {
    if (auto* gep = llvm::dyn_cast<llvm::GEPOperator>(u)) {
      if (gep->getPointerOperand() == &p) check_read_only(*gep, name, display, errs, depth + 1);
    } else if (auto* c = llvm::dyn_cast<llvm::CastInst>(u)) {
      if (c->getType()->isPointerTy()) check_read_only(*c, name, display, errs, depth + 1);
    } else if (auto* st = llvm::dyn_cast<llvm::StoreInst>(u)) {
      if (st->getPointerOperand() == &p)
        errs.push_back(diag_at(DiagCode::AbiSignature, *st, display,
                               fmt::format("the UDF writes through its '{}' argument, which is read-only (const ACC *)", name)));
    }
  }
}

// Bytes of pointer p (at byte offset `off` of the object) that the function
// reads or writes: the end of the furthest load or store at a constant
// offset; nullopt when some use is not one (a variable offset, the pointer
// stored or handed to a function without a body).  For a v2 state metric's
// state argument: how many of the 8 words its scan must keep.
std::optional<int64_t> accessed_bytes(const llvm::Value* p, int64_t off, const llvm::DataLayout& dl, int depth = 0) {
  if (depth > 16 || off < 0) return std::nullopt;
  int64_t end = 0;
  auto take = [&](std::optional<int64_t> e) {
    if (e) end = std::max(end, *e);
    return e.has_value();
  };
  for (const llvm::User* u : p->users()) {
    if (auto* gep = llvm::dyn_cast<llvm::GEPOperator>(u)) {
      llvm::APInt delta(64, 0);
      if (gep->getPointerOperand() != p || !gep->accumulateConstantOffset(dl, delta) || delta.getSExtValue() > 4096) return std::nullopt;
      if (!take(accessed_bytes(gep, off + delta.getSExtValue(), dl, depth + 1))) return std::nullopt;
    } else if (auto* c = llvm::dyn_cast<llvm::CastInst>(u)) {
      if (!c->getType()->isPointerTy() || !take(accessed_bytes(c, off, dl, depth + 1))) return std::nullopt;
    } else if (auto* ld = llvm::dyn_cast<llvm::LoadInst>(u)) {
      end = std::max(end, off + static_cast<int64_t>(dl.getTypeStoreSize(ld->getType())));
    } else if (auto* st = llvm::dyn_cast<llvm::StoreInst>(u)) {
      if (st->getPointerOperand() != p) return std::nullopt;  // the pointer itself is stored
      end = std::max(end, off + static_cast<int64_t>(dl.getTypeStoreSize(st->getValueOperand()->getType())));
    } else if (auto* call = llvm::dyn_cast<llvm::CallInst>(u)) {
      const llvm::Function* f = call->getCalledFunction();
      if (!f || f->isDeclaration()) return std::nullopt;
      for (unsigned k = 0; k < call->arg_size(); ++k)
        if (call->getArgOperand(k) == p && (k >= f->arg_size() || !take(accessed_bytes(f->getArg(k), off, dl, depth + 1))))
          return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  return end;
}

struct CtxChecker {
  const UdfMetadata& meta;
  const std::string& display;
  std::string_view source_text;  // MLIR or LLVM IR text (its first line may declare captures); bitcode: none
  const llvm::DataLayout& dl;
  std::vector<Diagnostic>& errs;
  std::set<std::pair<const llvm::Value*, int64_t>> seen;

  void walk(const llvm::Value* p, int64_t off, int depth = 0) {
    if (depth > 16 || !seen.insert({p, off}).second) return;
    for (const llvm::User* u : p->users()) {
      if (auto* gep = llvm::dyn_cast<llvm::GEPOperator>(u)) {
        if (gep->getPointerOperand() != p) continue;
        llvm::APInt delta(64, 0);
        if (!gep->accumulateConstantOffset(dl, delta)) continue;
        // Offsets of chained GEPs add up past int64 (i64 9223372036854775807
        // twice): saturate, the load is outside ctx either way.
        int64_t next = 0;
        if (__builtin_add_overflow(off, delta.getSExtValue(), &next))
          next = off < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
        walk(gep, next, depth + 1);
      } else if (auto* c = llvm::dyn_cast<llvm::CastInst>(u)) {
        if (c->getType()->isPointerTy()) walk(c, off, depth + 1);
      } else if (auto* ld = llvm::dyn_cast<llvm::LoadInst>(u)) {
        check_load(*ld, off);
      } else if (auto* call = llvm::dyn_cast<llvm::CallInst>(u)) {
        const llvm::Function* f = call->getCalledFunction();
        if (!f || f->isDeclaration()) continue;
        for (unsigned k = 0; k < call->arg_size() && k < f->arg_size(); ++k)
          if (call->getArgOperand(k) == p) walk(f->getArg(k), off, depth + 1);
      } else if (auto* st = llvm::dyn_cast<llvm::StoreInst>(u)) {
        if (st->getPointerOperand() == p)
          errs.push_back(diag_at(DiagCode::AbiSignature, *st, display, fmt::format("the UDF writes to its ctx argument, which is read-only (const {} *)",
                                                                                  meta.v2() ? "udf_ctx_v2" : "udf_ctx_v1")));
      }
    }
  }

  void check_load(const llvm::LoadInst& ld, int64_t off) {
    const llvm::Type* t = ld.getType();
    // udf_ctx_v1: 16 bytes of fields, then the captures; udf_ctx_v2: 24.
    const int64_t base = meta.v2() ? 24 : 16;
    const char* ctx_name = meta.v2() ? "udf_ctx_v2" : "udf_ctx_v1";
    if (off < 0 || off >= base + 8 * UDF_ABI_METRIC_V1_MAX_CAPTURES) {
      errs.push_back(diag_at(DiagCode::AbiSignature, ld, display, fmt::format("load at byte offset {} of ctx is outside {} ({} bytes)", off,
                                                                              ctx_name, base + 8 * UDF_ABI_METRIC_V1_MAX_CAPTURES)));
      return;
    }
    if (off < base) return;  // dim, n_dims, n_captures, reserved (v2: query, id)
    size_t idx = static_cast<size_t>(off - base) / 8;
    if (idx >= meta.captures.size()) {
      Diagnostic d = diag_at(DiagCode::CaptureUndeclared, ld, display, fmt::format("capture {} (ctx byte offset {}) is used but not declared", idx, off));
      if (auto note = first_line_capture_note(source_text, display, std::nullopt, idx, meta)) {
        d.notes.push_back(std::move(*note));
        errs.push_back(std::move(d));
        return;
      }
      d.notes.push_back(fmt::format("declare it with --capture NAME:TYPE[] (array) or --capture NAME:TYPE (scalar); "
                                    "capture i is read at byte offset {} + 8*i", base));
      d.notes.push_back("declared captures: " + captures_list(meta));
      errs.push_back(std::move(d));
      return;
    }
    const Capture& c = meta.captures[idx];
    bool ok = c.array ? t->isPointerTy()
                      : (c.type == CaptureType::F32 ? t->isFloatTy() : c.type == CaptureType::I32 ? t->isIntegerTy(32) : true);
    if (!ok || (off - base) % 8 != 0) {
      Diagnostic d = diag_at(DiagCode::AbiSignature, ld, display,
                             fmt::format("capture '{}' (capture {}) is declared {} but read as '{}'{}", c.name, idx,
                                         to_string(c), type_str(t),
                                         (off - base) % 8 ? fmt::format(" at byte offset {}", off) : std::string()));
      d.notes.push_back(c.array ? fmt::format("an array capture is a pointer: load 'ptr' from ctx + {} + 8*i, then index it", base)
                                : fmt::format("a scalar capture is read by value at ctx + {} + 8*i", base));
      errs.push_back(std::move(d));
    }
  }
};

// ---- math intrinsics to libdevice

struct LibdeviceName {
  llvm::Intrinsic::ID id;
  const char* f32;
  const char* f64;
};

const LibdeviceName kLibdeviceMath[] = {
    {llvm::Intrinsic::exp, "__nv_expf", "__nv_exp"},         {llvm::Intrinsic::exp2, "__nv_exp2f", "__nv_exp2"},
    {llvm::Intrinsic::exp10, "__nv_exp10f", "__nv_exp10"},   {llvm::Intrinsic::log, "__nv_logf", "__nv_log"},
    {llvm::Intrinsic::log2, "__nv_log2f", "__nv_log2"},      {llvm::Intrinsic::log10, "__nv_log10f", "__nv_log10"},
    {llvm::Intrinsic::pow, "__nv_powf", "__nv_pow"},         {llvm::Intrinsic::sin, "__nv_sinf", "__nv_sin"},
    {llvm::Intrinsic::cos, "__nv_cosf", "__nv_cos"},         {llvm::Intrinsic::tan, "__nv_tanf", "__nv_tan"},
    {llvm::Intrinsic::asin, "__nv_asinf", "__nv_asin"},      {llvm::Intrinsic::acos, "__nv_acosf", "__nv_acos"},
    {llvm::Intrinsic::atan, "__nv_atanf", "__nv_atan"},      {llvm::Intrinsic::atan2, "__nv_atan2f", "__nv_atan2"},
    {llvm::Intrinsic::sinh, "__nv_sinhf", "__nv_sinh"},      {llvm::Intrinsic::cosh, "__nv_coshf", "__nv_cosh"},
    {llvm::Intrinsic::tanh, "__nv_tanhf", "__nv_tanh"},      {llvm::Intrinsic::maximum, "__nv_fmaxf", "__nv_fmax"},
    {llvm::Intrinsic::minimum, "__nv_fminf", "__nv_fmin"},   {llvm::Intrinsic::maximumnum, "__nv_fmaxf", "__nv_fmax"},
    {llvm::Intrinsic::minimumnum, "__nv_fminf", "__nv_fmin"}, {llvm::Intrinsic::powi, "__nv_powif", "__nv_powi"},
    {llvm::Intrinsic::ldexp, "__nv_ldexpf", "__nv_ldexp"},
    // libNVVM's verifier rejects llvm.fabs for every arch.
    {llvm::Intrinsic::fabs, "__nv_fabsf", "__nv_fabs"},
};

struct IntName {
  llvm::Intrinsic::ID id;
  const char* i32;
  const char* i64;
};
const IntName kLibdeviceInt[] = {
    {llvm::Intrinsic::smax, "__nv_max", "__nv_llmax"},  {llvm::Intrinsic::smin, "__nv_min", "__nv_llmin"},
    {llvm::Intrinsic::umax, "__nv_umax", "__nv_ullmax"}, {llvm::Intrinsic::umin, "__nv_umin", "__nv_ullmin"},
    {llvm::Intrinsic::abs, "__nv_abs", "__nv_llabs"},
};

// Intrinsics with no effect on the result, dropped before lowering.
bool droppable(llvm::Intrinsic::ID id) {
  switch (id) {
    case llvm::Intrinsic::lifetime_start:
    case llvm::Intrinsic::lifetime_end:
    case llvm::Intrinsic::assume:
    case llvm::Intrinsic::dbg_declare:
    case llvm::Intrinsic::dbg_value:
    case llvm::Intrinsic::dbg_assign:
    case llvm::Intrinsic::dbg_label:
    case llvm::Intrinsic::experimental_noalias_scope_decl:
    case llvm::Intrinsic::fake_use:
    case llvm::Intrinsic::donothing:
    case llvm::Intrinsic::sideeffect:
    case llvm::Intrinsic::invariant_start:
    case llvm::Intrinsic::invariant_end:
      return true;
    default:
      return false;
  }
}

void map_intrinsics(llvm::Module& m) {
  std::vector<llvm::CallInst*> calls;
  for (auto& f : m)
    for (auto& bb : f)
      for (auto& i : bb)
        if (auto* c = llvm::dyn_cast<llvm::CallInst>(&i))
          if (c->getCalledFunction() && c->getCalledFunction()->isIntrinsic()) calls.push_back(c);
  for (auto* c : calls) {
    auto id = c->getCalledFunction()->getIntrinsicID();
    if (droppable(id)) {
      if (!c->getType()->isVoidTy()) c->replaceAllUsesWith(llvm::PoisonValue::get(c->getType()));
      c->eraseFromParent();
      continue;
    }
    llvm::Type* t = c->getType();
    const char* name = nullptr;
    unsigned nargs = c->arg_size();
    for (const auto& e : kLibdeviceMath)
      if (e.id == id) name = t->isFloatTy() ? e.f32 : t->isDoubleTy() ? e.f64 : nullptr;
    for (const auto& e : kLibdeviceInt)
      if (e.id == id) {
        name = t->isIntegerTy(32) ? e.i32 : t->isIntegerTy(64) ? e.i64 : nullptr;
        if (id == llvm::Intrinsic::abs) nargs = 1;  // the is_int_min_poison flag
      }
    if (!name) continue;
    std::vector<llvm::Value*> args(c->arg_begin(), c->arg_begin() + nargs);
    std::vector<llvm::Type*> types;
    for (auto* a : args) types.push_back(a->getType());
    auto callee = m.getOrInsertFunction(name, llvm::FunctionType::get(t, types, false));
    llvm::IRBuilder<> b(c);
    auto* nc = b.CreateCall(callee, args);
    nc->setDebugLoc(c->getDebugLoc());
    if (llvm::isa<llvm::FPMathOperator>(c)) nc->setFastMathFlags(c->getFastMathFlags());
    c->replaceAllUsesWith(nc);
    c->eraseFromParent();
  }
}

void run_passes(llvm::Module& m, bool full) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb;
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::FunctionPassManager fpm;
  fpm.addPass(llvm::PromotePass());
  if (full) {
    fpm.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
    fpm.addPass(llvm::EarlyCSEPass());
    fpm.addPass(llvm::InstCombinePass());
    fpm.addPass(llvm::SimplifyCFGPass());
  }
  llvm::ModulePassManager mpm;
  mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
  if (full) mpm.addPass(llvm::GlobalDCEPass());
  mpm.run(m, mam);
}

// ---- libNVVM

Expected<Bytes> libdevice() {
  static std::mutex mu;
  static std::optional<Bytes> cached;
  std::lock_guard<std::mutex> lock(mu);
  if (cached) return *cached;
  // Beside the libNVVM that compiles (udf/support/cuda_libs.h).
  const std::string path = libdevice_path();
  if (path.empty())
    return Error(ErrorKind::Internal, DiagCode::LibraryMissing,
                 "libdevice (libdevice.10.bc) was not found beside libNVVM (" +
                     cuda_library(CudaLibrary::Nvvm).path() + ") and udfc was built without one");
  auto b = read_file(path, limits::kIr);
  if (!b)
    return Error(ErrorKind::Internal, DiagCode::LibraryMissing,
                 "libdevice (" + path + ") could not be read: " + b.error().message());
  cached = std::move(*b);
  return *cached;
}

Expected<Bytes> nvvm_compile(const std::string& ir, Arch a, const std::string& display, std::string& raw_log) {
  NvvmProgram prog;
  if (auto r = nvvmCreateProgram(&prog.p); r != NVVM_SUCCESS) return nvvm_failure(r, "nvvmCreateProgram");
  const std::string name = file_name(display);
  if (auto r = nvvmAddModuleToProgram(prog.p, ir.data(), ir.size(), name.c_str()); r != NVVM_SUCCESS)
    return nvvm_failure(r, "nvvmAddModuleToProgram");
  UDF_TRY(ld, libdevice());
  if (auto r = nvvmLazyAddModuleToProgram(prog.p, reinterpret_cast<const char*>(ld.data()), ld.size(), "libdevice.10.bc");
      r != NVVM_SUCCESS)
    return nvvm_failure(r, "nvvmLazyAddModuleToProgram");
  std::string arch = fmt::format("-arch=compute_{}", a);
  const char* opts[] = {arch.c_str(), "-gen-lto"};
  auto rejected = [&](const char* step, nvvmResult r, const std::string& log) {
    raw_log += fmt::format("libNVVM {} for {}:\n{}\n--- module ---\n{}\n", step, arch_name(a), log, ir);
    Error e(ErrorKind::Diagnosed,
            Diagnostic(DiagCode::NvvmError, display, 0, 0,
                       fmt::format("libNVVM rejected the module for {} ({}): {}", arch_name(a), nvvmGetErrorString(r),
                                   log.empty() ? std::string("no log") : log.substr(0, log.find('\n')))));
    e.note(a < 100 ? "udfc translated the module to LLVM 7 IR for libNVVM; -v shows libNVVM's log and that module"
                   : "-v shows libNVVM's log and the module udfc gave it");
    return e.with_raw_log(raw_log);
  };
  {
    auto r = nvvmVerifyProgram(prog.p, 1, opts);
    std::string log = nvvm_program_log(prog.p);  // read before deciding on r
    if (r != NVVM_SUCCESS) return rejected("verification", r, log);
  }
  auto r = nvvmCompileProgram(prog.p, 2, opts);
  std::string log = nvvm_program_log(prog.p);
  if (!log.empty()) raw_log += fmt::format("libNVVM log for {}:\n{}\n", arch_name(a), log);
  if (r != NVVM_SUCCESS) return rejected("compilation", r, log);
  size_t n = 0;
  if (auto rs = nvvmGetCompiledResultSize(prog.p, &n); rs != NVVM_SUCCESS) return nvvm_failure(rs, "nvvmGetCompiledResultSize");
  Bytes out(n);
  if (auto rg = nvvmGetCompiledResult(prog.p, reinterpret_cast<char*>(out.data())); rg != NVVM_SUCCESS)
    return nvvm_failure(rg, "nvvmGetCompiledResult");
  if (ltoir_arch(out) != a)
    return library_failure(fmt::format("libNVVM returned no LTO-IR for {} ({} bytes)", arch_name(a), n));
  return out;
}

// The modern reader (compute_100+, LLVM 20): no attributes newer than it
// knows (all are dropped: none matters for a device function that will be
// inlined), no debug info (its flag's behaviour would conflict at link time),
// and the NVVM IR version.
std::string modern_text(llvm::Module& m) {
  for (auto& f : m) {
    f.setAttributes(llvm::AttributeList());
    for (auto& bb : f)
      for (auto& i : bb)
        if (auto* c = llvm::dyn_cast<llvm::CallBase>(&i)) c->setAttributes(llvm::AttributeList());
  }
  llvm::StripDebugInfo(m);
  if (auto* flags = m.getModuleFlagsMetadata()) m.eraseNamedMetadata(flags);
  for (auto& f : m) f.eraseMetadata(m.getContext().getMDKindID("udf.column"));
  if (!m.getNamedMetadata("nvvmir.version")) {
    auto& ctx = m.getContext();
    auto* i32 = llvm::Type::getInt32Ty(ctx);
    m.getOrInsertNamedMetadata("nvvmir.version")
        ->addOperand(llvm::MDNode::get(ctx, {llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32, 2)),
                                             llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32, 0))}));
  }
  m.setModuleIdentifier("udf");
  m.setSourceFileName("udf");
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os, nullptr);
  return s;
}

std::vector<std::string> defined_functions(const llvm::Module& m) {
  std::vector<std::string> v;
  for (const auto& f : m)
    if (!f.isDeclaration() && f.hasExternalLinkage()) v.push_back(f.getName().str());
  return v;
}

// Stage 1: the target.  A module may name NVPTX with 64-bit pointers or
// nothing; it leaves with NVPTX's triple and data layout and mem2reg run
// (locations stay where they were).
Expected<void> retarget_to_nvptx(llvm::Module& m, const std::string& display) {
  if (!m.getTargetTriple().empty()) {
    llvm::Triple t(m.getTargetTriple());
    if (t.getArch() != llvm::Triple::nvptx64) {
      Error e(ErrorKind::Diagnosed, DiagCode::IrUnsupported, fmt::format("{}: the module targets '{}', not NVPTX", display, t.str()));
      e.note(std::string("UDFs are device code: use target triple \"") + kNvptxTriple + "\" or none");
      return e;
    }
  }
  if (!m.getDataLayoutStr().empty() && m.getDataLayout().getPointerSizeInBits(0) != 64)
    return diagnosed(DiagCode::IrUnsupported, fmt::format("{}: the module's data layout has {}-bit pointers; NVPTX UDFs use 64-bit pointers",
                                 display, m.getDataLayout().getPointerSizeInBits(0)));
  m.setTargetTriple(llvm::Triple(kNvptxTriple));
  m.setDataLayout(kNvptxLayout);
  for (auto& f : m) {
    f.removeFnAttr(llvm::Attribute::OptimizeNone);
    f.removeFnAttr(llvm::Attribute::NoInline);
  }
  run_passes(m, /*full=*/false);
  return {};
}

// The UDF's functions: the metric (or filter) and the optional finalize.
struct UdfFunctions {
  std::string symbol;
  llvm::Function* metric = nullptr;
  llvm::Function* finalize = nullptr;
};

// Stage 2a: the symbols.  The named one (--symbol) must be defined and
// externally visible; without a name the module must define exactly one
// such function besides the finalize.  A missing name is reported in `errs`;
// no candidate, or several, is an error at once.
Expected<UdfFunctions> find_functions(llvm::Module& m, const UdfMetadata& meta, const std::string& display,
                                      std::vector<Diagnostic>& errs) {
  auto defined = defined_functions(m);
  auto listing = [&] {
    std::string l;
    for (auto& f : defined) l += (l.empty() ? "" : ", ") + (f.empty() ? std::string("(unnamed)") : f);
    return l.empty() ? std::string("none") : l;
  };
  auto lookup = [&](const std::string& what, const std::string& name) -> llvm::Function* {
    llvm::Function* f = m.getFunction(name);
    if (f && !f->isDeclaration() && f->hasExternalLinkage()) return f;
    Diagnostic d(DiagCode::SymbolNotFound, display, 0, 0, fmt::format("{} '{}' is not defined in this module", what, name));
    if (f && !f->isDeclaration()) {
      d = diag_at(DiagCode::SymbolNotFound, *f, display, fmt::format("{} '{}' is not externally visible (it has internal linkage)", what, name));
      d.notes.push_back("define it without 'internal'/'private' (MLIR: a public func.func)");
    }
    d.notes.push_back("externally visible functions defined in this module: " + listing());
    errs.push_back(std::move(d));
    return nullptr;
  };
  UdfFunctions u;
  if (meta.symbol) {
    u.symbol = *meta.symbol;
    u.metric = lookup("symbol", u.symbol);
  } else {
    std::vector<std::string> c;
    int unnamed = 0;  // numbered functions (@0, @2): no name to link the metric by
    for (auto& f : defined)
      if (f.empty()) ++unnamed;
      else if (!meta.finalize || f != *meta.finalize) c.push_back(f);
    if (c.empty() && unnamed > 0) {
      Error e(ErrorKind::Diagnosed, DiagCode::SymbolNotFound,
              fmt::format("{}: no named externally visible function to use as the {} ({} unnamed: a numbered "
                          "function such as @0 has no symbol to link it by)", display, role_name(meta), unnamed));
      e.note(meta.kind == UdfKind::Filter ? "give the filter a name: define i1 @my_filter(...)"
                                          : "give the metric a name: define float @my_metric(...)");
      return e;
    }
    if (c.size() != 1) {
      Error e(ErrorKind::Diagnosed, c.empty() ? DiagCode::SymbolNotFound : DiagCode::SymbolAmbiguous,
              c.empty() ? fmt::format("{}: no externally visible function to use as the {}", display, role_name(meta))
                        : fmt::format("{}: {} externally visible functions; pick the {} with --symbol", display, c.size(),
                                      role_name(meta)));
      e.note("externally visible functions defined in this module: " + listing());
      return e;
    }
    u.symbol = c.front();
    u.metric = m.getFunction(u.symbol);
  }
  if (meta.finalize) u.finalize = lookup("finalize function", *meta.finalize);
  return u;
}

// An ABI v2 function with the wrong signature (`fin`: the finalize).
Diagnostic wrong_v2_signature(llvm::Function& f, bool fin, const UdfMetadata& meta, const std::string& display) {
  const AccType acc = meta.acc_type();
  Diagnostic d = diag_at(DiagCode::AbiSignature, f, display,
                         fmt::format("{} '{}' has the wrong signature for {} ({} elements, {} accumulator)",
                                     fin ? "finalize function" : "symbol", f.getName().str(), abi_name(meta), to_string(meta.elem),
                                     to_string(acc)));
  std::string a = acc == AccType::F32 ? "float" : "i32";
  if (fin) {
    d.notes.push_back("expected: " + expected_v2_finalize_signature());
    d.notes.push_back(fmt::format("in IR: float (ptr, ptr); found: {}", type_str(f.getFunctionType())));
  } else {
    d.notes.push_back("expected: " + expected_v2_signature(*meta.shape, acc));
    d.notes.push_back(*meta.shape == MetricShape::State
                          ? fmt::format("in IR: void ({0}, {0}, ptr, ptr); found: {1}", a, type_str(f.getFunctionType()))
                          : fmt::format("in IR: float (ptr, ptr, i32, ptr); found: {}", type_str(f.getFunctionType())));
  }
  return d;
}

// An ABI v1 function with the wrong signature (`fin`: the finalize).
Diagnostic wrong_v1_signature(llvm::Function& f, bool fin, const UdfMetadata& meta, const std::string& display) {
  const AccType acc = meta.acc_type();
  Diagnostic d = diag_at(DiagCode::AbiSignature, f, display,
                         fmt::format("{} '{}' has the wrong signature for ABI v1 ({} elements, {} accumulator)",
                                     fin ? "finalize function" : "symbol", f.getName().str(), to_string(meta.elem),
                                     to_string(acc)));
  d.notes.push_back("expected: " + (fin ? expected_finalize_signature(acc) : expected_metric_signature(acc)));
  std::string a = acc == AccType::F32 ? "float" : "i32";
  d.notes.push_back(fin ? fmt::format("in IR: float ({}, ptr); found: {}", a, type_str(f.getFunctionType()))
                        : fmt::format("in IR: {0} ({0}, {0}, {0}, ptr); found: {1}", a, type_str(f.getFunctionType())));
  return d;
}

// Stage 2b: the signatures, by kind (filter, ABI v2 shape, ABI v1); each
// wrong one is reported in `errs`.
void check_signatures(const UdfFunctions& u, const UdfMetadata& meta, const std::string& display, std::vector<Diagnostic>& errs) {
  const AccType acc = meta.acc_type();
  if (u.metric && meta.kind == UdfKind::Filter) {
    auto* ft = u.metric->getFunctionType();
    bool ok = !ft->isVarArg() && ft->getNumParams() == 3 &&
              (ft->getReturnType()->isIntegerTy(1) || ft->getReturnType()->isIntegerTy(8)) &&
              ft->getParamType(0)->isIntegerTy(32) && ft->getParamType(1)->isIntegerTy(64) && ft->getParamType(2)->isPointerTy();
    if (!ok) {
      Diagnostic d = diag_at(DiagCode::AbiSignature, *u.metric, display,
                             fmt::format("filter '{}' has the wrong signature for ABI ivf_flat.filter.v1", u.metric->getName().str()));
      d.notes.push_back("expected: " + expected_filter_signature());
      d.notes.push_back(fmt::format("in IR: i1 (i32, i64, ptr), or i8 returning 0 or 1 as C's bool; found: {}", type_str(ft)));
      errs.push_back(std::move(d));
    }
  } else if (u.metric && meta.v2()) {
    auto* ft = u.metric->getFunctionType();
    bool ok = *meta.shape == MetricShape::State
                  ? !ft->isVarArg() && ft->getNumParams() == 4 && ft->getReturnType()->isVoidTy() && is_acc(ft->getParamType(0), acc) &&
                        is_acc(ft->getParamType(1), acc) && ft->getParamType(2)->isPointerTy() && ft->getParamType(3)->isPointerTy()
                  : !ft->isVarArg() && ft->getNumParams() == 4 && ft->getReturnType()->isFloatTy() && ft->getParamType(0)->isPointerTy() &&
                        ft->getParamType(1)->isPointerTy() && ft->getParamType(2)->isIntegerTy(32) && ft->getParamType(3)->isPointerTy();
    if (!ok) errs.push_back(wrong_v2_signature(*u.metric, false, meta, display));
  } else if (u.metric) {
    auto* ft = u.metric->getFunctionType();
    bool ok = !ft->isVarArg() && ft->getNumParams() == 4 && is_acc(ft->getReturnType(), acc) &&
              is_acc(ft->getParamType(0), acc) && is_acc(ft->getParamType(1), acc) && is_acc(ft->getParamType(2), acc) &&
              ft->getParamType(3)->isPointerTy();
    if (!ok) errs.push_back(wrong_v1_signature(*u.metric, false, meta, display));
  }
  if (u.finalize && meta.v2()) {
    auto* ft = u.finalize->getFunctionType();
    bool ok = !ft->isVarArg() && ft->getNumParams() == 2 && ft->getReturnType()->isFloatTy() && ft->getParamType(0)->isPointerTy() &&
              ft->getParamType(1)->isPointerTy();
    if (!ok) errs.push_back(wrong_v2_signature(*u.finalize, true, meta, display));
  } else if (u.finalize) {
    auto* ft = u.finalize->getFunctionType();
    bool ok = !ft->isVarArg() && ft->getNumParams() == 2 && ft->getReturnType()->isFloatTy() &&
              is_acc(ft->getParamType(0), acc) && ft->getParamType(1)->isPointerTy();
    if (!ok) errs.push_back(wrong_v1_signature(*u.finalize, true, meta, display));
  }
}

}  // namespace

Expected<std::string> check_module(llvm::Module& m, const IrSource& src, const UdfMetadata& meta_in,
                                   std::optional<MetricShape>* shape_out) {
  UdfMetadata meta = meta_in;  // an ABI v2 metric's shape is filled in below when inferred
  const std::string& display = src.display_name;
  UDF_TRY_VOID(retarget_to_nvptx(m, display));
  std::vector<Diagnostic> errs;
  UDF_TRY(u, find_functions(m, meta, display, errs));
  // ABI v2 without --shape: distance takes a pointer first, update ACC x (as the CUDA front end decides).
  if (meta.v2() && !meta.shape && u.metric) {
    auto* ft = u.metric->getFunctionType();
    meta.shape = ft->getNumParams() > 0 && ft->getParamType(0)->isPointerTy() ? MetricShape::Vector : MetricShape::State;
    if (auto v = validate_shape(meta); !v)
      return std::move(v.error()).note(fmt::format("the {} shape was inferred from '{}''s signature (first parameter {}){}", to_string(*meta.shape),
                                                   u.metric->getName().str(),
                                                   *meta.shape == MetricShape::Vector ? "a pointer" : "not a pointer",
                                                   *meta.shape == MetricShape::State ? "; a v1 metric compiles without --abi v2" : ""));
  }
  if (shape_out) *shape_out = meta.shape;
  check_signatures(u, meta, display, errs);
  // Stage 3: captures: every constant-offset read of ctx.
  if (errs.empty()) {
    const std::string_view text(reinterpret_cast<const char*>(src.bytes.data()), src.bytes.size());
    CtxChecker cc{meta, display, text, m.getDataLayout(), errs, {}};
    if (u.metric) cc.walk(u.metric->getArg(meta.kind == UdfKind::Filter ? 2 : 3), 0);
    if (u.finalize) cc.walk(u.finalize->getArg(1), 0);
    // The vector shape reads x and y only (const ACC *).
    if (u.metric && meta.v2() && *meta.shape == MetricShape::Vector)
      for (unsigned a = 0; a < 2; ++a) check_read_only(*u.metric->getArg(a), a == 0 ? "x" : "y", display, errs);
  }
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));
  return u.symbol;
}

// A filter returns C's bool, which NVVM passes as i8 (what NVRTC and nvcc
// emit for `bool f(...)`): the i1 function the user wrote becomes an internal
// body behind an exported i8 wrapper of the same name, so the scan's call
// matches it and LTO inlines it (with an i1 definition the link bitcasts the
// call, which then stays a call).
void export_filter_as_c_bool(llvm::Module& m, const std::string& symbol) {
  llvm::Function* f = m.getFunction(symbol);
  if (!f || !f->getReturnType()->isIntegerTy(1)) return;
  auto& ctx = m.getContext();
  f->setName(symbol + ".udf_body");
  f->setLinkage(llvm::GlobalValue::InternalLinkage);
  auto* i8 = llvm::Type::getInt8Ty(ctx);
  auto* wrapper = llvm::Function::Create(llvm::FunctionType::get(i8, f->getFunctionType()->params(), false),
                                         llvm::GlobalValue::ExternalLinkage, symbol, m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", wrapper));
  std::vector<llvm::Value*> args;
  for (auto& a : wrapper->args()) args.push_back(&a);
  b.CreateRet(b.CreateZExt(b.CreateCall(f, args), i8));
}

Expected<CompileOutput> compile_module(llvm::Module& m, const IrSource& src, SourceKind kind, const UdfMetadata& meta_in) {
  const std::string& display = src.display_name;
  UdfMetadata meta = meta_in;
  UDF_TRY(symbol, check_module(m, src, meta_in, &meta.shape));
  if (meta.kind == UdfKind::Filter) export_filter_as_c_bool(m, symbol);

  // 4. Lower: math to libdevice, cleanup, constant expressions to instructions.
  map_intrinsics(m);
  run_passes(m, /*full=*/true);
  map_intrinsics(m);  // instcombine may have made new ones (fabs from compare+select)
  {
    std::vector<llvm::Constant*> consts;
    for (auto& f : m)
      for (auto& bb : f)
        for (auto& i : bb)
          for (auto& op : i.operands())
            if (auto* ce = llvm::dyn_cast<llvm::ConstantExpr>(op.get())) consts.push_back(ce);
    if (!consts.empty()) llvm::convertUsersOfConstantsToInstructions(consts);
  }
  {
    std::string v;
    llvm::raw_string_ostream os(v);
    if (llvm::verifyModule(m, &os)) return internal_error(fmt::format("{}: the lowered module does not verify: {}", display, v));
  }
  // The state words a v2 state metric uses, from the optimised IR (helpers
  // inlined, offsets folded).
  std::uint32_t state_words = 0;
  if (meta.v2() && meta.shape == MetricShape::State) {
    const llvm::Function* upd = m.getFunction(symbol);
    const llvm::Function* fin = meta.finalize ? m.getFunction(*meta.finalize) : nullptr;
    const auto& dl = m.getDataLayout();
    state_words = state_words_used(upd && upd->arg_size() > 2 ? accessed_bytes(upd->getArg(2), 0, dl) : std::nullopt,
                                   fin && fin->arg_size() > 0 ? accessed_bytes(fin->getArg(0), 0, dl) : std::nullopt,
                                   meta.initial_state.size());
  }

  // 5. libNVVM per arch.
  CompileOutput out;
  std::optional<std::string> llvm7, modern;
  for (Arch a : meta.archs)
    if (a < 100 && !llvm7) {
      UDF_TRY(text, write_llvm7(m, display));
      llvm7 = std::move(text);
    }
  for (Arch a : meta.archs) {
    if (a >= 100 && !modern) modern = modern_text(m);
    UDF_TRY(ir, nvvm_compile(a < 100 ? *llvm7 : *modern, a, display, out.raw_log));
    out.artifact.ltoir[a] = std::move(ir);
  }
  ArtifactManifest& man = out.artifact.manifest;
  man.source_kind = kind;
  man.source_name = file_name(display);
  man.source_sha256 = sha256_hex(src.bytes);
  fill_manifest_metadata(man, meta, symbol);
  man.state_words = state_words;
  man.compiler = nvvm_version_string() + " + llvm " LLVM_VERSION_STRING;
  man.compiler_options = {"-gen-lto"};
  man.cache_key = ir_cache_key(kind, src, meta);
  return out;
}

}  // namespace ir

namespace {

bool is_bitcode(const Bytes& b) {
  if (b.size() >= 4 && b[0] == 'B' && b[1] == 'C' && b[2] == 0xC0 && b[3] == 0xDE) return true;
  return b.size() >= 4 && b[0] == 0xDE && b[1] == 0xC0 && b[2] == 0x17 && b[3] == 0x0B;  // wrapper
}

// Gives every instruction of a .ll file its position as a debug location, so
// that checks and the LLVM 7 writer report `file.ll:LINE:COL` like the rest.
void attach_text_locations(llvm::Module& m, const llvm::AsmParserContext& pc, const std::string& display) {
  llvm::DIBuilder dib(m);
  auto* file = dib.createFile(display, ".");
  auto* cu = dib.createCompileUnit(llvm::dwarf::DW_LANG_C, file, "udfc", true, "", 0, "", llvm::DICompileUnit::NoDebug);
  (void)cu;
  auto& ctx = m.getContext();
  for (auto& f : m) {
    if (f.isDeclaration() || f.getSubprogram()) continue;
    auto floc = pc.getFunctionLocation(&f);
    unsigned line = floc ? floc->Start.Line + 1 : 0;
    auto* sp = dib.createFunction(file, f.getName(), f.getName(), file, line, dib.createSubroutineType(dib.getOrCreateTypeArray({})),
                                  line, llvm::DINode::FlagZero, llvm::DISubprogram::SPFlagDefinition);
    f.setSubprogram(sp);
    if (floc)
      f.setMetadata("udf.column", llvm::MDNode::get(ctx, {llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(
                                                            llvm::Type::getInt32Ty(ctx), floc->Start.Col + 1))}));
    for (auto& bb : f)
      for (auto& i : bb) {
        if (i.getDebugLoc()) continue;
        if (auto loc = pc.getInstructionLocation(&i))
          i.setDebugLoc(llvm::DILocation::get(ctx, loc->Start.Line + 1, loc->Start.Col + 1, sp));
        else
          i.setDebugLoc(llvm::DILocation::get(ctx, 0, 0, sp));
      }
  }
  dib.finalize();
  if (!m.getModuleFlag("Debug Info Version"))
    m.addModuleFlag(llvm::Module::Warning, "Debug Info Version", llvm::DEBUG_METADATA_VERSION);
}

// Parses .ll text or bitcode into `ctx` and verifies it.
Expected<std::unique_ptr<llvm::Module>> parse_llvm_ir(const IrSource& src, llvm::LLVMContext& ctx) {
  const std::string& display = src.display_name;
  if (src.bytes.empty()) return diagnosed(DiagCode::BadSource, display + ": empty input: no LLVM IR to compile");
  std::unique_ptr<llvm::Module> m;
  // A copy: the text parser needs a NUL after the last byte.
  auto owned = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(reinterpret_cast<const char*>(src.bytes.data()), src.bytes.size()), display);
  llvm::MemoryBufferRef buf = owned->getMemBufferRef();
  if (is_bitcode(src.bytes)) {
    auto parsed = llvm::parseBitcodeFile(buf, ctx);
    if (!parsed) {
      std::string msg = llvm::toString(parsed.takeError());
      return diagnosed(DiagCode::IrParse, fmt::format("{}: invalid LLVM bitcode: {}", display, msg));
    }
    m = std::move(*parsed);
  } else {
    if (std::find(src.bytes.begin(), src.bytes.end(), 0) != src.bytes.end())
      return diagnosed(DiagCode::BadSource, display + ": neither LLVM bitcode (no 'BC' magic) nor LLVM IR text (it contains NUL bytes)");
    llvm::SMDiagnostic err;
    llvm::AsmParserContext pc;
    m = llvm::parseAssembly(buf, err, ctx, nullptr, [](llvm::StringRef, llvm::StringRef) { return std::nullopt; }, &pc);
    if (!m)
      return Error(ErrorKind::Diagnosed,
                   Diagnostic(DiagCode::IrParse, display, err.getLineNo(), err.getColumnNo() >= 0 ? err.getColumnNo() + 1 : 0,
                              err.getMessage().str()));
    attach_text_locations(*m, pc, display);
  }
  {
    std::string v;
    llvm::raw_string_ostream os(v);
    bool broken_di = false;
    if (llvm::verifyModule(*m, &os, &broken_di)) {
      while (!v.empty() && v.back() == '\n') v.pop_back();
      return diagnosed(DiagCode::IrParse, fmt::format("{}: invalid LLVM IR: {}", display, v.substr(0, v.find('\n'))));
    }
    if (broken_di) llvm::StripDebugInfo(*m);
  }
  return m;
}

}  // namespace

Expected<CompileOutput> ir::compile_llvm_ir_impl(const IrSource& src, const UdfMetadata& meta) {
  UDF_TRY_VOID(validate(meta));
  llvm::LLVMContext ctx;
  UDF_TRY(m, parse_llvm_ir(src, ctx));
  return ir::compile_module(*m, src, SourceKind::LlvmIr, meta);
}

Expected<std::string> ir::check_llvm_ir_impl(const IrSource& src, const UdfMetadata& meta) {
  UDF_TRY_VOID(validate(meta));
  llvm::LLVMContext ctx;
  UDF_TRY(m, parse_llvm_ir(src, ctx));
  return ir::check_module(*m, src, meta);
}

}  // namespace udf

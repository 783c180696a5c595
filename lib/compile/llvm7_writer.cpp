// The LLVM 7.0.1 textual IR writer for libNVVM's compute_75..90 reader.
//
// LLVM 22 has only opaque pointers; LLVM 7 has only typed ones.  Rather than
// infer a pointee type for every value, every pointer value is written as
// `i8 addrspace(N)*` ("canonical"), and each instruction that needs a typed
// pointer (load, store, getelementptr, alloca) gets a bitcast next to it.
// libNVVM's optimizer removes the casts.  Globals and functions used as
// values are cast to the canonical type by constant expressions.
//
// Written for what UDFs contain after udfc's cleanup passes; everything else
// is an error naming the construct and its location, never a guess.
#include <set>

#include <fmt/format.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Operator.h>

#include "ir_internal.h"

namespace udf::ir {

namespace {

// Intrinsics that exist with the same name and signature in LLVM 7 and that
// libNVVM's verifier accepts (not llvm.fabs: it becomes __nv_fabsf).
bool llvm7_intrinsic(llvm::StringRef name) {
  static const char* const kKnown[] = {"sqrt", "fma", "fmuladd", "maxnum", "minnum", "copysign", "floor",
                                       "ceil", "trunc", "rint", "nearbyint", "round", "ctlz", "cttz", "ctpop",
                                       "bswap", "bitreverse"};
  if (name.starts_with("llvm.nvvm.")) return true;
  for (const char* k : kKnown) {
    std::string prefix = std::string("llvm.") + k + ".";
    if (name.starts_with(prefix)) return true;
  }
  return false;
}

std::string ident(llvm::StringRef name) {
  bool plain = !name.empty() && !llvm::isDigit(name[0]);
  for (char c : name)
    if (!(llvm::isAlnum(c) || c == '-' || c == '$' || c == '.' || c == '_')) plain = false;
  if (plain) return name.str();
  std::string s = "\"";
  for (unsigned char c : name) {
    if (c == '"' || c == '\\' || c < 0x20 || c > 0x7e) s += fmt::format("\\{:02X}", c);
    else s += static_cast<char>(c);
  }
  return s + "\"";
}

class Writer {
 public:
  Writer(const llvm::Module& m, const std::string& display) : m_(m), display_(display) {}

  Expected<std::string> run() {
    std::string body;
    for (const auto& g : m_.globals()) body += global(g);
    for (const auto& f : m_.functions()) body += function(f);
    if (!errs_.empty()) return Error(ErrorKind::Diagnosed, std::move(errs_));
    std::string out = "; udfc: LLVM 7.0.1 IR for libNVVM\n";
    out += "target datalayout = \"e-i64:64-i128:128-v16:16-v32:32-n16:32:64\"\n";
    out += "target triple = \"nvptx64-nvidia-cuda\"\n\n";
    // Named struct types, including those only reachable from other definitions.
    std::set<const llvm::StructType*> done;
    std::string defs;
    while (done.size() < structs_.size()) {
      std::vector<const llvm::StructType*> todo;
      for (auto* s : structs_)
        if (!done.count(s)) todo.push_back(s);
      for (auto* s : todo) {
        done.insert(s);
        defs += "%" + ident(s->getName()) + " = type " + (s->isOpaque() ? std::string("opaque") : struct_body(s)) + "\n";
      }
    }
    if (!errs_.empty()) return Error(ErrorKind::Diagnosed, std::move(errs_));
    out += defs + (defs.empty() ? "" : "\n") + body;
    out += "!nvvmir.version = !{!0}\n!0 = !{i32 2, i32 0}\n";
    return out;
  }

 private:
  const llvm::Module& m_;
  std::string display_;
  std::vector<Diagnostic> errs_;
  std::set<const llvm::StructType*> structs_;
  llvm::DenseMap<const llvm::Value*, std::string> names_;
  const llvm::Instruction* cur_ = nullptr;  // for locations
  const llvm::Function* cur_fn_ = nullptr;
  std::string lines_;  // the current block's output
  unsigned tmp_ = 0;

  void fail(const std::string& what) {
    std::string msg = fmt::format("cannot express {} for libNVVM's LLVM 7 reader (sm_75..sm_90)", what);
    Diagnostic d = cur_      ? diag_at(DiagCode::IrUnsupported, *cur_, display_, msg)
                   : cur_fn_ ? diag_at(DiagCode::IrUnsupported, *cur_fn_, display_, msg)
                             : Diagnostic(DiagCode::IrUnsupported, display_, 0, 0, msg);
    for (const auto& e : errs_)
      if (e.message == d.message && e.line == d.line && e.column == d.column) return;
    d.notes.push_back("compile for sm_100 or newer, or rewrite it without this construct");
    errs_.push_back(std::move(d));
  }

  // ---- types
  std::string ty(llvm::Type* t) {
    switch (t->getTypeID()) {
      case llvm::Type::VoidTyID: return "void";
      case llvm::Type::HalfTyID: return "half";
      case llvm::Type::FloatTyID: return "float";
      case llvm::Type::DoubleTyID: return "double";
      case llvm::Type::IntegerTyID: return "i" + std::to_string(t->getIntegerBitWidth());
      case llvm::Type::LabelTyID: return "label";
      case llvm::Type::PointerTyID: return ptr_to("i8", t->getPointerAddressSpace());
      case llvm::Type::ArrayTyID:
        return fmt::format("[{} x {}]", t->getArrayNumElements(), ty(t->getArrayElementType()));
      case llvm::Type::FixedVectorTyID: {
        auto* v = llvm::cast<llvm::FixedVectorType>(t);
        return fmt::format("<{} x {}>", v->getNumElements(), ty(v->getElementType()));
      }
      case llvm::Type::StructTyID: {
        auto* s = llvm::cast<llvm::StructType>(t);
        if (s->hasName()) {
          structs_.insert(s);
          return "%" + ident(s->getName());
        }
        return struct_body(s);
      }
      case llvm::Type::FunctionTyID: {
        auto* f = llvm::cast<llvm::FunctionType>(t);
        std::string s = ty(f->getReturnType()) + " (";
        for (unsigned i = 0; i < f->getNumParams(); ++i) s += (i ? ", " : "") + ty(f->getParamType(i));
        if (f->isVarArg()) s += f->getNumParams() ? ", ..." : "...";
        return s + ")";
      }
      default: {
        std::string name;
        llvm::raw_string_ostream os(name);
        t->print(os);
        fail(fmt::format("type '{}'", name));
        return "void";
      }
    }
  }
  std::string struct_body(const llvm::StructType* s) {
    std::string b = s->isPacked() ? "<{ " : "{ ";
    for (unsigned i = 0; i < s->getNumElements(); ++i) b += (i ? ", " : "") + ty(s->getElementType(i));
    if (s->getNumElements() == 0) b.pop_back();
    return b + (s->isPacked() ? " }>" : " }");
  }
  static std::string ptr_to(const std::string& pointee, unsigned as) {
    return as ? fmt::format("{} addrspace({})*", pointee, as) : pointee + "*";
  }

  // ---- values
  std::string fp(const llvm::ConstantFP* c) {
    llvm::APFloat v = c->getValueAPF();
    if (c->getType()->isHalfTy())
      return fmt::format("0xH{:04X}", static_cast<unsigned>(v.bitcastToAPInt().getZExtValue()));
    bool lost = false;
    v.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
    return fmt::format("0x{:016X}", v.bitcastToAPInt().getZExtValue());
  }

  std::string val(const llvm::Value* v) {
    if (auto it = names_.find(v); it != names_.end()) return it->second;
    if (auto* ci = llvm::dyn_cast<llvm::ConstantInt>(v)) {
      if (ci->getBitWidth() == 1) return ci->isOne() ? "true" : "false";
      llvm::SmallString<24> s;
      ci->getValue().toStringSigned(s);
      return std::string(s);
    }
    if (auto* cf = llvm::dyn_cast<llvm::ConstantFP>(v)) return fp(cf);
    if (llvm::isa<llvm::ConstantPointerNull>(v)) return "null";
    if (llvm::isa<llvm::UndefValue>(v)) return "undef";  // poison included: LLVM 7 has none
    if (llvm::isa<llvm::ConstantAggregateZero>(v)) return "zeroinitializer";
    if (auto* cds = llvm::dyn_cast<llvm::ConstantDataSequential>(v)) {
      if (cds->isString()) {
        std::string s = "c\"";
        for (unsigned char c : cds->getAsString()) {
          if (c == '"' || c == '\\' || c < 0x20 || c > 0x7e) s += fmt::format("\\{:02X}", c);
          else s += static_cast<char>(c);
        }
        return s + "\"";
      }
      bool vec = v->getType()->isVectorTy();
      std::string s = vec ? "<" : "[";
      for (unsigned i = 0; i < cds->getNumElements(); ++i) s += (i ? ", " : "") + typed(cds->getElementAsConstant(i));
      return s + (vec ? ">" : "]");
    }
    if (auto* ca = llvm::dyn_cast<llvm::ConstantAggregate>(v)) {
      bool vec = v->getType()->isVectorTy();
      bool st = v->getType()->isStructTy();
      bool packed = st && llvm::cast<llvm::StructType>(v->getType())->isPacked();
      std::string s = vec ? "<" : st ? (packed ? "<{ " : "{ ") : "[";
      for (unsigned i = 0; i < ca->getNumOperands(); ++i) s += (i ? ", " : "") + typed(ca->getOperand(i));
      return s + (vec ? ">" : st ? (packed ? " }>" : " }") : "]");
    }
    if (auto* gv = llvm::dyn_cast<llvm::GlobalValue>(v)) {
      // Typed in LLVM 7 by its value type; cast to the canonical i8*.
      unsigned as = gv->getAddressSpace();
      return fmt::format("bitcast ({} @{} to {})", ptr_to(ty(gv->getValueType()), as), ident(gv->getName()),
                         ptr_to("i8", as));
    }
    if (auto* ce = llvm::dyn_cast<llvm::ConstantExpr>(v)) {
      fail(fmt::format("the constant expression '{}'", ce->getOpcodeName()));
      return "undef";
    }
    fail("this constant");
    return "undef";
  }
  std::string typed(const llvm::Value* v) { return ty(v->getType()) + " " + val(v); }

  std::string fresh(const char* prefix) { return fmt::format("%{}{}", prefix, tmp_++); }

  // A canonical pointer operand cast to `pointee addrspace(N)*`.
  std::string cast_ptr(const llvm::Value* p, const std::string& pointee) {
    unsigned as = p->getType()->getPointerAddressSpace();
    if (pointee == "i8") return val(p);
    std::string c = fresh("c");
    lines_ += fmt::format("  {} = bitcast {} {} to {}\n", c, ptr_to("i8", as), val(p), ptr_to(pointee, as));
    return c;
  }

  static std::string fmf(const llvm::Instruction& i) {
    if (!llvm::isa<llvm::FPMathOperator>(i)) return "";
    llvm::FastMathFlags f = i.getFastMathFlags();
    if (f.isFast()) return "fast ";
    std::string s;
    if (f.allowReassoc()) s += "reassoc ";
    if (f.noNaNs()) s += "nnan ";
    if (f.noInfs()) s += "ninf ";
    if (f.noSignedZeros()) s += "nsz ";
    if (f.allowReciprocal()) s += "arcp ";
    if (f.allowContract()) s += "contract ";
    if (f.approxFunc()) s += "afn ";
    return s;
  }

  std::string global(const llvm::GlobalVariable& g) {
    cur_ = nullptr;
    cur_fn_ = nullptr;
    if (!g.hasName()) {
      fail("an unnamed global variable");
      return "";
    }
    if (g.isThreadLocal()) fail(fmt::format("the thread-local variable '@{}'", g.getName().str()));
    std::string s = "@" + ident(g.getName()) + " = " + linkage(g);
    if (g.getAddressSpace()) s += fmt::format("addrspace({}) ", g.getAddressSpace());
    s += g.isConstant() ? "constant " : "global ";
    s += ty(g.getValueType());
    if (g.hasInitializer()) s += " " + val(g.getInitializer());
    if (g.getAlign()) s += fmt::format(", align {}", g.getAlign()->value());
    return s + "\n";
  }

  std::string linkage(const llvm::GlobalValue& g) {
    using L = llvm::GlobalValue::LinkageTypes;
    switch (g.getLinkage()) {
      case L::ExternalLinkage: return g.isDeclaration() ? "external " : "";
      case L::AvailableExternallyLinkage: return "available_externally ";
      case L::LinkOnceAnyLinkage: return "linkonce ";
      case L::LinkOnceODRLinkage: return "linkonce_odr ";
      case L::WeakAnyLinkage: return "weak ";
      case L::WeakODRLinkage: return "weak_odr ";
      case L::AppendingLinkage: return "appending ";
      case L::InternalLinkage: return "internal ";
      case L::PrivateLinkage: return "private ";
      case L::ExternalWeakLinkage: return "extern_weak ";
      case L::CommonLinkage: return "common ";
    }
    return "";
  }

  std::string function(const llvm::Function& f) {
    cur_fn_ = &f;
    cur_ = nullptr;
    names_.clear();
    tmp_ = 0;
    if (f.isIntrinsic() && !llvm7_intrinsic(f.getName()) && !f.use_empty()) {
      // Report at each call: the user wants to know where.
      for (const auto* u : f.users())
        if (auto* i = llvm::dyn_cast<llvm::Instruction>(u)) {
          cur_ = i;
          fail(fmt::format("the intrinsic '{}'", f.getName().str()));
        }
      cur_ = nullptr;
      return "";
    }
    if (f.isIntrinsic() && f.use_empty()) return "";
    auto* ft = f.getFunctionType();
    if (ft->isVarArg()) fail(fmt::format("the variadic function '@{}'", f.getName().str()));
    std::string head = ty(ft->getReturnType()) + " @" + ident(f.getName()) + "(";
    unsigned n = 0;
    for (const auto& a : f.args()) {
      std::string name = fmt::format("%a{}", n);
      names_[&a] = name;
      head += (n ? ", " : "") + ty(a.getType()) + (f.isDeclaration() ? "" : " " + name);
      ++n;
    }
    head += ")";
    if (f.isDeclaration()) return "declare " + head + "\n\n";
    unsigned b = 0;
    for (const auto& bb : f) names_[&bb] = fmt::format("%bb{}", b++);
    unsigned v = 0;
    for (const auto& bb : f)
      for (const auto& i : bb) {
        if (llvm::isa<llvm::FreezeInst>(&i)) continue;  // resolved below
        if (!i.getType()->isVoidTy()) names_[&i] = fmt::format("%v{}", v++);
      }
    // freeze x -> x (LLVM 7 has no freeze; its reader treats undef as before).
    for (const auto& bb : f)
      for (const auto& i : bb)
        if (auto* fr = llvm::dyn_cast<llvm::FreezeInst>(&i)) {
          const llvm::Value* src = fr->getOperand(0);
          while (auto* inner = llvm::dyn_cast<llvm::FreezeInst>(src)) src = inner->getOperand(0);
          if (!llvm::isa<llvm::Instruction>(src) || names_.count(src)) names_[&i] = val(src);
        }
    std::string s = "define " + linkage(f) + head + " {\n";
    for (const auto& bb : f) {
      s += names_[&bb].substr(1) + ":\n";
      lines_.clear();
      for (const auto& i : bb) {
        cur_ = &i;
        inst(i);
      }
      s += lines_;
    }
    cur_ = nullptr;
    return s + "}\n\n";
  }

  void emit(const llvm::Instruction& i, const std::string& text) {
    if (i.getType()->isVoidTy()) lines_ += "  " + text + "\n";
    else lines_ += "  " + names_[&i] + " = " + text + "\n";
  }

  void inst(const llvm::Instruction& i) {
    using namespace llvm;
    if (isa<FreezeInst>(i)) return;
    if (auto* bo = dyn_cast<BinaryOperator>(&i)) {
      std::string flags;
      if (isa<OverflowingBinaryOperator>(bo)) {
        if (bo->hasNoUnsignedWrap()) flags += "nuw ";
        if (bo->hasNoSignedWrap()) flags += "nsw ";
      }
      if (isa<PossiblyExactOperator>(bo) && bo->isExact()) flags += "exact ";
      emit(i, fmt::format("{} {}{}{} {}, {}", bo->getOpcodeName(), flags, fmf(i), ty(i.getType()),
                          val(bo->getOperand(0)), val(bo->getOperand(1))));
      return;
    }
    if (auto* un = dyn_cast<UnaryOperator>(&i)) {  // fneg x -> fsub -0.0, x
      Type* t = i.getType();
      std::string negzero = "0x8000000000000000";
      if (t->getScalarType()->isHalfTy()) negzero = "0xH8000";
      std::string z = negzero;
      if (auto* vt = dyn_cast<FixedVectorType>(t)) {
        z = "<";
        for (unsigned k = 0; k < vt->getNumElements(); ++k) z += (k ? ", " : "") + ty(vt->getElementType()) + " " + negzero;
        z += ">";
      }
      emit(i, fmt::format("fsub {}{} {}, {}", fmf(i), ty(t), z, val(un->getOperand(0))));
      return;
    }
    if (auto* cmp = dyn_cast<CmpInst>(&i)) {
      emit(i, fmt::format("{} {}{} {} {}, {}", cmp->getOpcodeName(), fmf(i), CmpInst::getPredicateName(cmp->getPredicate()).str(),
                          ty(cmp->getOperand(0)->getType()), val(cmp->getOperand(0)), val(cmp->getOperand(1))));
      return;
    }
    if (auto* c = dyn_cast<CastInst>(&i)) {
      Type* from = c->getSrcTy();
      Type* to = c->getDestTy();
      if (c->getOpcode() == Instruction::BitCast && from->isPointerTy() && to->isPointerTy()) {
        names_[&i] = val(c->getOperand(0));  // both canonical i8*: nothing to write
        return;
      }
      emit(i, fmt::format("{} {} to {}", c->getOpcodeName(), typed(c->getOperand(0)), ty(to)));
      return;
    }
    if (auto* sel = dyn_cast<SelectInst>(&i)) {
      emit(i, fmt::format("select {}, {}, {}", typed(sel->getCondition()), typed(sel->getTrueValue()),
                          typed(sel->getFalseValue())));
      return;
    }
    if (auto* phi = dyn_cast<PHINode>(&i)) {
      std::string s = "phi " + ty(i.getType()) + " ";
      for (unsigned k = 0; k < phi->getNumIncomingValues(); ++k)
        s += fmt::format("{}[ {}, {} ]", k ? ", " : "", val(phi->getIncomingValue(k)), names_[phi->getIncomingBlock(k)]);
      emit(i, s);
      return;
    }
    if (auto* ld = dyn_cast<LoadInst>(&i)) {
      if (ld->isAtomic()) return fail("an atomic 'load'");
      std::string t = ty(ld->getType());
      std::string p = cast_ptr(ld->getPointerOperand(), t);
      emit(i, fmt::format("load {}{}, {} {}, align {}", ld->isVolatile() ? "volatile " : "", t,
                          ptr_to(t, ld->getPointerAddressSpace()), p, ld->getAlign().value()));
      return;
    }
    if (auto* st = dyn_cast<StoreInst>(&i)) {
      if (st->isAtomic()) return fail("an atomic 'store'");
      std::string t = ty(st->getValueOperand()->getType());
      std::string p = cast_ptr(st->getPointerOperand(), t);
      emit(i, fmt::format("store {}{}, {} {}, align {}", st->isVolatile() ? "volatile " : "", typed(st->getValueOperand()),
                          ptr_to(t, st->getPointerAddressSpace()), p, st->getAlign().value()));
      return;
    }
    if (auto* gep = dyn_cast<GetElementPtrInst>(&i)) {
      if (!gep->getType()->isPointerTy()) return fail("a vector 'getelementptr'");
      unsigned as = gep->getAddressSpace();
      std::string src = ty(gep->getSourceElementType());
      std::string p = cast_ptr(gep->getPointerOperand(), src);
      std::string s = fmt::format("getelementptr {}{}, {} {}", gep->isInBounds() ? "inbounds " : "", src, ptr_to(src, as), p);
      for (auto it = gep->idx_begin(); it != gep->idx_end(); ++it) s += ", " + typed(it->get());
      std::string res = ty(gep->getResultElementType());
      std::string g = fresh("g");
      lines_ += "  " + g + " = " + s + "\n";
      emit(i, fmt::format("bitcast {} {} to {}", ptr_to(res, as), g, ptr_to("i8", as)));
      return;
    }
    if (auto* al = dyn_cast<AllocaInst>(&i)) {
      std::string t = ty(al->getAllocatedType());
      std::string a = fresh("m");
      std::string count = al->isArrayAllocation() ? ", " + typed(al->getArraySize()) : "";
      if (al->getAddressSpace() != 0) return fail("an 'alloca' outside address space 0");
      lines_ += fmt::format("  {} = alloca {}{}, align {}\n", a, t, count, al->getAlign().value());
      emit(i, fmt::format("bitcast {} {} to i8*", ptr_to(t, 0), a));
      return;
    }
    if (auto* call = dyn_cast<CallInst>(&i)) {
      const Function* callee = call->getCalledFunction();
      if (!callee) return fail(call->isInlineAsm() ? "inline assembly" : "an indirect call");
      if (callee->isIntrinsic() && !llvm7_intrinsic(callee->getName()))
        return fail(fmt::format("the intrinsic '{}'", callee->getName().str()));
      if (call->getFunctionType() != callee->getFunctionType()) return fail("a call with a mismatched function type");
      std::string s = fmt::format("{}call {} @{}(", call->isTailCall() ? "tail " : "", ty(call->getType()), ident(callee->getName()));
      for (unsigned k = 0; k < call->arg_size(); ++k) s += (k ? ", " : "") + typed(call->getArgOperand(k));
      emit(i, s + ")");
      return;
    }
    if (auto* ret = dyn_cast<ReturnInst>(&i)) {
      emit(i, ret->getReturnValue() ? "ret " + typed(ret->getReturnValue()) : "ret void");
      return;
    }
    if (auto* br = dyn_cast<BranchInst>(&i)) {
      if (br->isUnconditional()) emit(i, "br label " + names_[br->getSuccessor(0)]);
      else
        emit(i, fmt::format("br {}, label {}, label {}", typed(br->getCondition()), names_[br->getSuccessor(0)],
                            names_[br->getSuccessor(1)]));
      return;
    }
    if (auto* sw = dyn_cast<SwitchInst>(&i)) {
      std::string s = fmt::format("switch {}, label {} [", typed(sw->getCondition()), names_[sw->getDefaultDest()]);
      for (auto& c : sw->cases()) s += fmt::format(" {}, label {}", typed(c.getCaseValue()), names_[c.getCaseSuccessor()]);
      emit(i, s + " ]");
      return;
    }
    if (isa<UnreachableInst>(i)) return emit(i, "unreachable");
    if (auto* ev = dyn_cast<ExtractValueInst>(&i)) {
      std::string s = "extractvalue " + typed(ev->getAggregateOperand());
      for (unsigned k : ev->indices()) s += ", " + std::to_string(k);
      return emit(i, s);
    }
    if (auto* iv = dyn_cast<InsertValueInst>(&i)) {
      std::string s = fmt::format("insertvalue {}, {}", typed(iv->getAggregateOperand()), typed(iv->getInsertedValueOperand()));
      for (unsigned k : iv->indices()) s += ", " + std::to_string(k);
      return emit(i, s);
    }
    if (auto* ee = dyn_cast<ExtractElementInst>(&i))
      return emit(i, fmt::format("extractelement {}, {}", typed(ee->getVectorOperand()), typed(ee->getIndexOperand())));
    if (auto* ie = dyn_cast<InsertElementInst>(&i))
      return emit(i, fmt::format("insertelement {}, {}, {}", typed(ie->getOperand(0)), typed(ie->getOperand(1)),
                                 typed(ie->getOperand(2))));
    if (auto* sv = dyn_cast<ShuffleVectorInst>(&i)) {
      std::string mask = "<";
      auto m = sv->getShuffleMask();
      for (size_t k = 0; k < m.size(); ++k) mask += (k ? ", " : "") + (m[k] < 0 ? std::string("i32 undef") : fmt::format("i32 {}", m[k]));
      mask += ">";
      return emit(i, fmt::format("shufflevector {}, {}, <{} x i32> {}", typed(sv->getOperand(0)), typed(sv->getOperand(1)),
                                 m.size(), mask));
    }
    fail(fmt::format("'{}'", i.getOpcodeName()));
  }
};

}  // namespace

Expected<std::string> write_llvm7(const llvm::Module& m, const std::string& display_name) {
  return Writer(m, display_name).run();
}

}  // namespace udf::ir

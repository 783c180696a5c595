// The LTO-IR front end: LTO-IR made elsewhere (NVRTC, nvcc -dlto,
// numba-cuda's output="ltoir"), checked and packaged.  No LLVM here.
//
// What is checked: the NVVM LTO-IR magic (ed 43 4e 7f), the arch in its
// header (not newer than any requested arch: nvJitLink refuses to link
// LTO-IR newer than its -arch), and that the payload defines the symbol with
// a body a call of the ABI's type resolves to: udfc links it with a probe
// kernel calling the symbol (NVRTC, -dlto), with nvJitLink -lto -ptx, and
// an `.extern .func SYMBOL` left in the PTX means it is not defined.
// What is not: the callee's parameter types.  LTO-IR is NVVM bitcode, and
// the link does not compare a call's type with the definition's.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "udf/compile/ir.h"
#include "udf/cudalibs/nvjitlink.h"
#include "udf/cudalibs/nvrtc.h"
#include "udf/support/hash.h"
#include "udf/support/version.h"

namespace udf {

// The header: 4 bytes of magic, then fields; the target arch times ten is a
// little-endian u16 at offset 26 (750 for sm_75 ... 1200 for sm_120), as
// found by diffing NVRTC's and libNVVM's output for each arch.
Arch ltoir_arch(const Bytes& b) {
  if (b.size() < 64 || b[0] != 0xed || b[1] != 0x43 || b[2] != 0x4e || b[3] != 0x7f) return 0;
  unsigned v = b[26] | (b[27] << 8);
  if (v % 10 != 0) return 0;
  return static_cast<Arch>(v / 10);
}

namespace {

// A kernel that calls SYMBOL (and FINALIZE) with the ABI's types, as LTO-IR.
Expected<Bytes> probe_ltoir(const UdfMetadata& meta, const std::string& symbol, Arch a) {
  std::string src;
  if (meta.kind == UdfKind::Filter) {
    src = fmt::format("extern \"C\" __device__ bool {}(unsigned int, long long, const void *);\n", symbol);
    src += fmt::format("extern \"C\" __global__ void udfc_probe(const long long *id, const void *ctx, bool *out) {{\n"
                       "  out[0] = {}((unsigned int)id[1], id[0], ctx);\n}}\n", symbol);
  } else if (meta.v2()) {
    std::string acc = meta.acc_type() == AccType::F32 ? "float" : "int";
    if (*meta.shape == MetricShape::State) {
      src = fmt::format("extern \"C\" __device__ void {1}({0}, {0}, void *, const void *);\n", acc, symbol);
      src += fmt::format("extern \"C\" __device__ float {}(const void *, const void *);\n", *meta.finalize);
      src += fmt::format("extern \"C\" __global__ void udfc_probe(const {0} *x, const void *ctx, unsigned *s, float *out) {{\n"
                         "  {1}(x[0], x[1], s, ctx);\n  out[0] = {2}(s, ctx);\n}}\n", acc, symbol, *meta.finalize);
    } else {
      src = fmt::format("extern \"C\" __device__ float {1}(const {0} *, const {0} *, unsigned, const void *);\n", acc, symbol);
      src += fmt::format("extern \"C\" __global__ void udfc_probe(const {0} *x, const void *ctx, unsigned n, float *out) {{\n"
                         "  out[0] = {1}(x, x + n, n, ctx);\n}}\n", acc, symbol);
    }
  } else {
    std::string acc = meta.acc_type() == AccType::F32 ? "float" : "int";
    src = fmt::format("extern \"C\" __device__ {0} {1}({0}, {0}, {0}, const void *);\n", acc, symbol);
    std::string body = fmt::format("  {0} r = {1}(x[0], x[1], x[2], ctx);\n", acc, symbol);
    if (meta.finalize) {
      src += fmt::format("extern \"C\" __device__ float {}({}, const void *);\n", *meta.finalize, acc);
      body += fmt::format("  out[0] = {}(r, ctx);\n", *meta.finalize);
    } else {
      body += "  out[0] = (float)r;\n";
    }
    src += fmt::format("extern \"C\" __global__ void udfc_probe(const {} *x, const void *ctx, float *out) {{\n{}}}\n", acc, body);
  }
  NvrtcProgram prog;
  if (auto r = nvrtcCreateProgram(&prog.p, src.c_str(), "udfc_probe.cu", 0, nullptr, nullptr); r != NVRTC_SUCCESS)
    return nvrtc_failure(r, "nvrtcCreateProgram");
  std::string arch = fmt::format("-arch=sm_{}", a);
  const char* opts[] = {arch.c_str(), "-dlto", "-rdc=true"};
  auto r = nvrtcCompileProgram(prog.p, 3, opts);
  if (r != NVRTC_SUCCESS) return library_failure(fmt::format("NVRTC failed on udfc's probe kernel: {}", nvrtcGetErrorString(r)));
  return nvrtc_ltoir(prog.p, "the probe");
}

}  // namespace

namespace {

// One LTO-IR input checked: its arch from the header, and a probe link at
// that arch proving it defines the symbol (and finalize).
Expected<Arch> check_ltoir(const IrSource& src, const UdfMetadata& meta, std::string& raw_log) {
  const std::string& display = src.display_name;
  if (src.bytes.empty()) return diagnosed(DiagCode::BadSource, display + ": empty input: no LTO-IR");
  Arch own = ltoir_arch(src.bytes);
  if (own == 0) {
    Error e(ErrorKind::Diagnosed, DiagCode::LtoIrInvalid,
            src.bytes.size() >= 4 && src.bytes[0] == 0xed && src.bytes[1] == 0x43 && src.bytes[2] == 0x4e && src.bytes[3] == 0x7f
                ? fmt::format("{}: truncated or unreadable LTO-IR header ({} bytes)", display, src.bytes.size())
                : fmt::format("{}: not NVVM LTO-IR (no ed 43 4e 7f magic)", display));
    e.note("LTO-IR comes from nvrtc -dlto, nvcc -dlto -dc, libNVVM -gen-lto or numba-cuda's output=\"ltoir\"");
    return e;
  }
  UDF_TRY(probe, probe_ltoir(meta, *meta.symbol, own));
  std::vector<LinkInput> inputs = {{"<udfc probe>", LinkInputKind::LtoIr, probe},
                                   {display, LinkInputKind::LtoIr, src.bytes}};
  auto linked = jit_link({fmt::format("-arch=sm_{}", own), "-lto", "-ptx"}, inputs, /*want_ptx=*/true);
  std::vector<std::string> undefined;
  std::string raw;
  if (linked) {
    for (const auto& f : ptx_extern_functions(linked->ptx))
      if (f == *meta.symbol || (meta.finalize && f == *meta.finalize)) undefined.push_back(f);
  } else {
    raw = linked.error().raw_log();
    const std::string msg = linked.error().message() + "\n" + raw;
    for (const auto* name : {&*meta.symbol, meta.finalize ? &*meta.finalize : nullptr})
      if (name && msg.find("'" + *name + "'") != std::string::npos) undefined.push_back(*name);
    if (undefined.empty()) {
      Error e(ErrorKind::Diagnosed, DiagCode::LtoIrInvalid,
              fmt::format("{}: nvJitLink could not link the LTO-IR: {}", display, linked.error().message()));
      return e.with_raw_log(raw);
    }
  }
  if (!undefined.empty()) {
    std::vector<Diagnostic> errs;
    for (const auto& f : undefined)
      errs.push_back(Diagnostic(DiagCode::SymbolNotFound, display, 0, 0,
                                fmt::format("{} '{}' is not defined in this LTO-IR",
                                            f != *meta.symbol ? "finalize function" : meta.kind == UdfKind::Filter ? "filter" : "symbol", f),
                                {"it must be an externally visible device function with C linkage (numba-cuda: abi=\"c\", "
                                 "abi_info={\"abi_name\": NAME}; CUDA: extern \"C\" __device__)"}));
    return Error(ErrorKind::Diagnosed, std::move(errs)).with_raw_log(raw);
  }
  raw_log += raw;
  return own;
}

}  // namespace

Expected<CompileOutput> compile_ltoir(const std::vector<IrSource>& srcs, const UdfMetadata& meta) {
  UDF_TRY_VOID(validate(meta));
  if (srcs.empty()) return usage_error("no LTO-IR input");
  if (!meta.symbol)
    return usage_error(DiagCode::Usage, fmt::format("{}: pass --symbol NAME: udfc cannot list the functions of LTO-IR",
                                                    srcs.front().display_name));
  if (meta.v2() && !meta.shape)
    return usage_error(DiagCode::Usage, fmt::format("{}: pass --shape state|vector: udfc cannot read an ABI v2 metric's "
                                                    "signature from LTO-IR", srcs.front().display_name));
  // Every input checked, every problem reported.
  CompileOutput out;
  std::vector<std::pair<Arch, const IrSource*>> by_arch;
  std::vector<Diagnostic> errs;
  for (const auto& src : srcs) {
    auto own = check_ltoir(src, meta, out.raw_log);
    if (!own) {
      errs.insert(errs.end(), own.error().diagnostics().begin(), own.error().diagnostics().end());
      out.raw_log += own.error().raw_log();
      continue;
    }
    for (const auto& [a, other] : by_arch)
      if (a == *own)
        errs.push_back(Diagnostic(DiagCode::Usage, fmt::format("{} and {} are both {} LTO-IR: give one input per arch",
                                                               other->display_name, src.display_name, arch_name(a))));
    by_arch.emplace_back(*own, &src);
  }
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs)).with_raw_log(out.raw_log);
  std::sort(by_arch.begin(), by_arch.end(), [](const auto& x, const auto& y) { return x.first < y.first; });

  // Each requested arch gets the newest input that is not newer than it.
  for (Arch a : meta.archs) {
    const IrSource* pick = nullptr;
    Arch pick_arch = 0;
    for (const auto& [own, src] : by_arch)
      if (own <= a) pick = src, pick_arch = own;
    if (!pick) {
      Error e(ErrorKind::Diagnosed, DiagCode::LtoIrInvalid,
              fmt::format("{}: the LTO-IR is for {}, newer than the requested {}", by_arch.front().second->display_name,
                          arch_name(by_arch.front().first), arch_name(a)));
      e.note(fmt::format("LTO-IR links only into its own arch or newer ones: request {} or newer, or {} for {}",
                         arch_name(by_arch.front().first), srcs.size() == 1 ? "rebuild it" : "add LTO-IR built", arch_name(a)));
      return e;
    }
    out.artifact.ltoir[a] = pick->bytes;
    if (pick_arch != a || srcs.size() > 1)
      out.raw_log += fmt::format("udfc: {} ({} LTO-IR) stored for {}\n", pick->display_name, arch_name(pick_arch), arch_name(a));
  }
  ArtifactManifest& m = out.artifact.manifest;
  m.source_kind = SourceKind::LtoIr;
  m.source_name = std::filesystem::path(by_arch.front().second->display_name).filename().string();
  if (srcs.size() == 1) {
    m.source_sha256 = sha256_hex(srcs.front().bytes);
  } else {
    Sha256Builder sh;
    for (const auto& [own, src] : by_arch) sh.part(src->bytes);
    m.source_sha256 = sh.finish_hex();
  }
  fill_manifest_metadata(m, meta, *meta.symbol);
  std::string archs;
  for (const auto& [own, src] : by_arch) archs += (archs.empty() ? "" : ", ") + arch_name(own);
  m.compiler = fmt::format("prebuilt lto-ir {} (checked with {})", archs, nvjitlink_version_string());
  m.compiler_options = {};
  m.cache_key = ltoir_cache_key(srcs, meta);
  return out;
}

std::string ltoir_cache_key(const std::vector<IrSource>& srcs, const UdfMetadata& meta) {
  if (srcs.size() == 1) return ir_cache_key(SourceKind::LtoIr, srcs.front(), meta);
  // Several inputs: the key of their digests, sorted so that the order they
  // came in does not change the key (the artifact does not depend on it).
  std::vector<std::string> parts;
  for (const auto& s : srcs) parts.push_back(sha256_hex(s.bytes) + " " + std::filesystem::path(s.display_name).filename().string());
  std::sort(parts.begin(), parts.end());
  IrSource all;
  Sha256Builder sh;
  for (const auto& p : parts) sh.part(p);
  std::string digest = sh.finish_hex();
  all.bytes.assign(digest.begin(), digest.end());
  all.display_name = "<lto-ir per arch>";
  return ir_cache_key(SourceKind::LtoIr, all, meta);
}

}  // namespace udf

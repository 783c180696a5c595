// udf_module_link: run-time linking of artifacts into a loaded module, for
// libraries that receive UDFs while running.  The same pipeline as udf-link
// (lib/link: plan_link / run_link, nvJitLink -lto, nvFatbin) and the same
// on-disk cache entry (link_cache_key with EmitKind::Module), for the arch of
// the runtime's GPU; the module is then loaded with udf_module_load_memory.
// NVRTC and nvJitLink are loaded with dlopen by lib/link: no LLVM here.
#include "link_api.h"

#include "udf/support/install_layout.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

#include "api_guard.h"
#include "udf/link/link.h"
#include "udf/support/cache.h"
#include "udf/support/hash.h"

namespace udf::rt {
namespace {

std::string one_line(const Error& e) {
  std::string s;
  for (const auto& d : e.diagnostics()) {
    if (!s.empty()) s += "; ";
    if (!d.file.empty()) s += d.file + (d.line ? ":" + std::to_string(d.line) : std::string()) + ": ";
    s += d.message;
    for (const auto& n : d.notes) s += " (" + n + ")";
  }
  return s;
}

}  // namespace

std::string runtime_kernel_pack_dir() {
  if (const char* e = std::getenv("UDF_KERNEL_PACK_DIR"); e && *e) return e;
  // Next to this library (a Python process finds <prefix>/share/udf/kernels
  // next to <prefix>/lib), else next to the executable.
  for (const auto& data : data_dirs_near_library(shared_object_dir(reinterpret_cast<const void*>(&runtime_kernel_pack_dir)))) {
    auto cand = std::filesystem::path(data) / "kernels";
    std::error_code ec;
    if (std::filesystem::is_directory(cand, ec)) return cand.string();
  }
  return default_kernel_pack_dir();
}

Expected<LinkedModule> link_module_for_arch(const std::vector<ArtifactInput>& inputs, Arch arch,
                                            const LinkModuleOptions& opt, LinkStage* stage) {
  LinkStage ignored;
  if (!stage) stage = &ignored;
  *stage = LinkStage::Args;
  if (inputs.empty()) return usage_error("no artifacts to link");
  std::vector<LinkArtifact> arts;
  std::vector<Diagnostic> errs;
  for (const auto& in : inputs) {
    Bytes bytes = in.bytes;
    if (!in.path.empty()) {
      auto b = read_file(in.path, limits::kArtifact);
      if (!b) {
        *stage = LinkStage::Read;
        errs.insert(errs.end(), b.error().diagnostics().begin(), b.error().diagnostics().end());
        continue;
      }
      bytes = std::move(*b);
    }
    auto a = parse_artifact(bytes, in.name);
    if (!a) {
      if (*stage != LinkStage::Read) *stage = LinkStage::Parse;
      errs.insert(errs.end(), a.error().diagnostics().begin(), a.error().diagnostics().end());
      continue;
    }
    arts.push_back(LinkArtifact{in.name, std::move(*a), sha256_hex(bytes)});
  }
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));

  *stage = LinkStage::KernelPack;
  UDF_TRY(pack, load_kernel_pack(opt.kernel_pack_dir.value_or(runtime_kernel_pack_dir())));
  std::vector<Arch> archs{arch};
  *stage = LinkStage::Plan;
  UDF_TRY(plan, plan_link(arts, pack, archs));
  LinkedModule r;
  r.cache_key = link_cache_key(arts, pack, archs, EmitKind::Module);

  Cache cache = Cache::disabled();
  if (!opt.no_cache) {
    auto opened = Cache::open(opt.cache_dir);
    if (opened) cache = std::move(*opened);
    else r.warnings.push_back("cache disabled: " + opened.error().message());
  }
  if (cache.enabled()) {
    auto hit = cache.get(r.cache_key);
    if (!hit) r.warnings.push_back("cache read failed: " + hit.error().message());
    else if (*hit && parse_module(**hit, "cache entry " + r.cache_key)) {
      r.bytes = std::move(**hit);
      r.cache_hit = true;
      return r;
    }
  }
  *stage = LinkStage::Link;
  UDF_TRY(out, run_link(arts, pack, plan, EmitKind::Module));
  r.bytes = serialize_module(std::move(out.module));
  if (cache.enabled())
    if (auto put = cache.put(r.cache_key, r.bytes); !put) r.warnings.push_back("cache write failed: " + put.error().message());
  return r;
}

}  // namespace udf::rt

extern "C" UDF_API udf_status udf_module_link(udf_runtime* rt, const udf_artifact_source* artifacts, size_t n,
                                              udf_module** out) {
  using namespace udf;
  if (out) *out = nullptr;
  auto bad = [](udf_status s, const std::string& m) {
    rt::set_last_error("udf_module_link: " + m);
    return s;
  };
  if (!rt) return bad(UDF_ERROR_INVALID_ARGUMENT, "rt is NULL");
  if (!out) return bad(UDF_ERROR_INVALID_ARGUMENT, "out is NULL");
  if (!artifacts || n == 0) return bad(UDF_ERROR_INVALID_ARGUMENT, "no artifacts (artifacts is NULL or n is 0)");
  std::vector<rt::ArtifactInput> inputs;
  try {
    for (size_t i = 0; i < n; ++i) {
      const udf_artifact_source& a = artifacts[i];
      rt::ArtifactInput in;
      if (a.path) {
        in.path = a.path;
        in.name = a.path;
      } else {
        if (!a.data || a.size == 0)
          return bad(UDF_ERROR_INVALID_ARGUMENT, "artifacts[" + std::to_string(i) + "] has neither a path nor data");
        auto* p = static_cast<const std::uint8_t*>(a.data);
        in.bytes.assign(p, p + a.size);
        in.name = a.name ? a.name : "<artifact " + std::to_string(i) + " in memory>";
      }
      inputs.push_back(std::move(in));
    }
  } catch (const std::bad_alloc&) {
    return bad(UDF_ERROR_OUT_OF_MEMORY, "out of host memory");
  }

  udf_device_info info{};
  if (udf_status s = udf_runtime_device_info(rt, &info); s != UDF_OK) return s;
  bool supported = false;
  for (Arch a : supported_archs()) supported = supported || a == info.arch;
  if (!supported)
    return bad(UDF_ERROR_UNSUPPORTED, "the GPU's arch sm_" + std::to_string(info.arch) + " (" + info.name +
                                          ") is not one nvJitLink 13 targets");

  Expected<rt::LinkedModule> linked = internal_error("not run");
  rt::LinkStage stage = rt::LinkStage::Args;
  try {
    linked = rt::link_module_for_arch(inputs, info.arch, {}, &stage);
  } catch (const std::bad_alloc&) {
    return bad(UDF_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return bad(UDF_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  }
  if (!linked) return bad(rt::link_stage_status(stage), rt::link_error_text(linked.error()));
  std::string name = "linked module (" + std::to_string(n) + " artifact(s), sm_" + std::to_string(info.arch) + ")";
  return udf_module_load_memory(rt, linked->bytes.data(), linked->bytes.size(), name.c_str(), out);
}

namespace udf::rt {

udf_status link_stage_status(LinkStage stage) {
  switch (stage) {
    case LinkStage::Read: return UDF_ERROR_IO;
    case LinkStage::Parse: return UDF_ERROR_BAD_FORMAT;
    case LinkStage::KernelPack: return UDF_ERROR_IO;
    case LinkStage::Plan: return UDF_ERROR_MISMATCH;
    case LinkStage::Link: return UDF_ERROR_MISMATCH;
    case LinkStage::Args: return UDF_ERROR_INVALID_ARGUMENT;
  }
  return UDF_ERROR_INTERNAL;
}

std::string link_error_text(const Error& e) { return one_line(e); }

}  // namespace udf::rt

// udf_module_link and udf_module_link_ex: the C API of run-time linking
// (module/link_session.h does the work): the inputs and options checked, a
// module linked whole and loaded, or an on-demand module made.
#include "capi/link_api.h"

#include <string>
#include <vector>

#include "capi/api_guard.h"
#include "capi/versioned.h"
#include "module/link_session.h"

namespace {

// The C API's inputs, checked: the artifacts and the GPU's arch.
udf_status link_inputs(const char* fn, udf_runtime* rt, const udf_artifact_source* artifacts, size_t n, udf_module** out,
                       std::vector<udf::rt::ArtifactInput>& inputs, udf::Arch& arch) {
  using namespace udf;
  if (out) *out = nullptr;
  auto bad = [&](udf_status s, const std::string& m) {
    rt::set_last_error(std::string(fn) + ": " + m);
    return s;
  };
  if (!rt) return bad(UDF_ERROR_INVALID_ARGUMENT, "rt is NULL");
  if (!out) return bad(UDF_ERROR_INVALID_ARGUMENT, "out is NULL");
  if (!artifacts || n == 0) return bad(UDF_ERROR_INVALID_ARGUMENT, "no artifacts (artifacts is NULL or n is 0)");
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
  udf_device_info info{};
  if (udf_status s = udf_runtime_device_info(rt, &info); s != UDF_OK) return s;
  bool supported = false;
  for (Arch a : supported_archs()) supported = supported || a == info.arch;
  if (!supported)
    return bad(UDF_ERROR_UNSUPPORTED, "the GPU's arch sm_" + std::to_string(info.arch) + " (" + info.name +
                                          ") is not one nvJitLink 13 targets");
  arch = info.arch;
  return UDF_OK;
}

// The options a caller's struct holds (read_versioned: the fields its struct_size covers).
udf::rt::LinkModuleOptions read_options(const udf_link_options& o, bool& on_demand, uint32_t& prefetch_k) {
  const udf_link_options d = udf::rt::read_versioned(o, udf::rt::link_options_defaults(), udf::rt::kLinkOptionsMinSize,
                                                     "options", "udf_link_options");
  on_demand = d.on_demand != 0;
  prefetch_k = d.prefetch_k;
  udf::rt::LinkModuleOptions opt;
  if (d.kernel_pack_dir) opt.kernel_pack_dir = d.kernel_pack_dir;
  if (d.cache_dir) opt.cache_dir = d.cache_dir;
  opt.no_cache = d.no_cache != 0;
  opt.max_k = static_cast<int>(d.max_k);
  opt.threads = d.threads;
  // On demand the rows entries are planned always (linked only when an exact
  // search or a refine first needs them); a whole module has them when asked.
  opt.rows = on_demand || d.exact != 0;
  // On demand each plain scan has its direct twin too: a first search's
  // tiny batch waits for the twin's shorter link (on_demand.cpp).
  opt.direct = on_demand;
  return opt;
}

}  // namespace

udf_link_options udf::rt::link_options_defaults() {
  udf_link_options o{};
  o.struct_size = sizeof o;
  o.on_demand = 1;
  o.prefetch_k = 32;
  return o;
}

extern "C" UDF_API void udf_link_options_init(udf_link_options* o, size_t struct_size) {
  udf::rt::init_versioned(o, struct_size, udf::rt::link_options_defaults());
}

extern "C" UDF_API udf_status udf_module_link(udf_runtime* rt, const udf_artifact_source* artifacts, size_t n,
                                              udf_module** out) {
  udf_link_options o;
  udf_link_options_default(&o);
  o.on_demand = 0;
  o.prefetch_k = 0;
  return udf_module_link_ex(rt, artifacts, n, &o, out);
}

extern "C" UDF_API udf_status udf_module_link_ex(udf_runtime* rt, const udf_artifact_source* artifacts, size_t n,
                                                 const udf_link_options* options, udf_module** out) {
  using namespace udf;
  const char* fn = "udf_module_link_ex";
  auto bad = [&](udf_status s, const std::string& m) {
    rt::set_last_error(std::string(fn) + ": " + m);
    return s;
  };
  if (out) *out = nullptr;
  const udf_link_options defaults = rt::link_options_defaults();
  try {
    bool on_demand = true;
    uint32_t prefetch_k = 0;
    const rt::LinkModuleOptions opt = read_options(options ? *options : defaults, on_demand, prefetch_k);
    std::vector<rt::ArtifactInput> inputs;
    Arch arch = 0;
    if (udf_status s = link_inputs(fn, rt, artifacts, n, out, inputs, arch); s != UDF_OK) return s;
    const std::string name = "linked module (" + std::to_string(n) + " artifact(s), sm_" + std::to_string(arch) + ")";
    rt::LinkStage stage = rt::LinkStage::Args;
    if (!on_demand) {
      auto linked = rt::link_module_for_arch(inputs, arch, opt, &stage);
      if (!linked) return bad(rt::link_stage_status(stage), rt::link_error_text(linked.error()));
      return udf_module_load_memory(rt, linked->bytes.data(), linked->bytes.size(), name.c_str(), out);
    }
    auto session = rt::prepare_link(inputs, arch, opt, &stage);
    if (!session) return bad(rt::link_stage_status(stage), rt::link_error_text(session.error()));
    return rt::load_on_demand(rt, std::move(*session), name, prefetch_k, out);
  } catch (const rt::RuntimeFailure& e) {
    return bad(e.status, e.what());
  } catch (const std::bad_alloc&) {
    return bad(UDF_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return bad(UDF_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  }
}

#include "udf/artifact/module.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "json_checker.h"
#include "udf/kernels/ivf_flat_v1.h"
#include "udf/support/hash.h"

namespace udf {

using detail::Checker;
using nlohmann::json;

std::vector<std::int64_t> sort_capacities_for(std::int64_t k_max) {
  if (k_max < 1 || k_max > std::numeric_limits<std::int32_t>::max()) return {};
  const auto k = static_cast<std::uint32_t>(k_max);  // 2 * k fits: k < 2^31
  const std::int64_t current = UDF_IVF_V1_SORT_CAPACITY(k), before_1_8 = 2 * std::max<std::int64_t>(k_max, 128);
  if (current == before_1_8) return {current};
  return {std::min(current, before_1_8), std::max(current, before_1_8)};
}

std::optional<std::string> sort_capacity_problem(const std::map<std::string, std::int64_t>& launch) {
  const auto sc = launch.find("sort_capacity");
  if (sc == launch.end()) return std::nullopt;
  const auto km = launch.find("k_max");
  if (km == launch.end()) return fmt::format("{} without a k_max to check it against", sc->second);
  const std::vector<std::int64_t> ok = sort_capacities_for(km->second);
  if (ok.empty()) return fmt::format("{} with k_max {}, which is not a k bucket", sc->second, km->second);
  if (std::find(ok.begin(), ok.end(), sc->second) != ok.end()) return std::nullopt;
  return fmt::format("{} is not {} (k_max {})", sc->second, fmt::join(ok, " or "), km->second);
}

ModuleArtifact module_artifact_from(const ArtifactManifest& m) {
  return ModuleArtifact{m.source_name, m.symbol, m.finalize, m.elem, m.acc, m.order, m.initial, m.coarse_metric,
                        m.coarse_weights, m.captures, m.cache_key, m.shape, m.initial_state, m.state_words};
}

ModuleFilter module_filter_from(const ArtifactManifest& m) {
  return ModuleFilter{m.source_name, m.symbol, m.captures, m.cache_key};
}

std::string to_json(const ModuleManifest& m) {
  // Before minor kModuleImagesMinor: one image, and entries without an image index.
  const bool images_form = m.version_minor >= kModuleImagesMinor;
  json archs = json::array();
  for (Arch a : m.archs) archs.push_back(arch_name(a));
  json arts = json::array();
  for (std::size_t i = 0; i < m.artifacts.size(); ++i) {
    const auto& a = m.artifacts[i];
    json init = detail::initial_to_json(a.initial, a.acc);
    if (a.shape) {
      init = json::array();
      for (const auto& v : a.initial_state) init.push_back(detail::initial_to_json(v, a.acc));
    }
    arts.push_back({{"index", i}, {"source_name", a.source_name}, {"symbol", a.symbol},
                    {"finalize", a.finalize ? json(*a.finalize) : json(nullptr)}, {"element_type", to_string(a.elem)},
                    {"accumulator_type", to_string(a.acc)}, {"order", to_string(a.order)},
                    {"initial", init}, {"coarse_metric", to_string(a.coarse_metric)},
                    {"captures", detail::captures_to_json(a.captures)}, {"cache_key", a.cache_key}});
    if (a.shape) arts.back()["shape"] = to_string(*a.shape);
    if (a.shape == MetricShape::State) arts.back()["state_words"] = a.state_words;
    if (a.coarse_weights) arts.back()["coarse_weights"] = *a.coarse_weights;
  }
  json filters = json::array();
  for (std::size_t i = 0; i < m.filters.size(); ++i) {
    const auto& f = m.filters[i];
    filters.push_back({{"index", i}, {"source_name", f.source_name}, {"symbol", f.symbol},
                       {"captures", detail::captures_to_json(f.captures)}, {"cache_key", f.cache_key}});
  }
  json entries = json::array();
  for (const auto& e : m.entries) {
    json launch = json::object();
    for (const auto& [k, v] : e.launch) launch[k] = v;
    entries.push_back({{"name", e.name}, {"artifact", e.artifact ? json(*e.artifact) : json(nullptr)},
                       {"filter", e.filter ? json(*e.filter) : json(nullptr)}, {"variant", e.variant}, {"launch", launch}});
    if (images_form) entries.back()["image"] = e.image;
  }
  auto image_json = [](const ModuleImage& im) { return json{{"kind", "fatbin"}, {"size", im.size}, {"sha256", im.sha256}}; };
  json images = json::array();
  for (const auto& im : m.images) images.push_back(image_json(im));
  json j = {
      {"kind", kModuleManifestKind},
      {"version", {{"major", kModuleManifestMajor}, {"minor", m.version_minor}}},
      {"abi", {{"id", m.abi_id}, {"version", m.abi_version}}},
      {"kernel_pack", {{"name", m.kernel_pack_name}, {"sha256", m.kernel_pack_sha256}}},
      {"archs", archs},
      {"artifacts", arts},
      {"filters", filters},
      {"entries", entries},
      {"toolchain", {{"udf_link", m.udf_link_version}, {"linker", m.linker}, {"packager", m.packager}, {"options", m.link_options}}},
      {"cache_key", m.cache_key},
  };
  if (images_form) j["images"] = images;
  else j["image"] = m.images.empty() ? image_json(ModuleImage{}) : image_json(m.images.front());
  return j.dump(2) + "\n";
}

namespace {

// The header: kind, format version, ABI, kernel pack and archs.
void read_module_header(Checker& ck, const json& j, ModuleManifest& m) {
  if (auto k = ck.str(j, "", "kind"); j.contains("kind") && k != kModuleManifestKind)
    ck.fail("kind", fmt::format("'{}' is not '{}'", k, kModuleManifestKind));
  if (const json* v = ck.field(j, "", "version", json::value_t::object)) {
    const json* maj = ck.field(*v, "version", "major", json::value_t::number_integer);
    if (maj && maj->get<std::int64_t>() != kModuleManifestMajor) ck.fail("version.major", "unsupported");
    if (const json* mi = ck.field(*v, "version", "minor", json::value_t::number_integer))
      m.version_minor = static_cast<int>(mi->get<std::int64_t>());
  }
  if (const json* a = ck.field(j, "", "abi", json::value_t::object)) {
    m.abi_id = ck.str(*a, "abi", "id");
    if (const json* v = ck.field(*a, "abi", "version", json::value_t::number_integer)) m.abi_version = v->get<int>();
  }
  if (const json* p = ck.field(j, "", "kernel_pack", json::value_t::object)) {
    m.kernel_pack_name = ck.str(*p, "kernel_pack", "name");
    m.kernel_pack_sha256 = ck.str(*p, "kernel_pack", "sha256");
  }
  if (const json* as = ck.field(j, "", "archs", json::value_t::array)) {
    for (const auto& a : *as) {
      auto arch = a.is_string() ? parse_arch(a.get<std::string>()) : Expected<Arch>(usage_error(DiagCode::BadManifest, "not a string"));
      if (arch) m.archs.push_back(*arch);
      else ck.fail("archs", arch.error().message());
    }
    if (m.archs.empty()) ck.fail("archs", "empty");
  }
}

// The fatbin images: a manifest of minor kModuleImagesMinor or later lists
// them under "images"; an older one has the one "image".
void read_module_images(Checker& ck, const json& j, bool images_form, ModuleManifest& m) {
  auto read_image = [&](const json& im, const std::string& p) {
    ModuleImage out;
    if (ck.str(im, p, "kind") != "fatbin") ck.fail(p + ".kind", "expected 'fatbin'");
    if (const json* s = ck.field(im, p, "size", json::value_t::number_integer)) out.size = s->get<std::uint64_t>();
    out.sha256 = ck.str(im, p, "sha256");
    m.images.push_back(std::move(out));
  };
  if (!images_form) {
    if (const json* im = ck.field(j, "", "image", json::value_t::object)) read_image(*im, "image");
  } else if (const json* ims = ck.field(j, "", "images", json::value_t::array)) {
    if (ims->empty()) ck.fail("images", "empty");
    for (std::size_t i = 0; i < ims->size(); ++i) {
      const std::string p = fmt::format("images[{}]", i);
      if ((*ims)[i].is_object()) read_image((*ims)[i], p);
      else ck.fail(p, "expected an object");
    }
  }
}

// One metric artifact.  A "shape" makes it an ABI v2 metric (its initial
// state, finalize and state words follow the shape); without one it is an
// ABI v1 metric, which has no state words.
ModuleArtifact read_module_artifact(Checker& ck, const json& a, const std::string& p) {
  ModuleArtifact ma;
  ma.source_name = ck.str(a, p, "source_name");
  ma.symbol = ck.str(a, p, "symbol");
  if (a.contains("finalize") && a["finalize"].is_string()) ma.finalize = a["finalize"].get<std::string>();
  if (auto e = parse_elem_type(ck.str(a, p, "element_type"))) ma.elem = *e; else ck.fail(p + ".element_type", "bad value");
  if (auto e = parse_acc_type(ck.str(a, p, "accumulator_type"))) ma.acc = *e; else ck.fail(p + ".accumulator_type", "bad value");
  if (auto e = parse_order(ck.str(a, p, "order"))) ma.order = *e; else ck.fail(p + ".order", "bad value");
  if (auto e = parse_coarse_metric(ck.str(a, p, "coarse_metric"))) ma.coarse_metric = *e; else ck.fail(p + ".coarse_metric", "bad value");
  if (auto sh = a.find("shape"); sh != a.end()) {
    auto shape = sh->is_string() ? parse_metric_shape(sh->get<std::string>()) : std::nullopt;
    if (shape) ma.shape = *shape;
    else ck.fail(p + ".shape", "expected \"state\" or \"vector\"");
    ma.initial_state = detail::read_initial_state(ck, a, p, ma.acc);
    if (ma.shape == MetricShape::State && !ma.finalize) ck.fail(p + ".finalize", "a state-shaped metric needs its finalize function");
    if (ma.shape == MetricShape::Vector && ma.finalize) ck.fail(p + ".finalize", "a vector-shaped metric has no finalize (null)");
    if (ma.shape == MetricShape::Vector && !ma.initial_state.empty())
      ck.fail(p + ".initial", "a vector-shaped metric has no initial state ([])");
    ma.state_words = detail::read_state_words(ck, a, p, ma.shape, ma.initial_state.size());
  } else {
    ma.initial = detail::read_initial(ck, a, p, ma.acc);
    if (a.contains("state_words")) ck.fail(p + ".state_words", "only a state-shaped (ABI v2) metric has state words");
  }
  ma.captures = detail::read_captures(ck, a, p);
  if (auto w = a.find("coarse_weights"); w != a.end()) {
    if (!w->is_string()) ck.fail(p + ".coarse_weights", "expected the name of a capture (a string)");
    else if (auto problem = coarse_weights_problem(w->get<std::string>(), ma.captures, ma.coarse_metric))
      ck.fail(p + ".coarse_weights", *problem);
    else ma.coarse_weights = w->get<std::string>();
  }
  ma.cache_key = ck.str(a, p, "cache_key");
  return ma;
}

void read_module_artifacts(Checker& ck, const json& j, ModuleManifest& m) {
  if (const json* arts = ck.field(j, "", "artifacts", json::value_t::array)) {
    for (std::size_t i = 0; i < arts->size(); ++i) {
      const json& a = (*arts)[i];
      std::string p = fmt::format("artifacts[{}]", i);
      if (!a.is_object()) { ck.fail(p, "expected an object"); continue; }
      m.artifacts.push_back(read_module_artifact(ck, a, p));
    }
  }
}

// The filters: optional (a manifest before minor 1 has none).
void read_module_filters(Checker& ck, const json& j, ModuleManifest& m) {
  auto fs = j.find("filters");
  if (fs == j.end()) return;
  if (!fs->is_array()) {
    ck.fail("filters", "expected an array");
    return;
  }
  for (std::size_t i = 0; i < fs->size(); ++i) {
    const json& f = (*fs)[i];
    std::string p = fmt::format("filters[{}]", i);
    if (!f.is_object()) { ck.fail(p, "expected an object"); continue; }
    ModuleFilter mf;
    mf.source_name = ck.str(f, p, "source_name");
    mf.symbol = ck.str(f, p, "symbol");
    if (f.contains("symbol") && !is_c_identifier(mf.symbol)) ck.fail(p + ".symbol", "not a C identifier");
    mf.captures = detail::read_captures(ck, f, p);
    mf.cache_key = ck.str(f, p, "cache_key");
    m.filters.push_back(std::move(mf));
  }
}

// An index into a list of `n` (artifacts, filters or images), or null; an
// absent "artifact" is an error, an absent "filter" or "image" is null.
void read_list_index(Checker& ck, const json& e, const std::string& p, const char* key, std::size_t n, std::optional<int>& out) {
  auto it = e.find(key);
  if (it != e.end() && it->is_number_integer()) {
    // Compared as read (get<int> would wrap 4294967296 to 0).
    const bool in_range = it->is_number_unsigned() ? it->get<std::uint64_t>() < n
                                                   : it->get<std::int64_t>() >= 0 && it->get<std::int64_t>() < static_cast<std::int64_t>(n);
    if (in_range) out = it->get<int>();
    else ck.fail(p + "." + key, "out of range");
  } else if (it == e.end() ? std::string(key) == "artifact" : !it->is_null()) {
    ck.fail(p + "." + key, "expected an index or null");
  }
}

// One entry.  In the images form (minor kModuleImagesMinor or later) an
// entry names its image; before, it has no "image".  Its launch values must
// be ones the runtime honours: the capture alignment the runtime gives array
// captures (UDF_IVF_SCAN_V1_CAPTURE_ALIGN bytes, no more), and a
// sort_capacity a kernel pack gives an entry of that k_max (the runtime sizes
// a scan's shared memory with it).
ModuleEntry read_module_entry(Checker& ck, const json& e, const std::string& p, bool images_form, const ModuleManifest& m) {
  ModuleEntry me;
  me.name = ck.str(e, p, "name");
  me.variant = ck.str(e, p, "variant");
  if (images_form) {
    std::optional<int> image;
    if (!e.contains("image")) ck.fail(p + ".image", "missing");
    else read_list_index(ck, e, p, "image", m.images.size(), image);
    if (e.contains("image") && !image && e["image"].is_null()) ck.fail(p + ".image", "expected an index");
    me.image = image.value_or(0);
  } else if (e.contains("image")) {
    ck.fail(p + ".image", fmt::format("not a field of a version 1.{} manifest", m.version_minor));
  }
  read_list_index(ck, e, p, "artifact", m.artifacts.size(), me.artifact);
  read_list_index(ck, e, p, "filter", m.filters.size(), me.filter);
  if (me.filter && !me.artifact) ck.fail(p + ".filter", "a filtered entry needs its metric (artifact)");
  if (const json* l = ck.field(e, p, "launch", json::value_t::object))
    for (auto it = l->begin(); it != l->end(); ++it) {
      if (it->is_number_integer()) me.launch[it.key()] = it->get<std::int64_t>();
      else ck.fail(p + ".launch." + it.key(), "expected an integer");
    }
  if (auto ca = me.launch.find("capture_align"); ca != me.launch.end() && ca->second != kModuleCaptureAlign)
    ck.fail(p + ".launch.capture_align", fmt::format("{} is not {}", ca->second, kModuleCaptureAlign));
  if (auto problem = sort_capacity_problem(me.launch)) ck.fail(p + ".launch.sort_capacity", *problem);
  // A direct twin (LinkSelection::direct) serves only the direct schedules
  // of the runtime that linked it, in memory; a file never holds one.
  if (me.launch.count("direct_only"))
    ck.fail(p + ".launch.direct_only", "a direct twin belongs to a runtime's on-demand module, never to a module file");
  return me;
}

void read_module_entries(Checker& ck, const json& j, bool images_form, ModuleManifest& m) {
  if (const json* es = ck.field(j, "", "entries", json::value_t::array)) {
    for (std::size_t i = 0; i < es->size(); ++i) {
      const json& e = (*es)[i];
      std::string p = fmt::format("entries[{}]", i);
      if (!e.is_object()) { ck.fail(p, "expected an object"); continue; }
      m.entries.push_back(read_module_entry(ck, e, p, images_form, m));
    }
  }
}

void read_module_toolchain(Checker& ck, const json& j, ModuleManifest& m) {
  if (const json* tc = ck.field(j, "", "toolchain", json::value_t::object)) {
    m.udf_link_version = ck.str(*tc, "toolchain", "udf_link");
    m.linker = ck.str(*tc, "toolchain", "linker");
    m.packager = ck.str(*tc, "toolchain", "packager");
    if (const json* o = ck.field(*tc, "toolchain", "options", json::value_t::array))
      for (const auto& s : *o) if (s.is_string()) m.link_options.push_back(s.get<std::string>());
  }
}

}  // namespace

// Every section is read and every problem reported before the manifest is
// refused.  Which fields a manifest may hold follows its minor version.
Expected<ModuleManifest> parse_module_manifest(const std::string& text, const std::string& name) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return diagnosed(DiagCode::BadManifest, name + ": the module manifest is not a JSON object");
  Checker ck(name);
  ModuleManifest m;
  const bool images_form = j.contains("version") && j["version"].is_object() && j["version"].contains("minor") &&
                           j["version"]["minor"].is_number_integer() && j["version"]["minor"].get<std::int64_t>() >= kModuleImagesMinor;
  ck.only(j, "", {"kind", "version", "abi", "kernel_pack", "archs", images_form ? "images" : "image", "artifacts", "filters",
                  "entries", "toolchain", "cache_key"});
  read_module_header(ck, j, m);
  read_module_images(ck, j, images_form, m);
  read_module_artifacts(ck, j, m);
  read_module_filters(ck, j, m);
  read_module_entries(ck, j, images_form, m);
  read_module_toolchain(ck, j, m);
  m.cache_key = ck.str(j, "", "cache_key");
  auto errs = ck.take();
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));
  return m;
}

Bytes serialize_module(Module m) {
  m.manifest.images.clear();
  for (const auto& im : m.images) m.manifest.images.push_back(ModuleImage{im.size(), sha256_hex(im)});
  Container c{ContainerKind::Module, kContainerMinor, to_json(m.manifest), {}};
  for (auto& im : m.images) c.payloads.push_back(Section{SectionKind::Fatbin, 0, std::move(im)});
  return write_container(c);
}

Expected<Module> parse_module(std::span<const std::uint8_t> bytes, const std::string& name) {
  UDF_TRY(c, read_container(bytes, name, ContainerKind::Module));
  UDF_TRY(m, parse_module_manifest(c.manifest_json, name));
  if (c.payloads.size() != m.images.size())
    return diagnosed(DiagCode::BadContainer, fmt::format("{}: the manifest lists {} image(s) but the module holds {} section(s)",
                                                         name, m.images.size(), c.payloads.size()));
  Module out{std::move(m), {}};
  for (std::size_t i = 0; i < c.payloads.size(); ++i) {
    if (c.payloads[i].kind != SectionKind::Fatbin)
      return diagnosed(DiagCode::BadContainer, fmt::format("{}: section {} is not a fatbin", name, i + 1));
    const ModuleImage& im = out.manifest.images[i];
    if (c.payloads[i].data.size() != im.size || sha256_hex(c.payloads[i].data) != im.sha256)
      return diagnosed(DiagCode::BadContainer,
                       out.manifest.version_minor >= kModuleImagesMinor
                           ? fmt::format("{}: fatbin {} does not match the manifest's images[{}] size/sha256", name, i + 1, i)
                           : name + ": the fatbin does not match the manifest's image size/sha256");
    out.images.push_back(std::move(c.payloads[i].data));
  }
  return out;
}

Expected<Module> read_module(const std::string& path) {
  UDF_TRY(bytes, read_file(path, limits::kModule));
  return parse_module(bytes, path);
}

}  // namespace udf

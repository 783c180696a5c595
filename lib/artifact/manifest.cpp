#include "udf/artifact/manifest.h"

#include "json_checker.h"

#include <algorithm>
#include <cmath>
#include <charconv>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace udf {

using nlohmann::json;
using detail::Checker;

std::string_view to_string(SourceKind k) {
  switch (k) {
    case SourceKind::Cuda: return "cuda";
    case SourceKind::Mlir: return "mlir";
    case SourceKind::LlvmIr: return "llvm-ir";
    case SourceKind::LtoIr: return "lto-ir";
  }
  return "?";
}

std::optional<SourceKind> parse_source_kind(std::string_view s) {
  for (auto k : {SourceKind::Cuda, SourceKind::Mlir, SourceKind::LlvmIr, SourceKind::LtoIr})
    if (to_string(k) == s) return k;
  return std::nullopt;
}

Expected<InitialValue> parse_initial(std::string_view text, AccType acc) {
  std::string t(text);
  if (acc == AccType::I32) {
    long long v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc{} || p != t.data() + t.size() || t.empty())
      return usage_error(DiagCode::InvalidOptionValue, fmt::format("bad initial value '{}': the i32 accumulator needs an integer", text));
    if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
      return usage_error(DiagCode::InvalidOptionValue, fmt::format("bad initial value '{}': out of range for i32", text));
    return InitialValue{static_cast<double>(v)};
  }
  if (t == "inf" || t == "+inf") return InitialValue{std::numeric_limits<double>::infinity()};
  if (t == "-inf") return InitialValue{-std::numeric_limits<double>::infinity()};
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc{} || p != t.data() + t.size() || t.empty() || std::isnan(v))
    return usage_error(DiagCode::InvalidOptionValue, fmt::format("bad initial value '{}': expected a number, inf or -inf", text));
  // Out of range: what rounds to infinity in f32, |v| >= FLT_MAX + half an ulp
  // = 2^128 - 2^103 (the tie rounds to even: infinity).  Not |v| > FLT_MAX: the
  // shortest text of FLT_MAX, 3.4028235e38, is above it and rounds to it, and
  // must read back -- manifests store that text.  (Compared in double: the
  // conversion of an out-of-range double to float is undefined behaviour.)
  static const double kF32Overflow = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
  if (std::isfinite(v) && std::fabs(v) >= kF32Overflow)
    return usage_error(DiagCode::InvalidOptionValue, fmt::format("bad initial value '{}': out of range for f32", text));
  // Store what the device will see: the value rounded to f32.
  return InitialValue{static_cast<double>(static_cast<float>(v))};
}

std::string to_string(const InitialValue& v, AccType acc) {
  if (std::isinf(v.value)) return v.value > 0 ? "inf" : "-inf";
  if (acc == AccType::I32) return fmt::format("{}", static_cast<long long>(v.value));
  return fmt::format("{}", static_cast<float>(v.value));
}

Expected<std::vector<InitialValue>> parse_initial_state(std::string_view text, AccType acc) {
  std::vector<InitialValue> out;
  std::vector<Diagnostic> errs;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view part = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    auto v = parse_initial(part, acc);
    if (v) out.push_back(*v);
    else for (const auto& d : v.error().diagnostics()) errs.push_back(d);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (out.size() + errs.size() > static_cast<std::size_t>(kMetricV2StateWords))
    errs.push_back(Diagnostic(DiagCode::InvalidOptionValue,
                              fmt::format("bad initial state '{}': {} values; the ABI v2 state has {} words", text,
                                          out.size() + errs.size(), kMetricV2StateWords)));
  if (!errs.empty()) return Error(ErrorKind::Usage, std::move(errs));
  return out;
}

std::optional<std::string> coarse_weights_problem(const std::string& name, const std::vector<Capture>& captures,
                                                  CoarseMetric coarse) {
  const auto c = std::find_if(captures.begin(), captures.end(), [&](const Capture& x) { return x.name == name; });
  if (c == captures.end()) {
    std::string have;
    for (const auto& x : captures) have += (have.empty() ? "" : ", ") + to_string(x);
    return fmt::format("names capture '{}', which is not declared (captures: {})", name, have.empty() ? "none" : have);
  }
  if (!c->array || c->type != CaptureType::F32)
    return fmt::format("capture '{}' is {}: coarse weights are an f32 array, one weight a dimension ({}:f32[])", name,
                       to_string(*c), name);
  if (coarse == CoarseMetric::Cosine)
    return "the coarse metric is cosine, which normalizes the rows: coarse weights need l2 or inner_product";
  return std::nullopt;
}

std::string to_string(const std::vector<InitialValue>& v, AccType acc) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + to_string(x, acc);
  return s;
}

std::string to_json(const ArtifactManifest& m) {
  json targets = json::array();
  for (const auto& t : m.targets)
    targets.push_back({{"arch", arch_name(t.arch)}, {"size", t.size}, {"sha256", t.sha256}});
  json j = {
      {"kind", kArtifactManifestKind},
      {"version", {{"major", kArtifactManifestMajor}, {"minor", kArtifactManifestMinor}}},
      {"udf_kind", to_string(m.kind)},
      {"abi", {{"id", m.abi_id}, {"version", m.abi_version}}},
      {"payload_kind", "lto-ir"},
      {"source", {{"kind", to_string(m.source_kind)}, {"name", m.source_name}, {"sha256", m.source_sha256}}},
      {"symbol", m.symbol},
      {"captures", detail::captures_to_json(m.captures)},
      {"targets", targets},
      {"toolchain", {{"udfc", m.udfc_version}, {"compiler", m.compiler}, {"options", m.compiler_options}}},
      {"cache_key", m.cache_key},
  };
  if (m.kind == UdfKind::Metric) {
    j["finalize"] = m.finalize ? json(*m.finalize) : json(nullptr);
    j["element_type"] = to_string(m.elem);
    j["accumulator_type"] = to_string(m.acc);
    j["order"] = to_string(m.order);
    j["coarse_metric"] = to_string(m.coarse_metric);
    if (m.shape) {
      j["shape"] = to_string(*m.shape);
      if (*m.shape == MetricShape::State) j["state_words"] = m.state_words;
      json init = json::array();
      for (const auto& v : m.initial_state) init.push_back(detail::initial_to_json(v, m.acc));
      j["initial"] = init;
    } else {
      j["initial"] = detail::initial_to_json(m.initial, m.acc);
    }
    // Written only when set: an artifact that declares neither reads the same
    // as before 1.4 (monotone) and 1.5 (coarse_weights).
    if (m.monotone) j["monotone"] = true;
    if (m.coarse_weights) j["coarse_weights"] = *m.coarse_weights;
  }
  return j.dump(2) + "\n";
}


namespace {

// The header: udf_kind, kind, format version and ABI.  udf_kind exists since
// minor 1; a manifest without it is a metric's.  The ABI must fit the kind.
void read_artifact_header(Checker& ck, const json& j, ArtifactManifest& m) {
  if (auto it = j.find("udf_kind"); it != j.end()) {
    auto k = it->is_string() ? parse_udf_kind(it->get<std::string>()) : std::nullopt;
    if (k) m.kind = *k;
    else ck.fail("udf_kind", it->is_string() ? fmt::format("'{}' is not one of metric, filter", it->get<std::string>())
                                             : std::string("expected a string"));
  }
  if (auto k = ck.str(j, "", "kind"); j.contains("kind") && k != kArtifactManifestKind)
    ck.fail("kind", fmt::format("'{}' is not '{}'", k, kArtifactManifestKind));
  if (const json* v = ck.field(j, "", "version", json::value_t::object)) {
    ck.only(*v, "version", {"major", "minor"});
    const json* maj = ck.field(*v, "version", "major", json::value_t::number_integer);
    ck.field(*v, "version", "minor", json::value_t::number_integer);
    if (maj && maj->get<std::int64_t>() != kArtifactManifestMajor)
      ck.fail("version.major", fmt::format("{} is not supported (this tool reads {})", maj->get<std::int64_t>(),
                                           kArtifactManifestMajor));
  }
  if (const json* a = ck.field(j, "", "abi", json::value_t::object)) {
    ck.only(*a, "abi", {"id", "version"});
    m.abi_id = ck.str(*a, "abi", "id");
    if (const json* v = ck.field(*a, "abi", "version", json::value_t::number_integer)) m.abi_version = v->get<int>();
    const bool known = m.abi_id == abi_id(UdfKind::Metric) || m.abi_id == abi_id(UdfKind::Filter) || m.abi_id == kMetricV2AbiId;
    const bool fits = m.kind == UdfKind::Metric ? m.abi_id != abi_id(UdfKind::Filter) : m.abi_id == abi_id(UdfKind::Filter);
    if (a->contains("id") && (*a)["id"].is_string() && known && !fits)
      ck.fail("abi.id", fmt::format("'{}' does not fit udf_kind '{}' (expected '{}')", m.abi_id, to_string(m.kind),
                                    abi_id(m.kind)));
    if (m.abi_id == kMetricV2AbiId && a->contains("version") && m.abi_version != kMetricV2AbiVersion)
      ck.fail("abi.version", fmt::format("{} is not the version of ABI {} ({})", m.abi_version, kMetricV2AbiId, kMetricV2AbiVersion));
  }
}

// The payload's kind, the source and the symbol.
void read_artifact_source(Checker& ck, const json& j, ArtifactManifest& m) {
  if (auto pk = ck.str(j, "", "payload_kind"); j.contains("payload_kind") && pk != "lto-ir")
    ck.fail("payload_kind", fmt::format("'{}' is not 'lto-ir'", pk));
  if (const json* s = ck.field(j, "", "source", json::value_t::object)) {
    ck.only(*s, "source", {"kind", "name", "sha256"});
    auto k = ck.str(*s, "source", "kind");
    if (auto sk = parse_source_kind(k)) m.source_kind = *sk;
    else if (s->contains("kind")) ck.fail("source.kind", fmt::format("'{}' is not one of cuda, mlir, llvm-ir, lto-ir", k));
    m.source_name = ck.str(*s, "source", "name");
    m.source_sha256 = ck.str(*s, "source", "sha256");
    if (s->contains("sha256")) ck.hex64("source.sha256", m.source_sha256);
  }
  m.symbol = ck.str(j, "", "symbol");
  if (j.contains("symbol") && !is_c_identifier(m.symbol)) ck.fail("symbol", fmt::format("'{}' is not a C identifier", m.symbol));
}

// The initial value and the shape: an ABI v1 metric has one initial value
// and no shape; an ABI v2 metric has a shape, whose rules say what its
// finalize, initial state and state words must be.
void read_metric_shape(Checker& ck, const json& j, bool v2, ArtifactManifest& m) {
  if (!v2) {
    m.initial = detail::read_initial(ck, j, "", m.acc);
    if (j.contains("shape")) ck.fail("shape", fmt::format("only ABI {} metrics have a shape (this one is {})", kMetricV2AbiId, m.abi_id));
    if (j.contains("state_words")) ck.fail("state_words", "only a state-shaped (ABI v2) metric has state words");
    return;
  }
  const bool shape_given = j.contains("shape") && j["shape"].is_string() && parse_metric_shape(j["shape"].get<std::string>());
  m.shape = ck.enumerated<MetricShape>(j, "shape", parse_metric_shape, "state, vector");
  m.initial_state = detail::read_initial_state(ck, j, "", m.acc);
  if (shape_given && m.shape == MetricShape::State && !m.finalize && j.contains("finalize"))
    ck.fail("finalize", "a state-shaped metric needs its finalize function (float g(const udf_state_v2 *, const udf_ctx_v2 *))");
  if (shape_given && m.shape == MetricShape::Vector && m.finalize) ck.fail("finalize", "a vector-shaped metric has no finalize (null)");
  if (shape_given && m.shape == MetricShape::Vector && !m.initial_state.empty()) ck.fail("initial", "a vector-shaped metric has no initial state ([])");
  if (shape_given) m.state_words = detail::read_state_words(ck, j, "", m.shape, m.initial_state.size());
}

// A metric's fields.  "monotone" exists since minor 4 and is optional
// (absent is false); whatever its value, an ABI v2 metric has none (its
// update or distance is no accumulator a scan could stop folding).
// "coarse_weights" (minor 5, optional) is checked against the captures once
// they are read.
void read_metric_fields(Checker& ck, const json& j, ArtifactManifest& m) {
  const bool v2 = m.abi_id == kMetricV2AbiId;
  if (auto it = j.find("finalize"); it == j.end()) ck.fail("finalize", "missing");
  else if (it->is_string()) {
    m.finalize = it->get<std::string>();
    // udf-link writes the name into the entry kernels' source, like the symbol.
    if (!is_c_identifier(*m.finalize)) ck.fail("finalize", fmt::format("'{}' is not a C identifier", *m.finalize));
  } else if (!it->is_null()) ck.fail("finalize", "expected a string or null");
  m.elem = ck.enumerated<ElemType>(j, "element_type", parse_elem_type, "f32, f16, i8, u8");
  m.acc = ck.enumerated<AccType>(j, "accumulator_type", parse_acc_type, "f32, i32");
  if (j.contains("element_type") && j.contains("accumulator_type")) {
    auto allowed = allowed_acc_types(m.elem);
    if (std::find(allowed.begin(), allowed.end(), m.acc) == allowed.end())
      ck.fail("accumulator_type", fmt::format("{} is not allowed for element type {}", to_string(m.acc), to_string(m.elem)));
  }
  m.order = ck.enumerated<Order>(j, "order", parse_order, "min, max");
  read_metric_shape(ck, j, v2, m);
  m.coarse_metric = ck.enumerated<CoarseMetric>(j, "coarse_metric", parse_coarse_metric, "l2, inner_product, cosine");
  if (auto it = j.find("monotone"); it != j.end()) {
    if (v2)
      ck.fail("monotone", fmt::format("only ABI {} metrics may be monotone (this one is {})", abi_id(UdfKind::Metric), m.abi_id));
    else if (!it->is_boolean()) ck.fail("monotone", fmt::format("expected boolean, got {}", it->type_name()));
    else m.monotone = it->get<bool>();
  }
  if (auto it = j.find("coarse_weights"); it != j.end()) {
    if (it->is_string()) m.coarse_weights = it->get<std::string>();
    else ck.fail("coarse_weights", fmt::format("expected the name of a capture (a string), got {}", it->type_name()));
  }
}

// The targets: at least one, sorted by arch, each arch once.
void read_artifact_targets(Checker& ck, const json& j, ArtifactManifest& m) {
  const json* ts = ck.field(j, "", "targets", json::value_t::array);
  if (!ts) return;
  if (ts->empty()) ck.fail("targets", "no target arch");
  for (std::size_t i = 0; i < ts->size(); ++i) {
    std::string p = fmt::format("targets[{}]", i);
    const json& t = (*ts)[i];
    if (!t.is_object()) { ck.fail(p, "expected an object"); continue; }
    ck.only(t, p, {"arch", "size", "sha256"});
    ArtifactTarget tg;
    auto a = parse_arch(ck.str(t, p, "arch"));
    if (!a) { if (t.contains("arch")) ck.fail(p + ".arch", a.error().message()); }
    else tg.arch = *a;
    if (const json* sz = ck.field(t, p, "size", json::value_t::number_integer)) tg.size = sz->get<std::uint64_t>();
    tg.sha256 = ck.str(t, p, "sha256");
    if (t.contains("sha256")) ck.hex64(p + ".sha256", tg.sha256);
    if (!m.targets.empty() && tg.arch <= m.targets.back().arch)
      ck.fail(p + ".arch", "targets must be sorted by arch, each arch once");
    m.targets.push_back(tg);
  }
}

void read_artifact_toolchain(Checker& ck, const json& j, ArtifactManifest& m) {
  if (const json* tc = ck.field(j, "", "toolchain", json::value_t::object)) {
    ck.only(*tc, "toolchain", {"udfc", "compiler", "options"});
    m.udfc_version = ck.str(*tc, "toolchain", "udfc");
    m.compiler = ck.str(*tc, "toolchain", "compiler");
    if (const json* o = ck.field(*tc, "toolchain", "options", json::value_t::array)) {
      for (const auto& s : *o) {
        if (!s.is_string()) { ck.fail("toolchain.options", "expected strings"); break; }
        m.compiler_options.push_back(s.get<std::string>());
      }
    }
  }
}

}  // namespace

// Every section is read and every problem reported before the manifest is
// refused.  A filter's manifest holds none of a metric's fields.
Expected<ArtifactManifest> parse_artifact_manifest(const std::string& text, const std::string& name) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return diagnosed(DiagCode::BadManifest, name + ": the manifest is not valid JSON");
  if (!j.is_object()) return diagnosed(DiagCode::BadManifest, name + ": the manifest is not a JSON object");
  Checker ck(name);
  ArtifactManifest m;
  ck.only(j, "", {"kind", "version", "udf_kind", "abi", "payload_kind", "source", "symbol", "finalize", "element_type",
                  "accumulator_type", "order", "initial", "coarse_metric", "shape", "state_words", "monotone", "coarse_weights",
                  "captures", "targets", "toolchain", "cache_key"});
  read_artifact_header(ck, j, m);
  read_artifact_source(ck, j, m);
  if (m.kind == UdfKind::Metric) {
    read_metric_fields(ck, j, m);
  } else {
    for (const char* f : {"finalize", "element_type", "accumulator_type", "order", "initial", "coarse_metric", "shape", "state_words",
                          "monotone", "coarse_weights"})
      if (j.contains(f)) ck.fail(f, "a filter has no such field (it belongs to metrics)");
  }
  m.captures = detail::read_captures(ck, j, "");
  if (m.coarse_weights)
    if (auto problem = coarse_weights_problem(*m.coarse_weights, m.captures, m.coarse_metric))
      ck.fail("coarse_weights", *problem);
  read_artifact_targets(ck, j, m);
  read_artifact_toolchain(ck, j, m);
  m.cache_key = ck.str(j, "", "cache_key");
  if (j.contains("cache_key")) ck.hex64("cache_key", m.cache_key);
  auto errs = ck.take();
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));
  return m;
}

}  // namespace udf

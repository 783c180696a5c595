#include "udf/compile/metadata.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "udf/abi/metric_v1.h"
#include "udf/support/cmdline.h"
#include "udf/support/version.h"

namespace udf {

AccType UdfMetadata::acc_type() const { return acc ? *acc : allowed_acc_types(elem).front(); }

Expected<void> validate(const UdfMetadata& m) {
  std::vector<Diagnostic> errs;
  auto fail = [&](std::string s) { errs.push_back(Diagnostic(DiagCode::InvalidOptionValue, std::move(s))); };
  if (m.archs.empty()) errs.push_back(Diagnostic(DiagCode::Usage, "no target arch: pass --arch (for example --arch sm_90)"));
  auto allowed = allowed_acc_types(m.elem);
  if (m.acc && std::find(allowed.begin(), allowed.end(), *m.acc) == allowed.end()) {
    std::string list;
    for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(to_string(a));
    fail(fmt::format("accumulator type {} is not allowed for element type {} (allowed: {})", to_string(*m.acc),
                     to_string(m.elem), list));
  }
  if (m.captures.size() > UDF_ABI_METRIC_V1_MAX_CAPTURES)
    fail(fmt::format("{} captures declared; ABI v1 allows at most {}", m.captures.size(), UDF_ABI_METRIC_V1_MAX_CAPTURES));
  std::set<std::string> names;
  for (const auto& c : m.captures)
    if (!names.insert(c.name).second) fail(fmt::format("capture '{}' is declared twice", c.name));
  if (m.symbol && !is_c_identifier(*m.symbol)) fail(fmt::format("--symbol '{}' is not a C identifier", *m.symbol));
  if (m.finalize && !is_c_identifier(*m.finalize)) fail(fmt::format("--finalize '{}' is not a C identifier", *m.finalize));
  if (m.symbol && m.finalize && *m.symbol == *m.finalize) fail("--symbol and --finalize name the same function");
  if (m.kind == UdfKind::Filter && m.finalize) fail("--finalize does not apply to a filter (--kind filter): a filter returns bool");
  if (m.metric_abi != 1 && m.metric_abi != 2) fail(fmt::format("--abi v{} is not a metric ABI (choose v1, v2)", m.metric_abi));
  if (m.kind == UdfKind::Filter && m.metric_abi != 1)
    fail("--abi v2 / --shape do not apply to a filter (--kind filter): filters follow ivf_flat.filter.v1");
  if (m.kind == UdfKind::Metric && m.metric_abi == 1 && m.shape)
    fail("--shape is an ABI v2 setting: pass --abi v2 (or leave --abi out)");
  // A promise about the v1 accumulator: a filter has none, and a v2 update or
  // distance is no running key a scan could stop folding.
  if (m.kind == UdfKind::Filter && m.monotone)
    errs.push_back(Diagnostic(DiagCode::Usage,
                              "--monotone does not apply to a filter (--kind filter): it is a metric's setting"));
  if (m.v2() && m.monotone)
    errs.push_back(Diagnostic(DiagCode::Usage,
                              "--monotone applies to ABI v1 metrics only, not to an ABI v2 metric (--abi v2 / --shape)"));
  if (m.coarse_weights && m.kind == UdfKind::Filter)
    errs.push_back(Diagnostic(DiagCode::Usage,
                              "--coarse-weights does not apply to a filter (--kind filter): it is a metric's setting"));
  else if (m.coarse_weights)
    if (auto problem = coarse_weights_problem(*m.coarse_weights, m.captures, m.coarse_metric))
      fail("--coarse-weights " + *m.coarse_weights + ": " + *problem);
  if (m.v2() && m.shape) {
    if (auto v = validate_shape(m); !v) errs.insert(errs.end(), v.error().diagnostics().begin(), v.error().diagnostics().end());
  }
  if (!errs.empty()) return Error(ErrorKind::Usage, std::move(errs));
  return {};
}

Expected<void> validate_shape(const UdfMetadata& m) {
  std::vector<Diagnostic> errs;
  if (!m.v2() || !m.shape) return {};
  if (*m.shape == MetricShape::State && !m.finalize)
    errs.push_back(Diagnostic(DiagCode::Usage, "the state shape needs a finalize function: pass --finalize NAME",
                              {"expected: " + expected_v2_finalize_signature()}));
  if (*m.shape == MetricShape::Vector && m.finalize)
    errs.push_back(Diagnostic(DiagCode::Usage, fmt::format("--finalize '{}' does not apply to the vector shape: distance() returns the "
                                                           "distance itself", *m.finalize)));
  if (*m.shape == MetricShape::Vector && !m.initial_state.empty())
    errs.push_back(Diagnostic(DiagCode::Usage, "--initial does not apply to the vector shape: it has no state"));
  if (!errs.empty()) return Error(ErrorKind::Usage, std::move(errs));
  return {};
}

std::string abi_name(const UdfMetadata& m) {
  if (m.kind == UdfKind::Filter) return "ABI ivf_flat.filter.v1";
  if (!m.v2()) return "ABI v1";
  return m.shape ? fmt::format("ABI v2 ({} shape)", to_string(*m.shape)) : std::string("ABI v2");
}

std::string expected_v2_signature(MetricShape shape, AccType acc) {
  auto t = c_type(acc);
  if (shape == MetricShape::State) return fmt::format("void (*)({0} x, {0} y, udf_state_v2 *s, const udf_ctx_v2 *ctx)", t);
  return fmt::format("float (*)(const {0} *x, const {0} *y, uint32_t n_dims, const udf_ctx_v2 *ctx)", t);
}

std::string expected_v2_finalize_signature() { return "float (*)(const udf_state_v2 *s, const udf_ctx_v2 *ctx)"; }

void fill_manifest_metadata(ArtifactManifest& m, const UdfMetadata& meta, const std::string& symbol) {
  m.kind = meta.kind;
  m.abi_id = std::string(abi_id(meta.kind));
  m.abi_version = 1;
  if (meta.v2()) {
    m.abi_id = kMetricV2AbiId;
    m.abi_version = kMetricV2AbiVersion;
    m.shape = meta.shape;
    m.initial_state = meta.initial_state;
    // Every word until a front end finds fewer (state_words_used).
    if (meta.shape == MetricShape::State) m.state_words = static_cast<std::uint32_t>(kMetricV2StateWords);
  }
  m.symbol = symbol;
  m.captures = meta.captures;
  m.udfc_version = kUdfVersion;
  if (meta.kind == UdfKind::Filter) return;  // the metric fields keep their defaults
  m.finalize = meta.finalize;
  m.elem = meta.elem;
  m.acc = meta.acc_type();
  m.order = meta.order;
  m.initial = meta.initial.value_or(InitialValue{0.0});
  m.coarse_metric = meta.coarse_metric;
  m.monotone = meta.monotone;
  m.coarse_weights = meta.coarse_weights;
  m.captures = meta.captures;
  m.udfc_version = kUdfVersion;
}

std::string artifact_key_tag() {
  return fmt::format("udf.artifact.v{}.{}", kArtifactManifestMajor, kArtifactManifestMinor);
}

void add_metadata_key_parts(Sha256Builder& key, const UdfMetadata& meta) {
  const AccType acc = meta.acc_type();
  key.part(meta.symbol.value_or("")).part(meta.finalize.value_or("")).part(to_string(meta.elem)).part(to_string(acc));
  key.part(to_string(meta.order)).part(to_string(meta.initial.value_or(InitialValue{0.0}), acc));
  key.part(to_string(meta.coarse_metric));
  for (const auto& c : meta.captures) key.part(to_string(c));
}

void add_target_key_parts(Sha256Builder& key, const UdfMetadata& meta) {
  for (Arch a : meta.archs) key.part(arch_name(a));
  if (meta.kind == UdfKind::Filter) key.part("kind=filter");
  if (meta.v2())
    key.part("abi=v2").part(meta.shape ? to_string(*meta.shape) : "infer").part(to_string(meta.initial_state, meta.acc_type()));
  if (meta.monotone) key.part("monotone");
  if (meta.coarse_weights) key.part("coarse_weights=" + *meta.coarse_weights);
}

std::uint32_t state_words_used(std::optional<std::int64_t> update_bytes, std::optional<std::int64_t> finalize_bytes,
                               std::size_t n_initial) {
  const auto all = static_cast<std::uint32_t>(kMetricV2StateWords);
  if (!update_bytes || !finalize_bytes) return all;
  const std::int64_t bytes = std::max(*update_bytes, *finalize_bytes);
  if (bytes > 4 * std::int64_t(all)) return all;
  const auto words = static_cast<std::uint32_t>((bytes + 3) / 4);
  return std::max<std::uint32_t>({1u, words, static_cast<std::uint32_t>(n_initial)});
}

std::string expected_metric_signature(AccType acc) {
  auto t = c_type(acc);
  return fmt::format("{0} (*)({0} x, {0} y, {0} acc, const udf_ctx_v1 *ctx)", t);
}

std::string expected_filter_signature() { return "bool (*)(uint32_t query, int64_t id, const udf_ctx_v1 *ctx)"; }

std::string expected_finalize_signature(AccType acc) {
  return fmt::format("float (*)({} acc, const udf_ctx_v1 *ctx)", c_type(acc));
}

std::optional<std::string> first_line_capture_note(std::string_view source_text, const std::string& display,
                                                   const std::optional<std::string>& name, std::size_t index,
                                                   const UdfMetadata& meta) {
  const auto comment = udfc_first_line_comment(source_text);
  if (!comment) return std::nullopt;
  const auto args = split_gnu_command_line(*comment, display);
  if (!args) return std::nullopt;
  std::vector<std::string> declared;  // NAME:TYPE as the first line writes them
  for (std::size_t i = 0; i < args->size(); ++i) {
    const std::string& a = (*args)[i];
    if (a == "--capture" && i + 1 < args->size()) declared.push_back((*args)[++i]);
    else if (a.starts_with("--capture=")) declared.push_back(a.substr(10));
  }
  std::optional<std::string> spec;
  if (name) {
    for (const auto& d : declared)
      if (d.substr(0, d.find(':')) == *name) spec = d;
  } else if (meta.captures.empty() && index < declared.size()) {
    spec = declared[index];
  }
  if (!spec) return std::nullopt;
  if (display.empty() || display.front() == '<')  // -e SOURCE, standard input: no file to take flags from
    return fmt::format("declare it with --capture {}, as the source's first line does", *spec);
  return fmt::format("declare it with --capture {}; {}'s first line does: add --flags-from-first-line to take its flags",
                     *spec, display);
}

}  // namespace udf

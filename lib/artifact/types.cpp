#include "udf/artifact/types.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace udf {

std::string_view to_string(ElemType t) {
  switch (t) {
    case ElemType::F32: return "f32";
    case ElemType::F16: return "f16";
    case ElemType::I8: return "i8";
    case ElemType::U8: return "u8";
  }
  return "?";
}
std::string_view to_string(AccType t) { return t == AccType::F32 ? "f32" : "i32"; }
std::string_view to_string(Order o) { return o == Order::Min ? "min" : "max"; }
std::string_view to_string(CoarseMetric m) {
  switch (m) {
    case CoarseMetric::L2: return "l2";
    case CoarseMetric::InnerProduct: return "inner_product";
    case CoarseMetric::Cosine: return "cosine";
  }
  return "?";
}
std::string_view to_string(CaptureType t) {
  switch (t) {
    case CaptureType::F32: return "f32";
    case CaptureType::F16: return "f16";
    case CaptureType::I32: return "i32";
    case CaptureType::U8: return "u8";
  }
  return "?";
}

template <typename E, std::size_t N>
static std::optional<E> parse_enum(std::string_view s, const E (&all)[N]) {
  for (E e : all)
    if (to_string(e) == s) return e;
  return std::nullopt;
}

std::optional<ElemType> parse_elem_type(std::string_view s) {
  return parse_enum(s, {ElemType::F32, ElemType::F16, ElemType::I8, ElemType::U8});
}
std::optional<AccType> parse_acc_type(std::string_view s) { return parse_enum(s, {AccType::F32, AccType::I32}); }
std::optional<Order> parse_order(std::string_view s) { return parse_enum(s, {Order::Min, Order::Max}); }
std::optional<CoarseMetric> parse_coarse_metric(std::string_view s) {
  return parse_enum(s, {CoarseMetric::L2, CoarseMetric::InnerProduct, CoarseMetric::Cosine});
}
std::string_view to_string(UdfKind k) { return k == UdfKind::Metric ? "metric" : "filter"; }
std::optional<UdfKind> parse_udf_kind(std::string_view s) { return parse_enum(s, {UdfKind::Metric, UdfKind::Filter}); }
std::string_view to_string(MetricShape s) { return s == MetricShape::State ? "state" : "vector"; }
std::optional<MetricShape> parse_metric_shape(std::string_view s) { return parse_enum(s, {MetricShape::State, MetricShape::Vector}); }
std::string_view abi_id(UdfKind k) { return k == UdfKind::Metric ? "ivf_flat.metric.v1" : "ivf_flat.filter.v1"; }
std::optional<CaptureType> parse_capture_type(std::string_view s) {
  return parse_enum(s, {CaptureType::F32, CaptureType::F16, CaptureType::I32, CaptureType::U8});
}

std::vector<AccType> allowed_acc_types(ElemType e) {
  switch (e) {
    case ElemType::F32:
    case ElemType::F16: return {AccType::F32};
    case ElemType::I8:
    case ElemType::U8: return {AccType::I32, AccType::F32};
  }
  return {};
}

std::string_view c_type(AccType a) { return a == AccType::F32 ? "float" : "int32_t"; }

bool is_c_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

Expected<Capture> parse_capture(std::string_view spec) {
  auto colon = spec.find(':');
  if (colon == std::string_view::npos)
    return usage_error(DiagCode::InvalidOptionValue, fmt::format("bad capture '{}': expected NAME:TYPE or NAME:TYPE[]", spec));
  Capture c;
  c.name = std::string(spec.substr(0, colon));
  std::string_view type = spec.substr(colon + 1);
  if (!is_c_identifier(c.name))
    return usage_error(DiagCode::InvalidOptionValue, fmt::format("bad capture '{}': '{}' is not a C identifier", spec, c.name));
  if (type.size() >= 2 && type.substr(type.size() - 2) == "[]") {
    c.array = true;
    type.remove_suffix(2);
  }
  auto t = parse_capture_type(type);
  if (!t)
    return usage_error(DiagCode::InvalidOptionValue, fmt::format("bad capture '{}': unknown type '{}' (arrays: f32[] f16[] i32[] u8[]; scalars: f32 i32)",
                                   spec, type));
  c.type = *t;
  if (!c.array && (c.type == CaptureType::F16 || c.type == CaptureType::U8))
    return usage_error(DiagCode::InvalidOptionValue, fmt::format("bad capture '{}': scalar captures are f32 or i32; {} is allowed only as an array ({}[])",
                                   spec, type, type));
  return c;
}

std::string to_string(const Capture& c) {
  return c.name + ":" + std::string(to_string(c.type)) + (c.array ? "[]" : "");
}

std::string c_type(const Capture& c) {
  std::string_view base;
  switch (c.type) {
    case CaptureType::F32: base = "float"; break;
    case CaptureType::F16: base = "__half"; break;
    case CaptureType::I32: base = "int32_t"; break;
    case CaptureType::U8: base = "unsigned char"; break;
  }
  return c.array ? fmt::format("const {} *", base) : std::string(base);
}

const std::vector<Arch>& supported_archs() {
  static const std::vector<Arch> archs = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
  return archs;
}

std::string arch_name(Arch a) { return "sm_" + std::to_string(a); }

Expected<Arch> parse_arch(std::string_view s) {
  std::string_view digits = s;
  if (digits.starts_with("sm_")) digits.remove_prefix(3);
  else if (digits.starts_with("compute_")) digits.remove_prefix(8);
  int v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  const auto& all = supported_archs();
  if (ec != std::errc{} || p != digits.data() + digits.size() || std::find(all.begin(), all.end(), v) == all.end()) {
    std::string list;
    for (Arch a : all) list += (list.empty() ? "" : " ") + arch_name(a);
    return usage_error(DiagCode::InvalidOptionValue, fmt::format("unsupported arch '{}' (supported: {})", s, list));
  }
  return v;
}

Expected<std::vector<Arch>> parse_arch_lists(const std::vector<std::string>& lists) {
  std::vector<Arch> out;
  std::vector<Diagnostic> errs;
  for (const auto& list : lists) {
    std::size_t pos = 0;
    while (pos <= list.size()) {
      std::size_t comma = list.find(',', pos);
      if (comma == std::string::npos) comma = list.size();
      auto a = parse_arch(std::string_view(list).substr(pos, comma - pos));
      if (a) out.push_back(*a);
      else errs.insert(errs.end(), a.error().diagnostics().begin(), a.error().diagnostics().end());
      pos = comma + 1;
    }
  }
  if (!errs.empty()) return Error(ErrorKind::Usage, std::move(errs));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace udf

// Private to lib/artifact: checks a parsed JSON document field by field and
// collects every problem, each naming its JSON path.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "udf/artifact/manifest.h"
#include "udf/support/error.h"

namespace udf::detail {

using nlohmann::json;

// Collects every problem in a manifest before giving up.
class Checker {
 public:
  explicit Checker(std::string name) : name_(std::move(name)) {}
  void fail(const std::string& path, const std::string& what) {
    errs_.push_back(Diagnostic(DiagCode::BadManifest, fmt::format("{}: manifest field '{}': {}", name_, path, what)));
  }
  const json* field(const json& obj, const std::string& path, const char* key, json::value_t type) {
    auto it = obj.find(key);
    std::string p = path.empty() ? key : path + "." + key;
    if (it == obj.end()) { fail(p, "missing"); return nullptr; }
    bool ok = it->type() == type ||
              (type == json::value_t::number_integer && it->is_number_unsigned()) ||
              (type == json::value_t::number_float && it->is_number());
    if (!ok) { fail(p, fmt::format("expected {}, got {}", json(type).type_name(), it->type_name())); return nullptr; }
    return &*it;
  }
  std::string str(const json& obj, const std::string& path, const char* key) {
    const json* v = field(obj, path, key, json::value_t::string);
    return v ? v->get<std::string>() : std::string();
  }
  void only(const json& obj, const std::string& path, std::initializer_list<const char*> keys) {
    std::set<std::string> allowed(keys.begin(), keys.end());
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (!allowed.count(it.key())) fail(path.empty() ? it.key() : path + "." + it.key(), "unknown field");
  }
  template <typename E, typename P>
  E enumerated(const json& obj, const char* key, P parse, const char* choices) {
    std::string s = str(obj, "", key);
    auto v = parse(s);
    if (!v) {
      if (obj.contains(key) && obj[key].is_string()) fail(key, fmt::format("'{}' is not one of {}", s, choices));
      return E{};
    }
    return *v;
  }
  bool hex64(const std::string& path, const std::string& s) {
    if (s.size() != 64 || s.find_first_not_of("0123456789abcdef") != std::string::npos) {
      fail(path, "expected 64 lowercase hex digits");
      return false;
    }
    return true;
  }
  std::vector<Diagnostic> take() { return std::move(errs_); }

 private:
  std::string name_;
  std::vector<Diagnostic> errs_;
};


// Fields that the artifact and module manifests share, written and read the
// same way in both.

inline json initial_to_json(const InitialValue& v, AccType acc) {
  if (std::isinf(v.value)) return v.value > 0 ? "inf" : "-inf";
  if (acc == AccType::I32) return static_cast<std::int64_t>(v.value);
  return v.value;
}

inline json captures_to_json(const std::vector<Capture>& caps) {
  json out = json::array();
  for (std::size_t i = 0; i < caps.size(); ++i)
    out.push_back({{"index", i}, {"name", caps[i].name}, {"type", to_string(caps[i].type)},
                   {"kind", caps[i].array ? "array" : "scalar"}});
  return out;
}

/// One initial value at JSON path `p`.  It must suit the accumulator, as
/// udfc's parse_initial requires and the schema says: an integer in the i32
/// range for i32; an f32 value, inf or -inf for f32.
inline InitialValue read_initial_value(Checker& ck, const json& v, const std::string& p, AccType acc) {
  if (v.is_number()) {
    const double d = v.get<double>();
    if (acc == AccType::I32 && !(d == std::floor(d) && d >= std::numeric_limits<std::int32_t>::min() &&
                                 d <= std::numeric_limits<std::int32_t>::max()))
      ck.fail(p, fmt::format("{} is not an integer in the i32 range (the accumulator is i32)", v.dump()));
    else if (acc == AccType::F32 && std::fabs(d) >= std::ldexp(1.0, 128) - std::ldexp(1.0, 103))  // rounds to inf in f32 (parse_initial)
      ck.fail(p, fmt::format("{} is out of range for the f32 accumulator", v.dump()));
    else
      return InitialValue{d};
  } else if (v.is_string() && (v == "inf" || v == "-inf")) {
    if (acc == AccType::I32) ck.fail(p, fmt::format("{} is not an i32 value (the accumulator is i32)", v.dump()));
    else return InitialValue{v == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity()};
  } else {
    ck.fail(p, "expected a number, \"inf\" or \"-inf\"");
  }
  return {};
}

/// `prefix` is the JSON path of `obj` ("" at the top level): its "initial" (ABI v1).
inline InitialValue read_initial(Checker& ck, const json& obj, const std::string& prefix, AccType acc) {
  const std::string p = prefix.empty() ? "initial" : prefix + ".initial";
  auto it = obj.find("initial");
  if (it == obj.end()) {
    ck.fail(p, "missing");
    return {};
  }
  return read_initial_value(ck, *it, p, acc);
}

/// An ABI v2 metric's "initial": an array of at most 8 initial values.
inline std::vector<InitialValue> read_initial_state(Checker& ck, const json& obj, const std::string& prefix, AccType acc) {
  const std::string p = prefix.empty() ? "initial" : prefix + ".initial";
  std::vector<InitialValue> out;
  auto it = obj.find("initial");
  if (it == obj.end()) {
    ck.fail(p, "missing");
  } else if (!it->is_array()) {
    ck.fail(p, "expected an array (an ABI v2 metric's initial state)");
  } else if (it->size() > static_cast<std::size_t>(kMetricV2StateWords)) {
    ck.fail(p, fmt::format("{} values; the ABI v2 state has {} words", it->size(), kMetricV2StateWords));
  } else {
    for (std::size_t i = 0; i < it->size(); ++i) out.push_back(read_initial_value(ck, (*it)[i], fmt::format("{}[{}]", p, i), acc));
  }
  return out;
}

/// A v2 metric's "state_words" (1.3): for the state shape the state's words
/// its functions use, 1..8, at least the initial values given; absent (a 1.2
/// manifest): 8.  Any other shape has none.
inline std::uint32_t read_state_words(Checker& ck, const json& obj, const std::string& prefix, std::optional<MetricShape> shape,
                                      std::size_t n_initial) {
  const std::string p = prefix.empty() ? "state_words" : prefix + ".state_words";
  auto it = obj.find("state_words");
  if (shape != MetricShape::State) {
    if (it != obj.end()) ck.fail(p, "only a state-shaped metric has state words");
    return 0;
  }
  if (it == obj.end()) return static_cast<std::uint32_t>(kMetricV2StateWords);
  if (!it->is_number_unsigned() || it->get<std::uint64_t>() < 1 || it->get<std::uint64_t>() > static_cast<std::uint64_t>(kMetricV2StateWords)) {
    ck.fail(p, fmt::format("expected an integer 1..{}", kMetricV2StateWords));
    return static_cast<std::uint32_t>(kMetricV2StateWords);
  }
  const auto w = static_cast<std::uint32_t>(it->get<std::uint64_t>());
  if (w < n_initial) ck.fail(p, fmt::format("{} words, but the initial state gives {} values", w, n_initial));
  return w;
}

inline std::vector<Capture> read_captures(Checker& ck, const json& obj, const std::string& prefix) {
  std::vector<Capture> out;
  const std::string base = prefix.empty() ? "captures" : prefix + ".captures";
  const json* cs = ck.field(obj, prefix, "captures", json::value_t::array);
  if (!cs) return out;
  if (cs->size() > 8) ck.fail(base, fmt::format("{} captures; the ABI allows at most 8", cs->size()));
  std::set<std::string> names;
  for (std::size_t i = 0; i < cs->size(); ++i) {
    std::string p = fmt::format("{}[{}]", base, i);
    const json& c = (*cs)[i];
    if (!c.is_object()) { ck.fail(p, "expected an object"); continue; }
    ck.only(c, p, {"index", "name", "type", "kind"});
    if (const json* ix = ck.field(c, p, "index", json::value_t::number_integer); ix && ix->get<std::int64_t>() != static_cast<std::int64_t>(i))
      ck.fail(p + ".index", fmt::format("expected {}", i));
    std::string nm = ck.str(c, p, "name"), ty = ck.str(c, p, "type"), kd = ck.str(c, p, "kind");
    if (kd != "array" && kd != "scalar" && c.contains("kind")) ck.fail(p + ".kind", "expected 'array' or 'scalar'");
    auto cap = parse_capture(nm + ":" + ty + (kd == "array" ? "[]" : ""));
    if (!cap) ck.fail(p, cap.error().message());
    else {
      if (!names.insert(cap->name).second) ck.fail(p + ".name", fmt::format("duplicate capture '{}'", cap->name));
      out.push_back(*cap);
    }
  }
  return out;
}

}  // namespace udf::detail

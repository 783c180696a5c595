// Private to lib/artifact: checks a parsed JSON document field by field and
// collects every problem, each naming its JSON path.
#pragma once

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "udf/support/error.h"

namespace udf::detail {

using nlohmann::json;

// Collects every problem in a manifest before giving up.
class Checker {
 public:
  explicit Checker(std::string name) : name_(std::move(name)) {}
  void fail(const std::string& path, const std::string& what) {
    errs_.push_back(Diagnostic{{}, 0, 0, fmt::format("{}: manifest field '{}': {}", name_, path, what), {}});
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


}  // namespace udf::detail

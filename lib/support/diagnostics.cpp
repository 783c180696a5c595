#include "udf/support/diagnostics.h"

#include <map>

#include <nlohmann/json.hpp>

namespace udf {
namespace {

using nlohmann::ordered_json;

// A diagnostic names a real file (one that can be located in a SARIF log)
// unless it has no file or a placeholder like "<string>" or "<stdin>".
bool has_file(const Diagnostic& d) { return !d.file.empty() && d.file[0] != '<'; }

std::string location_prefix(const std::string& tool, const Diagnostic& d) {
  if (d.file.empty()) return tool;
  std::string s = d.file;
  if (d.line > 0) {
    s += ":" + std::to_string(d.line);
    if (d.column > 0) s += ":" + std::to_string(d.column);
  }
  return s;
}

}  // namespace

std::optional<DiagFormat> parse_diag_format(std::string_view s) {
  if (s == "text") return DiagFormat::Text;
  if (s == "json") return DiagFormat::Json;
  if (s == "sarif") return DiagFormat::Sarif;
  return std::nullopt;
}

std::string DiagnosticLog::text() const {
  std::string out;
  for (const auto& [sev, d] : entries_) {
    out += location_prefix(tool_, d) + (sev == Severity::Error ? ": error: " : ": warning: ") + d.message + " [" +
           diag_code_id(d.code) + "]\n";
    for (const auto& n : d.notes) out += (n.rfind(">>> ", 0) == 0 ? n : "note: " + n) + "\n";  // lld's >>> as is
  }
  return out;
}

std::string DiagnosticLog::json_lines() const {
  std::string out;
  for (const auto& [sev, d] : entries_) {
    ordered_json j;
    j["tool"] = tool_;
    j["severity"] = sev == Severity::Error ? "error" : "warning";
    j["code"] = diag_code_id(d.code);
    j["file"] = d.file.empty() ? ordered_json(nullptr) : ordered_json(d.file);
    j["line"] = d.line > 0 ? ordered_json(d.line) : ordered_json(nullptr);
    j["column"] = d.column > 0 ? ordered_json(d.column) : ordered_json(nullptr);
    j["message"] = d.message;
    j["notes"] = d.notes;
    out += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return out;
}

std::string path_to_uri(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string enc;
  for (unsigned char c : path) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                      c == '_' || c == '~' || c == '/';
    if (unreserved) {
      enc += static_cast<char>(c);
    } else {
      enc += '%';
      enc += hex[c >> 4];
      enc += hex[c & 15];
    }
  }
  return !path.empty() && path[0] == '/' ? "file://" + enc : enc;
}

std::string DiagnosticLog::sarif(int exit_code, const std::string& working_dir) const {
  // Rules: the codes used, in order of first use; results point at them.
  ordered_json rules = ordered_json::array();
  std::map<DiagCode, int> rule_index;
  for (const auto& e : entries_) {
    if (rule_index.count(e.diag.code)) continue;
    const DiagCodeInfo& info = diag_code_info(e.diag.code);
    rule_index[e.diag.code] = static_cast<int>(rules.size());
    ordered_json r;
    r["id"] = diag_code_id(e.diag.code);
    r["name"] = info.name;
    r["shortDescription"] = {{"text", info.summary}};
    rules.push_back(std::move(r));
  }
  ordered_json results = ordered_json::array();
  for (const auto& [sev, d] : entries_) {
    ordered_json r;
    r["ruleId"] = diag_code_id(d.code);
    r["ruleIndex"] = rule_index[d.code];
    r["level"] = sev == Severity::Error ? "error" : "warning";
    std::string text = d.message;
    if (!has_file(d) && !d.file.empty()) text = d.file + ": " + text;  // "<string>: ..."
    for (const auto& n : d.notes) text += "\n" + (n.rfind(">>> ", 0) == 0 ? n : "note: " + n);
    r["message"] = {{"text", text}};
    if (has_file(d)) {
      ordered_json art;
      art["uri"] = path_to_uri(d.file);
      if (d.file[0] != '/') art["uriBaseId"] = "%SRCROOT%";
      ordered_json phys;
      phys["artifactLocation"] = std::move(art);
      if (d.line > 0) {
        ordered_json region;
        region["startLine"] = d.line;
        if (d.column > 0) region["startColumn"] = d.column;
        phys["region"] = std::move(region);
      }
      r["locations"] = ordered_json::array({{{"physicalLocation", std::move(phys)}}});
    }
    results.push_back(std::move(r));
  }
  ordered_json driver;
  driver["name"] = tool_;
  driver["version"] = version_;
  driver["semanticVersion"] = version_;
  driver["rules"] = std::move(rules);
  ordered_json run;
  run["tool"] = {{"driver", std::move(driver)}};
  run["invocations"] = ordered_json::array({{{"executionSuccessful", exit_code == 0}, {"exitCode", exit_code}}});
  if (!working_dir.empty()) {
    std::string base = path_to_uri(working_dir);
    if (base.empty() || base.back() != '/') base += '/';
    run["originalUriBaseIds"] = {{"%SRCROOT%", {{"uri", base}}}};
  }
  run["columnKind"] = "unicodeCodePoints";
  run["results"] = std::move(results);
  ordered_json log;
  log["$schema"] = "https://json.schemastore.org/sarif-2.1.0.json";
  log["version"] = "2.1.0";
  log["runs"] = ordered_json::array({std::move(run)});
  return log.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string DiagnosticLog::render(DiagFormat f, int exit_code, const std::string& working_dir) const {
  switch (f) {
    case DiagFormat::Json: return json_lines();
    case DiagFormat::Sarif: return sarif(exit_code, working_dir);
    case DiagFormat::Text: break;
  }
  return text();
}

}  // namespace udf

// Diagnostic codes and the three renderings (text, JSON lines, SARIF).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "udf/support/diagnostics.h"

namespace udf {
namespace {

using nlohmann::json;

TEST(DiagCodes, UniqueSortedNamedAndDocumented) {
  std::set<std::string> ids, names;
  std::ifstream doc(std::string(UDF_SOURCE_DIR) + "/docs/diagnostics.md");
  ASSERT_TRUE(doc) << "docs/diagnostics.md is missing";
  std::stringstream ss;
  ss << doc.rdbuf();
  const std::string text = ss.str();
  int last = -1;
  for (const auto& c : all_diag_codes()) {
    int n = static_cast<int>(c.code);
    EXPECT_LT(last, n) << "codes must be in numeric order";
    last = n;
    std::string id = diag_code_id(c.code);
    EXPECT_TRUE(std::regex_match(id, std::regex("UDF[0-9]{4}"))) << id;
    EXPECT_TRUE(ids.insert(id).second) << id;
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    EXPECT_TRUE(std::regex_match(std::string(c.name), std::regex("[a-z0-9-]+"))) << c.name;
    EXPECT_NE(text.find("### " + id + "\n"), std::string::npos) << id << " is not documented in docs/diagnostics.md";
    EXPECT_NE(text.find("| `" + id + "` | `" + c.name + "` |"), std::string::npos) << id << " is not in the table";
    EXPECT_EQ(diag_code_info(c.code).code, c.code);
  }
  // ... and the page lists no code that does not exist.
  std::regex heading("### (UDF[0-9]{4})");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), heading); it != std::sregex_iterator(); ++it)
    EXPECT_TRUE(ids.count((*it)[1])) << (*it)[1] << " is documented but not defined";
  EXPECT_EQ(diag_code_id(DiagCode::CompileError), "UDF1001");
  EXPECT_EQ(diag_code_id(DiagCode::Usage), "UDF0001");
}

DiagnosticLog sample() {
  DiagnosticLog log("udfc", "0.1.0");
  log.add(Severity::Warning, Diagnostic(DiagCode::CompileWarning, "dir/a b.cu", 3, 7, "unused variable"));
  log.add(Severity::Error, Diagnostic(DiagCode::CompileError, "dir/a b.cu", 4, 0, "identifier \"x\" is undefined",
                                      {"declared here"}));
  log.add(Severity::Error, Diagnostic(DiagCode::UndefinedSymbol, "undefined symbol: f", {">>> referenced by a.udfa"}));
  log.add(Severity::Error, Diagnostic(DiagCode::BadSource, "<string>", 0, 0, "empty input"));
  log.add(Severity::Error, Diagnostic(DiagCode::ReadFailed, "/abs/p.cu", 0, 0, "cannot open"));
  return log;
}

TEST(DiagnosticLog, TextLikeClangAndLld) {
  EXPECT_EQ(sample().text(),
            "dir/a b.cu:3:7: warning: unused variable [UDF1002]\n"
            "dir/a b.cu:4: error: identifier \"x\" is undefined [UDF1001]\n"
            "note: declared here\n"
            "udfc: error: undefined symbol: f [UDF2001]\n"
            ">>> referenced by a.udfa\n"
            "<string>: error: empty input [UDF1003]\n"
            "/abs/p.cu: error: cannot open [UDF3001]\n");
}

TEST(DiagnosticLog, JsonLinesOneObjectEach) {
  std::istringstream in(sample().json_lines());
  std::vector<json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(json::parse(line));
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0]["severity"], "warning");
  EXPECT_EQ(rows[0]["code"], "UDF1002");
  EXPECT_EQ(rows[0]["line"], 3);
  EXPECT_EQ(rows[0]["column"], 7);
  EXPECT_TRUE(rows[1]["column"].is_null());
  EXPECT_EQ(rows[1]["notes"], json::array({"declared here"}));
  EXPECT_TRUE(rows[2]["file"].is_null());
  EXPECT_TRUE(rows[2]["line"].is_null());
  EXPECT_EQ(rows[3]["file"], "<string>");
  for (const auto& r : rows) EXPECT_EQ(r["tool"], "udfc");
}

TEST(DiagnosticLog, SarifResultsRulesAndLocations) {
  json s = json::parse(sample().sarif(1, "/work dir"));
  EXPECT_EQ(s["version"], "2.1.0");
  ASSERT_EQ(s["runs"].size(), 1u);
  const json& run = s["runs"][0];
  EXPECT_EQ(run["tool"]["driver"]["name"], "udfc");
  EXPECT_EQ(run["invocations"][0]["exitCode"], 1);
  EXPECT_EQ(run["invocations"][0]["executionSuccessful"], false);
  EXPECT_EQ(run["originalUriBaseIds"]["%SRCROOT%"]["uri"], "file:///work%20dir/");
  const json& rules = run["tool"]["driver"]["rules"];
  ASSERT_EQ(rules.size(), 5u);  // one per code used
  const json& results = run["results"];
  ASSERT_EQ(results.size(), 5u);
  for (const auto& r : results) EXPECT_EQ(rules[r["ruleIndex"].get<int>()]["id"], r["ruleId"]);
  EXPECT_EQ(results[0]["level"], "warning");
  const json& loc = results[0]["locations"][0]["physicalLocation"];
  EXPECT_EQ(loc["artifactLocation"]["uri"], "dir/a%20b.cu");
  EXPECT_EQ(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
  EXPECT_EQ(loc["region"]["startLine"], 3);
  EXPECT_EQ(loc["region"]["startColumn"], 7);
  EXPECT_FALSE(results[1]["locations"][0]["physicalLocation"]["region"].contains("startColumn"));
  EXPECT_EQ(results[1]["message"]["text"], "identifier \"x\" is undefined\nnote: declared here");
  EXPECT_FALSE(results[2].contains("locations"));
  EXPECT_EQ(results[2]["message"]["text"], "undefined symbol: f\n>>> referenced by a.udfa");
  EXPECT_FALSE(results[3].contains("locations"));  // "<string>" is no file
  EXPECT_EQ(results[3]["message"]["text"], "<string>: empty input");
  EXPECT_EQ(results[4]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "file:///abs/p.cu");
  EXPECT_FALSE(results[4]["locations"][0]["physicalLocation"]["artifactLocation"].contains("uriBaseId"));
  // An empty run is still a complete log.
  json empty = json::parse(DiagnosticLog("udf-link", "0.1.0").sarif(0, "/"));
  EXPECT_TRUE(empty["runs"][0]["results"].empty());
  EXPECT_EQ(empty["runs"][0]["invocations"][0]["executionSuccessful"], true);
}

TEST(DiagnosticLog, UriEncoding) {
  EXPECT_EQ(path_to_uri("a/b.cu"), "a/b.cu");
  EXPECT_EQ(path_to_uri("/x y/#z%.cu"), "file:///x%20y/%23z%25.cu");
  EXPECT_EQ(path_to_uri("caf\xc3\xa9.cu"), "caf%C3%A9.cu");
}

TEST(DiagFormat, Parse) {
  EXPECT_EQ(parse_diag_format("text"), DiagFormat::Text);
  EXPECT_EQ(parse_diag_format("json"), DiagFormat::Json);
  EXPECT_EQ(parse_diag_format("sarif"), DiagFormat::Sarif);
  EXPECT_FALSE(parse_diag_format("xml"));
  EXPECT_FALSE(parse_diag_format("SARIF"));
}

}  // namespace
}  // namespace udf

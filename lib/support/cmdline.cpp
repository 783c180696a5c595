#include "udf/support/cmdline.h"

#include <filesystem>
#include <string>

#include "udf/support/fs.h"

namespace udf {

Expected<std::vector<std::string>> split_gnu_command_line(std::string_view text, const std::string& source) {
  std::vector<std::string> out;
  std::string cur;
  bool in_arg = false;  // an argument has started (an empty '' counts)
  char quote = 0;
  int line = 1, quote_line = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      char n = text[++i];
      if (n == '\n') ++line;
      // A backslash-newline outside quotes joins lines, as in a shell.
      if (n == '\n' && !quote) continue;
      cur += n;
      in_arg = true;
      continue;
    }
    if (quote) {
      if (c == quote) quote = 0;
      else cur += c;
      if (c == '\n') ++line;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      quote_line = line;
      in_arg = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      if (c == '\n') ++line;
      if (in_arg) out.push_back(std::move(cur));
      cur.clear();
      in_arg = false;
      continue;
    }
    cur += c;
    in_arg = true;
  }
  if (quote)
    return Error(ErrorKind::Usage, Diagnostic(DiagCode::ResponseFile, source, quote_line, 0,
                                              std::string("unterminated ") + (quote == '"' ? "\"" : "'") + " quote"));
  if (in_arg) out.push_back(std::move(cur));
  return out;
}

std::optional<std::string_view> udfc_first_line_comment(std::string_view text) {
  const std::string_view line = text.substr(0, text.find('\n'));
  if (line.find('\0') != std::string_view::npos) return std::nullopt;
  std::size_t at = line.find_first_not_of(" \t");
  if (at == std::string_view::npos) return std::nullopt;
  if (line.substr(at, 2) == "//") at += 2;
  else if (line[at] == ';') at = line.find_first_not_of(';', at);
  else return std::nullopt;
  at = line.find_first_not_of(" \t", at);
  if (at == std::string_view::npos || line.substr(at, 5) != "udfc:") return std::nullopt;
  return line.substr(at + 5);
}

namespace {

Expected<void> expand_into(const std::vector<std::string>& args, std::vector<std::string>& out,
                           std::vector<std::string>& stack) {
  bool literal = false;
  for (const auto& a : args) {
    if (literal || a.size() < 2 || a[0] != '@') {
      if (a == "--") literal = true;
      out.push_back(a);
      continue;
    }
    const std::string path = a.substr(1);
    std::error_code ec;
    std::string id = std::filesystem::weakly_canonical(path, ec).string();
    if (ec || id.empty()) id = path;
    for (const auto& open : stack) {
      if (open != id) continue;
      std::string chain;
      for (const auto& s : stack) chain += s + " -> ";
      return usage_error(DiagCode::ResponseFile, "response file '" + path + "' includes itself: " + chain + id);
    }
    if (stack.size() >= 64) return usage_error(DiagCode::ResponseFile, "response files nested more than 64 deep at '" + path + "'");
    auto bytes = read_file(path, limits::kResponseFile);
    if (!bytes && bytes.error().diagnostics().front().code == DiagCode::FileTooLarge) return std::move(bytes.error());
    if (!bytes) return usage_error(DiagCode::ResponseFile, "cannot read response file: " + bytes.error().message());
    std::string text(bytes->begin(), bytes->end());
    if (text.find('\0') != std::string::npos)
      return usage_error(DiagCode::ResponseFile, "response file '" + path + "' contains a NUL byte (not a text file)");
    UDF_TRY(inner, split_gnu_command_line(text, path));
    stack.push_back(id);
    UDF_TRY_VOID(expand_into(inner, out, stack));
    stack.pop_back();
  }
  return {};
}

}  // namespace

Expected<std::vector<std::string>> expand_response_files(const std::vector<std::string>& args) {
  std::vector<std::string> out, stack;
  UDF_TRY_VOID(expand_into(args, out, stack));
  return out;
}

std::vector<std::string> rewrite_dependency_flags(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  bool literal = false;
  for (const auto& a : args) {
    if (literal) {
      out.push_back(a);
      continue;
    }
    if (a == "--") literal = true;
    if (a == "-MD" || a == "-MP") {
      out.push_back("-" + a);
    } else if ((a.rfind("-MF", 0) == 0 || a.rfind("-MT", 0) == 0) && a.size() >= 3) {
      out.push_back("-" + a.substr(0, 3));
      if (a.size() > 3) out.push_back(a.substr(a[3] == '=' ? 4 : 3));
    } else {
      out.push_back(a);
    }
  }
  return out;
}

}  // namespace udf

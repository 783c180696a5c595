// Errors are values: libraries return Expected<T>, tools print them once.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "udf/support/diag_codes.h"

namespace udf {

/// What went wrong, and so which exit code a tool returns for it.
enum class ErrorKind {
  Diagnosed = 1,  // bad input, reported with a diagnostic
  Usage = 2,      // bad command line
  Internal = 3,   // a bug or an unexpected library failure
};

/// One diagnostic in clang/lld style: `file:line:col: error: message` and
/// notes, with a stable code (docs/diagnostics.md).  Whether it is an error
/// or a warning depends on where it is reported (Error or a warnings list).
struct Diagnostic {
  DiagCode code;
  std::string file;  // empty: no location
  int line = 0;      // 0: unknown
  int column = 0;    // 0: unknown
  std::string message;
  std::vector<std::string> notes;

  Diagnostic(DiagCode c, std::string msg, std::vector<std::string> n = {})
      : code(c), message(std::move(msg)), notes(std::move(n)) {}
  Diagnostic(DiagCode c, std::string f, int l, int col, std::string msg, std::vector<std::string> n = {})
      : code(c), file(std::move(f)), line(l), column(col), message(std::move(msg)), notes(std::move(n)) {}
};

/// A failure carrying every problem found, not only the first.
class Error {
 public:
  Error(ErrorKind kind, DiagCode code, std::string message) : kind_(kind) { add(Diagnostic(code, std::move(message))); }
  Error(ErrorKind kind, Diagnostic d) : kind_(kind) { add(std::move(d)); }
  Error(ErrorKind kind, std::vector<Diagnostic> ds) : kind_(kind), diags_(std::move(ds)) { assert(!diags_.empty()); }

  ErrorKind kind() const { return kind_; }
  int exit_code() const { return static_cast<int>(kind_); }
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }
  const std::string& message() const { return diags_.front().message; }
  /// The raw log of the CUDA library that failed, shown under -v.
  const std::string& raw_log() const { return raw_log_; }

  Error& add(Diagnostic d) { diags_.push_back(std::move(d)); return *this; }
  Error& note(std::string n) { diags_.back().notes.push_back(std::move(n)); return *this; }
  Error& with_raw_log(std::string log) { raw_log_ = std::move(log); return *this; }
  /// Warnings reported before the failure (a compiler's), printed with it.
  Error& with_warnings(std::vector<Diagnostic> ws) { warnings_ = std::move(ws); return *this; }
  const std::vector<Diagnostic>& warnings() const { return warnings_; }
  /// Prefix every diagnostic without a location with `context: `.
  Error& context(const std::string& ctx);

  /// Every diagnostic rendered as text, `file:line:col: error: message`,
  /// notes included (lib/support/diagnostics.h renders JSON and SARIF).
  std::string render(const std::string& tool) const;

 private:
  ErrorKind kind_;
  std::vector<Diagnostic> diags_;
  std::vector<Diagnostic> warnings_;
  std::string raw_log_;
};

inline Error diagnosed(DiagCode c, std::string m) { return Error(ErrorKind::Diagnosed, c, std::move(m)); }
inline Error usage_error(std::string m) { return Error(ErrorKind::Usage, DiagCode::Usage, std::move(m)); }
inline Error usage_error(DiagCode c, std::string m) { return Error(ErrorKind::Usage, c, std::move(m)); }
inline Error internal_error(std::string m) { return Error(ErrorKind::Internal, DiagCode::Internal, std::move(m)); }
/// A CUDA library call that failed where it should not (exit 3).
inline Error library_failure(std::string m) { return Error(ErrorKind::Internal, DiagCode::LibraryFailure, std::move(m)); }

/// A value or an Error (std::expected is C++23; this is the part we need).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T v) : v_(std::move(v)) {}
  Expected(Error e) : v_(std::move(e)) {}
  explicit operator bool() const { return v_.index() == 0; }
  T& operator*() { assert(*this); return std::get<0>(v_); }
  const T& operator*() const { assert(*this); return std::get<0>(v_); }
  T* operator->() { return &**this; }
  const T* operator->() const { return &**this; }
  Error& error() { assert(!*this); return std::get<1>(v_); }
  const Error& error() const { assert(!*this); return std::get<1>(v_); }
  T take() { return std::move(**this); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error e) : e_(std::move(e)) {}
  explicit operator bool() const { return !e_.has_value(); }
  Error& error() { return *e_; }
  const Error& error() const { return *e_; }

 private:
  std::optional<Error> e_;
};

}  // namespace udf

#define UDF_TRY(var, expr)                       \
  auto var##_expected = (expr);                  \
  if (!var##_expected) return std::move(var##_expected.error()); \
  auto var = var##_expected.take()

#define UDF_TRY_VOID(expr)                       \
  do {                                           \
    auto udf_try_void_ = (expr);                 \
    if (!udf_try_void_) return std::move(udf_try_void_.error()); \
  } while (0)

// Errors inside the runtime are exceptions carrying a udf_status; the C API
// boundary (capi/api_guard.h) turns them into a return code and
// udf_last_error().
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include "udf/runtime.h"

namespace udf::rt {

class RuntimeFailure : public std::runtime_error {
 public:
  RuntimeFailure(udf_status s, const std::string& m) : std::runtime_error(m), status(s) {}
  udf_status status;
};

[[noreturn]] inline void fail(udf_status s, const std::string& m) { throw RuntimeFailure(s, m); }

/// UDF_ERROR_INVALID_ARGUMENT with message m unless ok.
inline void require(bool ok, const std::string& m) {
  if (!ok) fail(UDF_ERROR_INVALID_ARGUMENT, m);
}
inline void require(bool ok, const char* m) {
  if (!ok) fail(UDF_ERROR_INVALID_ARGUMENT, m);
}
/// The same with the message built only on failure (for checks that run on
/// every search).
template <class F>
  requires std::is_invocable_r_v<std::string, F>
inline void require(bool ok, F&& message) {
  if (!ok) fail(UDF_ERROR_INVALID_ARGUMENT, message());
}

}  // namespace udf::rt

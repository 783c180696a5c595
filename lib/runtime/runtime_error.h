// Errors inside the runtime are exceptions carrying a udf_status; the C API
// boundary (api.cpp) turns them into a return code and udf_last_error().
#pragma once

#include <stdexcept>
#include <string>

#include "udf/runtime.h"

namespace udf::rt {

class RuntimeFailure : public std::runtime_error {
 public:
  RuntimeFailure(udf_status s, const std::string& m) : std::runtime_error(m), status(s) {}
  udf_status status;
};

[[noreturn]] inline void fail(udf_status s, const std::string& m) { throw RuntimeFailure(s, m); }

}  // namespace udf::rt

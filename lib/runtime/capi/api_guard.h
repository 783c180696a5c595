// Runs a C API body: exceptions become a udf_status and udf_last_error().
#pragma once

#include <exception>
#include <string>

#include "cuda/runtime_error.h"

namespace udf::rt {

void set_last_error(const std::string& m);
udf_status to_status(std::exception_ptr e);

template <class F> udf_status guarded(F&& f) noexcept {
  try {
    f();
    return UDF_OK;
  } catch (...) {
    return to_status(std::current_exception());
  }
}

}  // namespace udf::rt

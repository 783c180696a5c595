#include "udf/cudalibs/check.h"

#include <fmt/format.h>

namespace udf {

Error library_call_failed(std::string_view library, std::string_view call, std::string_view text, int code) {
  return library_failure(fmt::format("{} {} failed: {} ({})", library, call, text, code));
}

}  // namespace udf

#include "udf/support/error.h"

#include "udf/support/diagnostics.h"

namespace udf {

Error& Error::context(const std::string& ctx) {
  for (auto& d : diags_)
    if (d.file.empty()) d.message = ctx + ": " + d.message;
  return *this;
}

std::string Error::render(const std::string& tool) const {
  DiagnosticLog log(tool, "");
  log.add_all(Severity::Error, diags_);
  return log.text();
}

}  // namespace udf

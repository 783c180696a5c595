#include "udf/support/error.h"

namespace udf {

Error& Error::context(const std::string& ctx) {
  for (auto& d : diags_)
    if (d.file.empty()) d.message = ctx + ": " + d.message;
  return *this;
}

std::string Error::render(const std::string& tool) const {
  std::string out;
  for (const auto& d : diags_) {
    if (d.file.empty()) {
      out += tool + ": error: ";
    } else {
      out += d.file;
      if (d.line > 0) {
        out += ":" + std::to_string(d.line);
        if (d.column > 0) out += ":" + std::to_string(d.column);
      }
      out += ": error: ";
    }
    out += d.message + "\n";
    for (const auto& n : d.notes) {
      // lld-style continuation lines are passed through as they are.
      if (n.rfind(">>> ", 0) == 0)
        out += n + "\n";
      else
        out += "note: " + n + "\n";
    }
  }
  return out;
}

}  // namespace udf

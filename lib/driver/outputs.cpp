#include "outputs.h"

#include <algorithm>

#include <fmt/format.h>

namespace udf::detail {

Expected<void> check_depfile_options(const DepfileOptions& depfile, bool writes_output) {
  if (!depfile.enabled && (!depfile.path.empty() || !depfile.target.empty() || depfile.phony_targets))
    return usage_error("-MF, -MT and -MP need -MD");
  if (depfile.enabled && !writes_output) return usage_error("-MD needs an output file (-o): nothing is built here");
  if (depfile.enabled && depfile.path == "-") return usage_error(DiagCode::InvalidOptionValue, "-MF -: the depfile must be a file");
  return {};
}

Expected<void> write_outputs(const std::vector<Output>& outputs, const DepfileOptions& depfile, const DependencyList& deps) {
  OutputFiles files;
  for (const auto& o : outputs) UDF_TRY_VOID(files.stage(o.path, o.bytes));
  if (depfile.enabled && !outputs.empty()) {
    const std::string& primary = outputs.front().path;
    UDF_TRY(text, make_depfile(depfile.target.empty() ? primary : depfile.target, deps.paths(), depfile.phony_targets));
    UDF_TRY_VOID(files.stage(depfile.path.empty() ? primary + ".d" : depfile.path, text));
  }
  return files.commit();
}

std::string library_report(const std::vector<LibraryStatus>& libs) {
  std::size_t w = 0;
  for (const auto& l : libs) w = std::max(w, l.name.size());
  std::string out;
  for (const auto& l : libs) {
    if (l.loaded)
      out += fmt::format("  {:<{}}  {:<12}  {}{}\n", l.name, w, l.version.empty() ? "unknown" : l.version, l.path,
                         l.origin.empty() ? std::string() : " (" + l.origin + ")");
    else
      out += fmt::format("  {:<{}}  not found: {}\n", l.name, w, l.error.empty() ? "could not be loaded" : l.error);
  }
  return out;
}

}  // namespace udf::detail

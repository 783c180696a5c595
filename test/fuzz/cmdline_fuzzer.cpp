// Response files (split_gnu_command_line, GCC/clang quoting) and the
// dependency-flag rewrite that follows them.  Accepted text gives arguments
// that, quoted again, split back to the same arguments.
#include "fuzz_util.h"
#include "udf/support/cmdline.h"

using namespace udf;

namespace {

// Single quotes; inside them a backslash takes the next character literally.
std::string quote(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) {
    if (c == '\\' || c == '\'') q += '\\';
    q += c;
  }
  return q + "'";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto args = split_gnu_command_line(fuzz::as_text(data, size), "fuzz.rsp");
  if (!args) {
    UDF_FUZZ_CHECK(!args.error().diagnostics().empty() && args.error().diagnostics().front().line >= 1);
    return 0;
  }
  std::string again;
  for (const auto& a : *args) again += quote(a) + (a.size() % 2 ? "\n" : " ");
  auto back = split_gnu_command_line(again, "again.rsp");
  UDF_FUZZ_CHECK(back && *back == *args);
  auto rewritten = rewrite_dependency_flags(*args);
  UDF_FUZZ_CHECK(rewritten.size() >= args->size() && rewritten.size() <= 2 * args->size());
  return 0;
}

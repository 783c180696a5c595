// The module manifest parser and validator (parse_module_manifest).  An
// accepted manifest renders (to_json) as JSON that parses back to the same
// manifest and renders the same again.
#include "fuzz_util.h"
#include "udf/artifact/module.h"

using namespace udf;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto m = parse_module_manifest(std::string(fuzz::as_text(data, size)), "fuzz.json");
  if (!m) {
    UDF_FUZZ_CHECK(!m.error().diagnostics().empty());
    return 0;
  }
  const std::string text = to_json(*m);
  auto back = parse_module_manifest(text, "again.json");
  UDF_FUZZ_CHECK(back);
  UDF_FUZZ_CHECK(*back == *m);
  UDF_FUZZ_CHECK(to_json(*back) == text);
  return 0;
}

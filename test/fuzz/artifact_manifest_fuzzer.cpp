// The artifact manifest parser and validator (parse_artifact_manifest).  An
// accepted manifest names C identifiers only, and renders (to_json) as
// canonical JSON that parses back to the same manifest and renders the same
// again.
#include "fuzz_util.h"
#include "udf/artifact/manifest.h"

using namespace udf;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto m = parse_artifact_manifest(std::string(fuzz::as_text(data, size)), "fuzz.json");
  if (!m) {
    UDF_FUZZ_CHECK(!m.error().diagnostics().empty());
    return 0;
  }
  // udf-link pastes these names into the entry kernels' CUDA source.
  UDF_FUZZ_CHECK(is_c_identifier(m->symbol));
  UDF_FUZZ_CHECK(!m->finalize || is_c_identifier(*m->finalize));
  for (const auto& c : m->captures) UDF_FUZZ_CHECK(is_c_identifier(c.name));
  const std::string text = to_json(*m);
  auto back = parse_artifact_manifest(text, "again.json");
  UDF_FUZZ_CHECK(back);
  UDF_FUZZ_CHECK(*back == *m);
  UDF_FUZZ_CHECK(to_json(*back) == text);
  return 0;
}

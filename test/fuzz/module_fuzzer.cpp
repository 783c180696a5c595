// The module reader (parse_module: container + module manifest + the fatbin
// against the manifest's image size and SHA-256), as it is and with the
// container's checksums recomputed.  An accepted module survives
// serialize_module / parse_module unchanged.
#include "fuzz_util.h"
#include "udf/artifact/module.h"

using namespace udf;

namespace {

void read(std::span<const std::uint8_t> bytes) {
  auto m = parse_module(bytes, "fuzz.udfm");
  if (!m) return;
  UDF_FUZZ_CHECK(m->fatbin.size() == m->manifest.image_size);
  auto back = parse_module(serialize_module(*m), "again.udfm");
  UDF_FUZZ_CHECK(back && back->manifest == m->manifest && back->fatbin == m->fatbin);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  read(bytes);
  read(fuzz::fix_container_checksums(bytes));
  return 0;
}

// The module reader (parse_module: container + module manifest + its images,
// each fatbin against the manifest's size and SHA-256 for it; one image
// before 1.7, one an entry since), as it is and with the container's
// checksums recomputed.  An accepted module has an image for every manifest
// image, every entry names one of them, and it survives serialize_module /
// parse_module unchanged.
#include "fuzz_util.h"
#include "udf/artifact/module.h"

using namespace udf;

namespace {

void read(std::span<const std::uint8_t> bytes) {
  auto m = parse_module(bytes, "fuzz.udfm");
  if (!m) return;
  UDF_FUZZ_CHECK(m->images.size() == m->manifest.images.size());
  for (std::size_t i = 0; i < m->images.size(); ++i)
    UDF_FUZZ_CHECK(m->images[i].size() == m->manifest.images[i].size);
  for (const auto& e : m->manifest.entries)
    UDF_FUZZ_CHECK(e.image >= 0 && static_cast<std::size_t>(e.image) < m->images.size());
  auto back = parse_module(serialize_module(*m), "again.udfm");
  UDF_FUZZ_CHECK(back && back->manifest == m->manifest && back->images == m->images);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  read(bytes);
  read(fuzz::fix_container_checksums(bytes));
  return 0;
}

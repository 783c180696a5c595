// The kernel-pack manifest reader (parse_kernel_pack_manifest: the text of
// share/udf/kernels/ivf_flat_v1.json, no file read).  An accepted manifest
// has a name, an ABI version, files and scan variants with valid fields.
#include "fuzz_util.h"
#include "udf/link/kernel_pack.h"

using namespace udf;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto m = parse_kernel_pack_manifest(std::span<const std::uint8_t>(data, size), "fuzz/ivf_flat_v1.json");
  if (!m) return 0;
  UDF_FUZZ_CHECK(!m->pack.name.empty() && m->pack.metric_abi_version > 0);
  UDF_FUZZ_CHECK(!m->files.empty() && !m->pack.variants.empty());
  for (const auto& f : m->files) UDF_FUZZ_CHECK(!f.path.empty() && f.path.find('/') == std::string::npos);
  for (const auto& v : m->pack.variants) UDF_FUZZ_CHECK(!v.name.empty() && v.k_max > 0);
  for (const auto& k : m->pack.kernels) UDF_FUZZ_CHECK(!k.name.empty());
  return 0;
}

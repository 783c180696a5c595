// The artifact/module container reader (read_container) and the artifact
// reader on top of it (parse_artifact: container + manifest + the targets
// against the sections).  Each input is read as it is (the checksums stop
// most mutations) and again with its checksums recomputed, which reaches the
// structural checks behind them.  An accepted container must survive a
// write/read round trip unchanged.
#include "fuzz_util.h"
#include "udf/artifact/artifact.h"
#include "udf/artifact/container.h"

using namespace udf;

namespace {

bool same(const Container& a, const Container& b) {
  if (a.kind != b.kind || a.minor != b.minor || a.manifest_json != b.manifest_json || a.payloads.size() != b.payloads.size())
    return false;
  for (std::size_t i = 0; i < a.payloads.size(); ++i)
    if (a.payloads[i].kind != b.payloads[i].kind || a.payloads[i].tag != b.payloads[i].tag ||
        a.payloads[i].data != b.payloads[i].data)
      return false;
  return true;
}

void read(std::span<const std::uint8_t> bytes) {
  for (auto kind : {ContainerKind::Artifact, ContainerKind::Module}) {
    auto c = read_container(bytes, "fuzz.udfa", kind);
    if (!c) continue;
    UDF_FUZZ_CHECK(c->kind == kind);
    Bytes again = write_container(*c);
    auto back = read_container(again, "again.udfa", kind);
    UDF_FUZZ_CHECK(back && same(*back, *c));
    UDF_FUZZ_CHECK(write_container(*back) == again);  // the writer is deterministic
  }
  auto a = parse_artifact(bytes, "fuzz.udfa");
  if (a) {
    UDF_FUZZ_CHECK(a->ltoir.size() == a->manifest.targets.size());
    auto back = parse_artifact(serialize_artifact(*a), "again.udfa");
    UDF_FUZZ_CHECK(back && back->manifest == a->manifest && back->ltoir == a->ltoir);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  read(bytes);
  read(fuzz::fix_container_checksums(bytes));
  return 0;
}

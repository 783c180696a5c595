#include "udf/artifact/artifact.h"

#include <fmt/format.h>

#include "udf/support/hash.h"

namespace udf {

Bytes serialize_artifact(Artifact a) {
  a.manifest.targets.clear();
  Container c{ContainerKind::Artifact, kContainerMinor, {}, {}};
  for (const auto& [arch, bytes] : a.ltoir) {  // std::map: ascending arch
    a.manifest.targets.push_back(ArtifactTarget{arch, bytes.size(), sha256_hex(bytes)});
    c.payloads.push_back(Section{SectionKind::LtoIr, static_cast<std::uint32_t>(arch), bytes});
  }
  c.manifest_json = to_json(a.manifest);
  return write_container(c);
}

Expected<Artifact> parse_artifact(std::span<const std::uint8_t> bytes, const std::string& name) {
  UDF_TRY(c, read_container(bytes, name, ContainerKind::Artifact));
  UDF_TRY(m, parse_artifact_manifest(c.manifest_json, name));
  Artifact a;
  std::vector<Diagnostic> errs;
  auto fail = [&](std::string msg) { errs.push_back(Diagnostic(DiagCode::BadManifest, name + ": " + std::move(msg))); };
  if (c.payloads.size() != m.targets.size())
    fail(fmt::format("the manifest lists {} targets but the file holds {} payloads", m.targets.size(), c.payloads.size()));
  for (std::size_t i = 0; i < c.payloads.size() && i < m.targets.size(); ++i) {
    const auto& s = c.payloads[i];
    const auto& t = m.targets[i];
    if (s.kind != SectionKind::LtoIr) fail(fmt::format("section {} is {}, expected lto-ir", i + 1, to_string(s.kind)));
    if (static_cast<Arch>(s.tag) != t.arch)
      fail(fmt::format("section {} is for arch {}, but targets[{}] is {}", i + 1, s.tag, i, arch_name(t.arch)));
    if (s.data.size() != t.size || sha256_hex(s.data) != t.sha256)
      fail(fmt::format("section {} does not match targets[{}] (size or sha256)", i + 1, i));
    a.ltoir[t.arch] = s.data;
  }
  if (!errs.empty()) return Error(ErrorKind::Diagnosed, std::move(errs));
  a.manifest = std::move(m);
  return a;
}

Expected<Artifact> read_artifact(const std::string& path) {
  UDF_TRY(bytes, read_file(path, limits::kArtifact));
  return parse_artifact(bytes, path);
}

}  // namespace udf

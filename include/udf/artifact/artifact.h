// A UDF artifact (.udfa): the container with an artifact manifest and one
// LTO-IR section per target arch.
#pragma once

#include <map>

#include "udf/artifact/container.h"
#include "udf/artifact/manifest.h"

namespace udf {

struct Artifact {
  ArtifactManifest manifest;
  std::map<Arch, Bytes> ltoir;  // one payload per arch in manifest.targets

  const Bytes* payload_for(Arch a) const {
    auto it = ltoir.find(a);
    return it == ltoir.end() ? nullptr : &it->second;
  }
};

/// Fills manifest.targets from `ltoir` and serializes.  Deterministic.
Bytes serialize_artifact(Artifact a);

/// Parses, validates the container and the manifest, and checks that the
/// manifest's targets and the LTO-IR sections agree (arch, size, SHA-256).
Expected<Artifact> parse_artifact(std::span<const std::uint8_t> bytes, const std::string& name);
Expected<Artifact> read_artifact(const std::string& path);

}  // namespace udf

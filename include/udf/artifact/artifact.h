// A UDF artifact (.udfa): the container with an artifact manifest and one
// LTO-IR section per target arch.
#pragma once

#include <iterator>
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
  /// The payload that links into `target`: the newest arch not newer than it
  /// (older LTO-IR links into newer archs), or null.
  const std::pair<const Arch, Bytes>* payload_linking_into(Arch target) const {
    auto it = ltoir.upper_bound(target);
    return it == ltoir.begin() ? nullptr : &*std::prev(it);
  }
};

/// Fills manifest.targets from `ltoir` and serializes.  Deterministic.
Bytes serialize_artifact(Artifact a);

/// Parses, validates the container and the manifest, and checks that the
/// manifest's targets and the LTO-IR sections agree (arch, size, SHA-256).
Expected<Artifact> parse_artifact(std::span<const std::uint8_t> bytes, const std::string& name);
Expected<Artifact> read_artifact(const std::string& path);

}  // namespace udf

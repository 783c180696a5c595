// The artifact manifest (kind "udf.artifact", version 1.0): the JSON document
// inside every .udfa file.  schemas/udf-artifact-v1.schema.json is its schema;
// this file is the one place that writes and reads it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "udf/artifact/types.h"
#include "udf/support/error.h"

namespace udf {

inline constexpr const char* kArtifactManifestKind = "udf.artifact";
inline constexpr int kArtifactManifestMajor = 1;
inline constexpr int kArtifactManifestMinor = 5;  // 1.1: udf_kind, filters; 1.2: ABI v2 metrics (shape); 1.3: state_words; 1.4: monotone; 1.5: coarse_weights

/// Where the UDF came from.
enum class SourceKind { Cuda, Mlir, LlvmIr, LtoIr };
std::string_view to_string(SourceKind k);
std::optional<SourceKind> parse_source_kind(std::string_view s);

/// One LTO-IR payload.
struct ArtifactTarget {
  Arch arch = 0;
  std::uint64_t size = 0;
  std::string sha256;  // hex of the payload bytes
  bool operator==(const ArtifactTarget&) const = default;
};

/// The accumulator's start value.  Infinities are allowed for f32 (written
/// "inf" / "-inf" in JSON); i32 accumulators take integers.
struct InitialValue {
  double value = 0.0;
  bool operator==(const InitialValue&) const = default;
};
Expected<InitialValue> parse_initial(std::string_view text, AccType acc);
std::string to_string(const InitialValue& v, AccType acc);

struct ArtifactManifest {
  // A filter (UdfKind::Filter) has no finalize, element, accumulator, order,
  // initial value, coarse metric or monotone: the JSON leaves them out and the
  // fields below keep their defaults.
  UdfKind kind = UdfKind::Metric;
  std::string abi_id = "ivf_flat.metric.v1";
  int abi_version = 1;
  SourceKind source_kind = SourceKind::Cuda;
  std::string source_name;    // file name without folders, "<string>" or "<stdin>"
  std::string source_sha256;  // of the source bytes and every header udfc resolved
  std::string symbol;
  std::optional<std::string> finalize;
  ElemType elem = ElemType::F32;
  AccType acc = AccType::F32;
  Order order = Order::Min;
  InitialValue initial;                    // ABI v1: the accumulator's start value
  CoarseMetric coarse_metric = CoarseMetric::L2;
  // The capture (an f32 array, one weight a dimension) whose declared value
  // an index build uses as its coarse weights: k-means, the assignment and
  // the coarse probe then work on the rows scaled by sqrt(w).  `udfc
  // --coarse-weights NAME`; the JSON has "coarse_weights" only when set.
  std::optional<std::string> coarse_weights;
  // ABI v2 metrics (abi_id ivf_flat.metric.v2) only: the shape, and for the
  // state shape the first words of the initial state (the rest are zero; in
  // the accumulator type).  A v2 state metric has a finalize; a vector one none.
  std::optional<MetricShape> shape;
  std::vector<InitialValue> initial_state;
  // v2 state metrics: how many of the state's 8 words the functions use (1..8):
  // udfc finds the highest word update and finalize read or write (8 when it
  // cannot tell, e.g. LTO-IR); the scan keeps only that many in shared memory.
  // 0 for any other manifest.  Absent in a 1.2 manifest: 8.
  std::uint32_t state_words = 0;
  // ABI v1 metrics only: the user's promise that the key only moves away from
  // the best as coordinates fold (min order: metric(x, y, acc, ctx) >= acc,
  // max order: <= acc, for every input; the finalize, if any, non-decreasing),
  // so that a scan may stop folding a stored vector once its partial value is
  // worse than the query's current k-th best.  `udfc --monotone`; the JSON has
  // "monotone": true only when set (absent: false, as in every manifest
  // before 1.4).
  bool monotone = false;
  std::vector<Capture> captures;
  std::vector<ArtifactTarget> targets;  // ascending arch, one per arch
  std::string udfc_version;
  std::string compiler;                  // e.g. "nvrtc 13.0"
  std::vector<std::string> compiler_options;  // arch-independent options, in order
  std::string cache_key;

  bool operator==(const ArtifactManifest&) const = default;
};

/// What is wrong with naming capture `name` as a metric's coarse weights, or
/// nothing: it must be a declared f32 array capture, and the coarse metric l2
/// or inner_product (a cosine probe normalizes the rows; weights would not
/// survive it).
std::optional<std::string> coarse_weights_problem(const std::string& name, const std::vector<Capture>& captures,
                                                  CoarseMetric coarse);

/// Parses `--initial` of an ABI v2 state metric: up to 8 comma-separated values
/// of the accumulator type (each as parse_initial), the state's first words.
Expected<std::vector<InitialValue>> parse_initial_state(std::string_view text, AccType acc);
std::string to_string(const std::vector<InitialValue>& v, AccType acc);  // "a,b,c"

/// Renders the manifest as canonical JSON (sorted keys, 2-space indent, final newline).
std::string to_json(const ArtifactManifest& m);

/// Parses and validates; every bad field is reported, each naming its JSON path.
Expected<ArtifactManifest> parse_artifact_manifest(const std::string& json, const std::string& name);

}  // namespace udf

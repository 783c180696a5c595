// What a front end needs to know about a UDF besides its code: the ABI
// metadata that every input kind shares, checked in one place.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "udf/artifact/manifest.h"
#include "udf/support/hash.h"

namespace udf {

struct UdfMetadata {
  UdfKind kind = UdfKind::Metric;       // --kind; a filter uses only symbol, captures and archs
  std::optional<std::string> symbol;    // --symbol; empty: the only extern "C" function
  std::optional<std::string> finalize;  // --finalize (metrics only)
  ElemType elem = ElemType::F32;
  std::optional<AccType> acc;           // default: allowed_acc_types(elem)[0]
  Order order = Order::Min;
  std::optional<InitialValue> initial;  // default: 0
  CoarseMetric coarse_metric = CoarseMetric::L2;
  bool monotone = false;                // --monotone (ABI v1 metrics only): ArtifactManifest::monotone
  std::optional<std::string> coarse_weights;  // --coarse-weights (metrics): ArtifactManifest::coarse_weights
  std::vector<Capture> captures;
  std::vector<Arch> archs;              // sorted, unique
  // Metric ABI: 1 (ivf_flat.metric.v1, the default) or 2 (ivf_flat.metric.v2,
  // include/udf/abi/metric_v2.h).  For v2, `shape` is the shape (--shape);
  // empty: the front end infers it from the symbol's signature (or fails
  // where the input hides it: LTO-IR).  `initial_state`: --initial of a v2
  // state metric, its first words.
  int metric_abi = 1;
  std::optional<MetricShape> shape;
  std::vector<InitialValue> initial_state;

  AccType acc_type() const;
  bool v2() const { return kind == UdfKind::Metric && metric_abi == 2; }
};

/// Checks the metadata on its own (capture count and names, acc type for the
/// element type, archs present, --monotone on an ABI v1 metric only,
/// --coarse-weights naming an f32 array capture of a metric); reports
/// every problem.
Expected<void> validate(const UdfMetadata& m);

/// Copies what every front end records the same way into a manifest:
/// symbol, finalize, types, order, initial value, coarse metric and weights,
/// monotone, captures and the udfc version.  The source, compiler and cache key stay the caller's.
void fill_manifest_metadata(ArtifactManifest& m, const UdfMetadata& meta, const std::string& symbol);

/// The first part of every artifact cache key: the manifest's format version,
/// so that a cache entry written in an older format (say without a field a
/// newer udfc derives from the source) is never handed out as a new one.
std::string artifact_key_tag();

/// The metadata's parts of an artifact cache key, for every front end, in
/// two pieces around the front end's own options: symbol, finalize, element
/// and accumulator types, order, initial value, coarse metric and captures;
/// then the archs, the kind, the ABI v2 settings, monotone and the coarse
/// weights (each of the last four only where it differs from a v1 metric's default, so that
/// keys stay as they were for what does not use them).
void add_metadata_key_parts(Sha256Builder& key, const UdfMetadata& meta);
void add_target_key_parts(Sha256Builder& key, const UdfMetadata& meta);

/// A v2 state metric's state words (ArtifactManifest::state_words) from the
/// bytes of the state its update and finalize read or write (the end of the
/// furthest access; nullopt: the front end cannot tell): at least one word
/// and the initial values given, all 8 when either is unknown.
std::uint32_t state_words_used(std::optional<std::int64_t> update_bytes, std::optional<std::int64_t> finalize_bytes,
                               std::size_t n_initial);

/// The exact C signatures ABI v1 requires, for messages.
std::string expected_metric_signature(AccType acc);
std::string expected_finalize_signature(AccType acc);
/// The exact C signature ABI ivf_flat.filter.v1 requires, for messages.
std::string expected_filter_signature();
/// The exact C signatures of ABI v2 (`shape`'s functions), for messages.
std::string expected_v2_signature(MetricShape shape, AccType acc);
std::string expected_v2_finalize_signature();
/// "ABI v1" / "ABI v2 (state)" ..., for messages.
std::string abi_name(const UdfMetadata& m);
/// Checks what only the shape decides (finalize present for state, absent
/// for vector; no initial state for vector), once the shape is known.
Expected<void> validate_shape(const UdfMetadata& m);

/// The note for a capture the UDF reads but no --capture declares, when the
/// source's first line (`// udfc: FLAGS`, udfc --flags-from-first-line)
/// declares it: `name` (CUDA), or else the `index`-th capture the first line
/// declares (IR, whose captures have no names; only when the command line
/// declared none).  "declare it with --capture weights:f32[]; wl2.cu's first
/// line does: add --flags-from-first-line to take its flags".  None when the
/// first line does not declare it.  `display`: the source's name.
std::optional<std::string> first_line_capture_note(std::string_view source_text, const std::string& display,
                                                   const std::optional<std::string>& name, std::size_t index,
                                                   const UdfMetadata& meta);

/// "metric" or "filter" with the ABI's name, for messages: "the metric", "the filter".
inline const char* role_name(const UdfMetadata& m) { return m.kind == UdfKind::Filter ? "filter" : "metric"; }

}  // namespace udf

// A linked UDF module (.udfm): the container with a module manifest (kind
// "udf.module"; schemas/udf-module-v1.schema.json) and its images: fatbins
// holding a cubin per arch each (one image before 1.7; since 1.7 one an entry,
// so that each entry is linked and cached on its own).  This file owns that
// format.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "udf/artifact/container.h"
#include "udf/artifact/manifest.h"

namespace udf {

inline constexpr const char* kModuleManifestKind = "udf.module";
inline constexpr int kModuleManifestMajor = 1;
// 1.1: filters; 1.2: ABI v2 metrics (shape); 1.3: state_words; 1.4: scan
// entries' launch.tail_merge, and scan entries take the 320-byte
// udf_ivf_scan_args_v1 (a runtime that passes fewer bytes must not load them);
// 1.5: launch.query_bound, and the 328-byte udf_ivf_scan_args_v1; 1.6:
// launch.prune; 1.7: images[] (one container section each) and
// entries[].image in place of the one image; 1.8: scan entries' launch.
// capture_align (their metric's array captures must start on that many
// bytes: ivf_flat_v1.h, CAPTURE ALIGNMENT; a runtime that does not see to it
// must not load them); 1.9: rows entries (launch.rows: exact search and
// refine; a runtime that would take them for index scans must not load them);
// 1.10: the v1 and state rows entries' launch.smem_constant, their row stage
// (a runtime that does not give it must not load them); 1.11: their
// launch.smem_copied_stage, the copied row stage (a runtime that reads 1.10
// never asks for it, and the entries run as before; the cubins for sm_80 and
// newer copy, any other stages through registers); 1.12: the v1 f32 rows
// entries' launch.tile_queries, the item size of their tiled fold (a runtime
// that reads 1.11 never gives such items the copied stage, and the entries
// fold them as before); 1.13: artifacts[].coarse_weights, the capture whose
// declared value a build uses as its coarse weights (a runtime that reads 1.12
// builds with the weights it is given, as before).
inline constexpr int kModuleManifestMinor = 13;
/// launch.capture_align's one value (1.8): UDF_IVF_SCAN_V1_CAPTURE_ALIGN.
inline constexpr std::int64_t kModuleCaptureAlign = 16;
/// The first minor version with images[] and entries[].image.
inline constexpr int kModuleImagesMinor = 7;

/// launch.sort_capacity's values for an entry (a scan or a merge) of k bucket
/// `k_max`, ascending: the rule of kernel pack 1.8, UDF_IVF_V1_SORT_CAPACITY
/// (ivf_flat_v1.h), and the rule of the packs before it, 2 * max(k_max, 128),
/// which modules linked with them keep (one value where the two agree, above
/// k_max 32).  None for a k_max outside 1..INT32_MAX.  The runtime sizes a
/// scan's shared memory with the entry's value, so the module reader and the
/// kernel pack reader refuse any other.
std::vector<std::int64_t> sort_capacities_for(std::int64_t k_max);
/// What is wrong with a launch's sort_capacity ("300 is not 128 or 256 (k_max
/// 32)"): a value sort_capacities_for(its k_max) lacks, or one without a
/// k_max; none when it is right or absent.
std::optional<std::string> sort_capacity_problem(const std::map<std::string, std::int64_t>& launch);

/// What the module keeps of each linked artifact: everything the runtime
/// needs to bind captures and interpret results.
struct ModuleArtifact {
  std::string source_name;
  std::string symbol;
  std::optional<std::string> finalize;
  ElemType elem = ElemType::F32;
  AccType acc = AccType::F32;
  Order order = Order::Min;
  InitialValue initial;
  CoarseMetric coarse_metric = CoarseMetric::L2;
  std::optional<std::string> coarse_weights;  // ArtifactManifest::coarse_weights (1.13)
  std::vector<Capture> captures;
  std::string cache_key;
  std::optional<MetricShape> shape;         // ABI ivf_flat.metric.v2 metrics only (1.2)
  std::vector<InitialValue> initial_state;  // v2 state shape: the state's first words
  std::uint32_t state_words = 0;            // v2 state shape: words used, 1..8 (ArtifactManifest)
  bool operator==(const ModuleArtifact&) const = default;
};

/// What the module keeps of each linked filter (ivf_flat.filter.v1).
struct ModuleFilter {
  std::string source_name;
  std::string symbol;  // the filter's name
  std::vector<Capture> captures;
  std::string cache_key;
  bool operator==(const ModuleFilter&) const = default;
};

/// One code section: a fatbin with a cubin for every arch of the module.
struct ModuleImage {
  std::uint64_t size = 0;
  std::string sha256;
  bool operator==(const ModuleImage&) const = default;
};

/// One kernel entry point, in every cubin of its image.
struct ModuleEntry {
  std::string name;                 // the ELF symbol / cuLibraryGetKernel name
  std::optional<int> artifact;      // index into artifacts (the metric); none for UDF-independent kernels
  std::optional<int> filter;        // index into filters: a scan that applies that filter; none: unfiltered
  std::string variant;              // the kernel pack variant or kernel it instantiates
  std::map<std::string, std::int64_t> launch;  // launch parameters from the kernel pack
  int image = 0;                    // index into images (1.7; 0, the only one, before)
  bool operator==(const ModuleEntry&) const = default;
};

struct ModuleManifest {
  int version_minor = kModuleManifestMinor;  // as read (and written: a new manifest is the current version)
  std::string abi_id = "ivf_flat.metric.v1";
  int abi_version = 1;
  std::string kernel_pack_name;
  std::string kernel_pack_sha256;
  std::vector<Arch> archs;
  std::vector<ModuleImage> images;        // one per code section, in section order
  std::vector<ModuleArtifact> artifacts;  // the metrics
  std::vector<ModuleFilter> filters;      // the filters (1.1; none in a 1.0 module)
  std::vector<ModuleEntry> entries;
  std::string udf_link_version;
  std::string linker;                      // "nvjitlink 13.0"
  std::string packager;                    // "nvfatbin 13.0" or "fatbinary"
  std::vector<std::string> link_options;   // arch-independent nvJitLink options
  std::string cache_key;
  bool operator==(const ModuleManifest&) const = default;
};

struct Module {
  ModuleManifest manifest;
  std::vector<Bytes> images;  // the fatbins manifest.images describes, in order
};

std::string to_json(const ModuleManifest& m);
Expected<ModuleManifest> parse_module_manifest(const std::string& json, const std::string& name);

/// Fills manifest.images from the images and serializes.  Deterministic.  A
/// manifest read as 1.6 or older (one image, no entries[].image) is written
/// in that form again.
Bytes serialize_module(Module m);
Expected<Module> parse_module(std::span<const std::uint8_t> bytes, const std::string& name);
Expected<Module> read_module(const std::string& path);

ModuleArtifact module_artifact_from(const ArtifactManifest& m);
ModuleFilter module_filter_from(const ArtifactManifest& m);

}  // namespace udf

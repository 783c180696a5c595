// The link pipeline behind udf-link: artifacts + kernel pack -> nvJitLink
// (-lto) per arch -> checked cubins -> nvFatbin -> module.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "udf/artifact/artifact.h"
#include "udf/artifact/module.h"
#include "udf/link/kernel_pack.h"

namespace udf {

struct LinkArtifact {
  std::string name;  // the path as given, for diagnostics
  Artifact artifact;
  std::string file_sha256;
};

enum class EmitKind { Module, Fatbin, Cubin };

struct LinkPlanArch {
  Arch arch;
  std::vector<std::string> options;                 // nvJitLink options
  std::vector<std::pair<std::string, Arch>> inputs;  // (input name, arch of the LTO-IR used)
};

struct LinkPlan {
  std::vector<LinkPlanArch> archs;
  std::vector<ModuleEntry> entries;   // every kernel entry expected in each cubin
  std::vector<std::pair<int, int>> pairs;  // (metric input, filter input) given filtered entries
  std::string entry_source;           // the generated entry kernels (CUDA C++)
  std::vector<std::string> wrapper_nvrtc_options;
  std::string packager;               // "nvfatbin 13.0" / fatbinary / none
};

struct LinkTiming {
  double entries_compile_s = 0;
  std::vector<std::pair<Arch, double>> link_s;
  double fatbin_s = 0;
};

struct LinkOutput {
  Module module;
  std::vector<std::pair<Arch, Bytes>> cubins;  // for --save-temps and --emit cubin
  std::vector<Diagnostic> warnings;
  LinkTiming timing;
  std::string info_log;
};

/// Checks every artifact against the pack and the archs (ABI, element type,
/// variants, payload per arch, clashing symbols) and builds the plan.
/// Reports every problem found.  Inputs are metrics and filters; every
/// metric gets unfiltered entries, and filtered ones for each `pairs` entry
/// "METRIC:FILTER" (symbols) -- with no pairs, for every metric x filter.
Expected<LinkPlan> plan_link(const std::vector<LinkArtifact>& artifacts, const KernelPack& pack,
                             const std::vector<Arch>& archs, const std::vector<std::string>& pairs = {});

/// Runs the plan.  `emit` decides whether a fatbin is made.
Expected<LinkOutput> run_link(const std::vector<LinkArtifact>& artifacts, const KernelPack& pack, const LinkPlan& plan,
                              EmitKind emit);

/// The key of a link's output: tool and library versions, pack, input
/// artifacts' bytes, archs, emit kind and the --pair selection.
std::string link_cache_key(const std::vector<LinkArtifact>& artifacts, const KernelPack& pack,
                           const std::vector<Arch>& archs, EmitKind emit, const std::vector<std::string>& pairs = {});

/// The entry kernel name for one metric and one variant.
std::string entry_name(const std::string& symbol, const PackVariant& v);
/// The entry kernel name for one metric with one filter and one variant.
std::string filtered_entry_name(const std::string& metric, const std::string& filter, const PackVariant& v);

}  // namespace udf

// The prebuilt IVF-Flat kernel pack: LTO-IR files plus their manifest (kind
// "udf.kernel-pack"; schemas/udf-kernel-pack-v1.schema.json), found next to
// the tools in share/udf/kernels/.  Each scan variant and kernel names the
// file that holds it (since pack 1.7 one file per family of variants), and
// a variant may name more of newer archs (1.13): a link reads and passes
// nvJitLink only the files its entries use for its arch.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "udf/artifact/types.h"
#include "udf/support/error.h"
#include "udf/support/fs.h"

namespace udf {

class Cache;

struct PackVariant {
  std::string name;  // device function udf-link's entry kernels call
  std::string file;  // the pack file (KernelPack::File::name) that holds it
  // Files that hold it built for newer archs than file's (pack 1.13: the v1
  // and state rows variants' copied stage, compiled for compute_80 only): a
  // link for an arch takes the newest of them that links into it, else file.
  std::vector<std::string> arch_files;
  std::optional<MetricShape> shape;  // ABI ivf_flat.metric.v2 variants: the shape; none: ABI v1
  ElemType elem;
  AccType acc;
  Order order;
  int k_max = 0;
  std::map<std::string, std::int64_t> launch;
  // A variant for monotone metrics only (pack minor 6; ivf_flat_v1.h, PRUNE).
  bool prunes() const {
    auto it = launch.find("prune");
    return it != launch.end() && it->second == 1;
  }
  // A prune variant that prunes filtered launches too (pack minor 16).
  bool prunes_filtered() const {
    auto it = launch.find("filtered_prune");
    return prunes() && it != launch.end() && it->second == 1;
  }
  // A rows twin of a plain variant (pack minor 9; ivf_flat_v1.h, ROWS LAYOUT):
  // exact search and refine.
  bool rows() const {
    auto it = launch.find("rows");
    return it != launch.end() && it->second == 1;
  }
};

struct PackKernel {
  std::string name;  // a UDF-independent __global__ kernel
  std::string file;  // the pack file that holds it
  std::optional<Order> order;  // kernels for one ordering only (the merges); none: for every module
  std::map<std::string, std::int64_t> launch;
};

struct KernelPack {
  std::string name;             // "ivf_flat_v1"
  std::string dir;
  std::string manifest_sha256;  // identifies the pack in module manifests and cache keys
  std::string metric_abi_id;
  int metric_abi_version = 0;
  std::string filter_abi_id;  // "ivf_flat.filter.v1"; empty: the pack's scans take no filter
  bool metric_v2 = false;     // the pack has ABI ivf_flat.metric.v2 scan variants (pack 1.2)
  int filter_abi_version = 0;
  bool remembered = false;    // the manifest was read back from the memo cache, not parsed (load_kernel_pack)
  struct File {
    std::string name;
    Arch arch;
    Bytes ltoir;             // empty until read (load_kernel_pack with files, or read_kernel_pack_files)
    bool metric_v2 = false;  // holds ABI v2 scans ("contents": "metric_v2"); else v1 scans or kernels
    std::uint64_t size = 0;  // as the manifest says
    std::string sha256;
    bool read = false;
    bool present = true;     // in the folder: a slim copy of a pack may leave files out (plan_link names them)
  };
  std::vector<File> files;
  std::vector<PackVariant> variants;
  std::vector<PackKernel> kernels;
};

/// $UDF_KERNEL_PACK_DIR, else <folder of the running executable>/../share/udf/kernels.
std::string default_kernel_pack_dir();

/// The pack's manifest, in its folder.
inline constexpr const char* kKernelPackManifest = "ivf_flat_v1.json";

/// A file the manifest lists, before it is read.
struct KernelPackFileEntry {
  std::string path;  // a plain file name in the pack's folder
  Arch arch;
  std::uint64_t size = 0;
  std::string sha256;
  bool metric_v2 = false;
};

/// The manifest alone: the pack without its files' bytes (`pack.files` and
/// `pack.dir` empty) and the files it lists.
struct KernelPackManifest {
  KernelPack pack;
  std::vector<KernelPackFileEntry> files;
};

/// Parses and checks the manifest's text (kind, version, name, ABI, files,
/// scan variants, kernels); reads no file.  `path` names it in errors.
Expected<KernelPackManifest> parse_kernel_pack_manifest(std::span<const std::uint8_t> text, const std::string& path);

/// Loads and checks the pack: the manifest (parse_kernel_pack_manifest),
/// then, with `read_files`, the bytes, size and SHA-256 of each file present.
/// Without, the files are listed (name, arch, size, SHA-256) but not read: a
/// cache hit needs only the manifest; read_kernel_pack_files reads what a
/// link needs.  memo: a cache that remembers the parsed manifest (its
/// SHA-256 included) by the file's identity (file_identity: device, inode,
/// size, times), so that a cache hit neither reads nor parses it; or NULL.
Expected<KernelPack> load_kernel_pack(const std::string& dir, bool read_files = true, Cache* memo = nullptr);

/// Reads and checks (size and SHA-256 against the manifest) the files named
/// in `names` that are not read yet; every file present when `names` is null.
/// A named file absent from the folder is an error.
Expected<void> read_kernel_pack_files(KernelPack& pack, const std::vector<std::string>* names = nullptr);

/// The listed file called `name`; null when the manifest lists none.
const KernelPack::File* pack_file(const KernelPack& pack, const std::string& name);

}  // namespace udf

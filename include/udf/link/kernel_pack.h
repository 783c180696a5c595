// The prebuilt IVF-Flat kernel pack: LTO-IR plus its manifest (kind
// "udf.kernel-pack"; schemas/udf-kernel-pack-v1.schema.json), found next to
// the tools in share/udf/kernels/.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "udf/artifact/types.h"
#include "udf/support/error.h"
#include "udf/support/fs.h"

namespace udf {

struct PackVariant {
  std::string name;  // device function udf-link's entry kernels call
  ElemType elem;
  AccType acc;
  Order order;
  int k_max = 0;
  std::map<std::string, std::int64_t> launch;
};

struct PackKernel {
  std::string name;  // a UDF-independent __global__ kernel
  std::optional<Order> order;  // kernels for one ordering only (the merges); none: for every module
  std::map<std::string, std::int64_t> launch;
};

struct KernelPack {
  std::string name;             // "ivf_flat_v1"
  std::string dir;
  std::string manifest_sha256;  // identifies the pack in module manifests and cache keys
  std::string metric_abi_id;
  int metric_abi_version = 0;
  struct File {
    std::string name;
    Arch arch;
    Bytes ltoir;
  };
  std::vector<File> files;
  std::vector<PackVariant> variants;
  std::vector<PackKernel> kernels;
};

/// $UDF_KERNEL_PACK_DIR, else <folder of the running executable>/../share/udf/kernels.
std::string default_kernel_pack_dir();

/// The pack's manifest, in its folder.
inline constexpr const char* kKernelPackManifest = "ivf_flat_v1.json";

/// Loads and checks the pack: manifest fields, each file's size and SHA-256.
Expected<KernelPack> load_kernel_pack(const std::string& dir);

}  // namespace udf

// The C++ side of udf_module_link (link_api.cpp), testable without a GPU:
// artifacts -> a serialized module for one arch, through lib/link and the
// shared on-disk cache (the same entry udf-link writes for those artifacts
// and that arch).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "udf/artifact/types.h"
#include "udf/runtime.h"
#include "udf/support/error.h"
#include "udf/support/fs.h"

namespace udf::rt {

struct ArtifactInput {
  std::string path;   // read from here when not empty
  Bytes bytes;        // else these bytes
  std::string name;   // for messages
};

struct LinkModuleOptions {
  std::optional<std::string> kernel_pack_dir;  // default: runtime_kernel_pack_dir()
  std::optional<std::string> cache_dir;        // default: Cache::open's ($UDF_CACHE_DIR, ...)
  bool no_cache = false;
};

struct LinkedModule {
  Bytes bytes;  // a .udfm
  std::string cache_key;
  bool cache_hit = false;
  std::vector<std::string> warnings;
};

/// Where a link failed, which decides the udf_status.
enum class LinkStage { Args, Read, Parse, KernelPack, Plan, Link };
udf_status link_stage_status(LinkStage stage);
std::string link_error_text(const Error& e);

/// $UDF_KERNEL_PACK_DIR, else <folder of libudf_runtime.so>/../share/udf/kernels
/// when it exists, else default_kernel_pack_dir() (next to the executable).
std::string runtime_kernel_pack_dir();

Expected<LinkedModule> link_module_for_arch(const std::vector<ArtifactInput>& inputs, Arch arch,
                                            const LinkModuleOptions& opt, LinkStage* stage = nullptr);

}  // namespace udf::rt

// A fatbin packed from cubins: with nvFatbin (udf/cudalibs/nvfatbin.h), or
// the toolkit's fatbinary tool when nvFatbin cannot be loaded.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "udf/artifact/types.h"
#include "udf/support/fs.h"

namespace udf {

struct FatbinImage {
  Arch arch;
  std::string identifier;  // shown by cuobjdump; e.g. "l2+ivf_flat_v1.sm_90"
  std::span<const std::uint8_t> cubin;
};

struct FatbinResult {
  Bytes fatbin;
  std::string tool;  // "nvfatbin 13.0 (/path/libnvfatbin.so.13)" or "fatbinary (/path)"
  std::vector<std::string> warnings;
};

/// Packs cubins (one per arch) into a fatbin with nvFatbin.  If nvFatbin
/// cannot be loaded and `allow_fatbinary_fallback`, uses the toolkit's
/// `fatbinary` tool and says so in `warnings`.
Expected<FatbinResult> make_fatbin(const std::vector<FatbinImage>& images, bool allow_fatbinary_fallback = true);

}  // namespace udf

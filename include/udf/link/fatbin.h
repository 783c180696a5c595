// nvFatbin, loaded with dlopen: the library ships on PyPI (nvidia-nvfatbin),
// not with every toolkit, so a missing library is a clear error, not a loader
// failure at start-up.
#pragma once

#include "udf/support/dynlib.h"

#include <span>
#include <string>
#include <vector>

#include "udf/artifact/types.h"
#include "udf/support/fs.h"

namespace udf {

class Cache;

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

/// Where nvFatbin was found, or why not; "nvfatbin 13.0" style version.
struct NvFatbinInfo {
  bool available = false;
  std::string path;
  std::string version;
  std::string why_not;
};
NvFatbinInfo nvfatbin_info();

/// nvfatbin_info().version when nvFatbin is available, else empty.  With
/// `memo`, remembered by the library file's identity (remembered_library_version):
/// asked again, it loads no nvFatbin (a cache hit packs nothing).
std::string nvfatbin_version(Cache* memo = nullptr);

/// The same for --version: path, where it came from (udf/support/cuda_libs.h), "13.0".
LibraryStatus nvfatbin_library_status();

}  // namespace udf

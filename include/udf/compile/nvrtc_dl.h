// NVRTC as lib/compile/nvrtc_dl.cpp loads it (dlopen on first use): what
// udfc and udf-link (its entry kernels) need to know of the library without
// compiling anything.  Target udf_nvrtc_dl.
#pragma once

#include <string>

#include "udf/support/dynlib.h"

namespace udf {

/// Identifies NVRTC for cache keys without loading it (a stat of the file
/// lib/compile/nvrtc_dl.cpp would load; its version when it is found by
/// soname only).
std::string nvrtc_identity();

/// Where NVRTC was loaded from and its version, or why it could not be (--version).
LibraryStatus nvrtc_library_status();

}  // namespace udf

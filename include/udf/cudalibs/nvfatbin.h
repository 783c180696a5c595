// nvFatbin, loaded with dlopen on first use (udf/cudalibs/dl_api.h): the
// library ships on PyPI (nvidia-nvfatbin), not with every toolkit, so a
// missing library is a clear error, not a loader failure at start-up.  It is
// found as udf/support/cuda_libs.h says.  Unlike NVRTC's, its functions are
// used all or none: without one of them, nvFatbin is not used at all
// (udf/link/fatbin.h then falls back to the fatbinary tool).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "udf/cudalibs/dl_api.h"
#include "udf/support/dynlib.h"
#include "udf/support/error.h"

// The nvFatbin C API (nvFatbin.h, CUDA 12.4+), declared here so that no
// nvFatbin header is needed to build: its handle is an opaque pointer and its
// result an int (NVFATBIN_SUCCESS = 0).
extern "C" {
typedef struct _nvFatbinHandle* nvFatbinHandle;
typedef int nvFatbinResult;
nvFatbinResult nvFatbinCreate(nvFatbinHandle* handle, const char** options, size_t n_options);
nvFatbinResult nvFatbinAddCubin(nvFatbinHandle handle, const void* code, size_t size, const char* arch,
                                const char* identifier);
nvFatbinResult nvFatbinSize(nvFatbinHandle handle, size_t* size);
nvFatbinResult nvFatbinGet(nvFatbinHandle handle, void* buffer);
nvFatbinResult nvFatbinDestroy(nvFatbinHandle* handle);
const char* nvFatbinGetErrorString(nvFatbinResult result);
nvFatbinResult nvFatbinVersion(unsigned int* major, unsigned int* minor);
}

// The nvFatbin functions udf calls.
#define UDF_NVFATBIN_FUNCTIONS(X)                                                                        \
  X(nvFatbinCreate) X(nvFatbinAddCubin) X(nvFatbinSize) X(nvFatbinGet) X(nvFatbinDestroy)               \
  X(nvFatbinGetErrorString) X(nvFatbinVersion)

namespace udf {

class Cache;

struct NvFatbinApi {
  UDF_DL_FUNCTIONS(UDF_NVFATBIN_FUNCTIONS)
};

/// nvFatbin's functions, loaded on first use; use them only when
/// nvfatbin_why_not() is empty.
const LoadedFunctions<NvFatbinApi>& nvfatbin();

/// Why nvFatbin cannot be used (it did not load, or lacks part of its API);
/// empty when it can.
const std::string& nvfatbin_why_not();

/// "nvFatbin <call> failed: <nvFatbinGetErrorString> (<code>)".
Error nvfatbin_failure(nvFatbinResult r, std::string_view call);

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

// Where udf finds the CUDA libraries it loads with dlopen (NVRTC, nvJitLink,
// libNVVM, nvFatbin) and the files that belong to them (the headers NVRTC
// includes, libdevice): one search order for every tool and for
// libudf_runtime, owned here.  docs/python.md ("CUDA libraries") tells users.
//
// For each library, in order:
//   1. $UDF_<NAME>_LIBRARY (UDF_NVRTC_LIBRARY, UDF_NVJITLINK_LIBRARY,
//      UDF_NVVM_LIBRARY, UDF_NVFATBIN_LIBRARY): when set, the only candidate,
//      so that a wrong path is reported rather than papered over;
//   2. the Python environment udf is installed in: when this binary lives in
//      the `udf` Python package (site-packages/udf/{bin,lib}), NVIDIA's CUDA 13
//      wheels next to it (site-packages/nvidia/cu13/lib: nvidia-cuda-nvrtc,
//      nvidia-nvjitlink, nvidia-nvvm, nvidia-nvfatbin); then the nvidia/cu13
//      folders in $UDF_CUDA_WHEEL_DIRS, which the Python package sets to the
//      ones its interpreter sees elsewhere on sys.path (python/_udf_console.py);
//   3. the file found when udf was configured (usually the CUDA toolkit's),
//      then the toolkit at $CUDA_HOME, $CUDA_PATH and /usr/local/cuda (lib64,
//      and nvvm/lib64 for libNVVM);
//   4. the loader path: the soname (LD_LIBRARY_PATH, ld.so.cache).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "udf/support/dynlib.h"

namespace udf {

enum class CudaLibrary { Nvrtc, NvJitLink, Nvvm, NvFatbin };

struct CudaLibraryCandidate {
  std::string path;    // an absolute path, or the soname (the loader path)
  std::string origin;  // "$UDF_NVRTC_LIBRARY", "python env", "found at build time", "CUDA toolkit", "loader path"
};

/// The candidates in search order (see above), found once per process; absolute paths only
/// where the file exists, except an explicit $UDF_<NAME>_LIBRARY, which is kept so that its
/// failure is reported.
const std::vector<CudaLibraryCandidate>& cuda_library_candidates(CudaLibrary lib);

/// The library, loaded on first use (once per process) from the first candidate that loads.
const DynamicLibrary& cuda_library(CudaLibrary lib);

/// Identifies the library for cache keys without loading it: the identity (real path, size,
/// mtime) of the first candidate file, the one cuda_library() loads; empty when the library
/// is found by soname only (the caller then asks the loaded library its version).
std::string cuda_library_file_identity(CudaLibrary lib);

class Cache;

/// The version string query() gives (which loads the library, a large part of a udfc cache
/// hit's cost), remembered in `cache` under the library file's identity (real path, size,
/// mtime) so that later processes with the same file need no load.  query() runs when the
/// cache is disabled, the file is found by soname only, or nothing is remembered yet; its
/// answer is remembered only when the file that loaded is the one identified (and the answer
/// is no "... unknown").  Cache errors are misses: this never fails.
std::string remembered_library_version(CudaLibrary lib, Cache& cache, const std::function<std::string()>& query);

/// A LibraryStatus for --version: where it was loaded from (path and origin) or why not;
/// `version` is left for the caller, which knows the library's API.
LibraryStatus cuda_library_status(CudaLibrary lib);

/// The folder NVRTC is given last with -I, for the toolkit headers a UDF may include
/// (cuda_fp16.h): the Python environment's nvidia/cu13/include (nvidia-cuda-runtime), else
/// the toolkit's include folder; the first that holds cuda_fp16.h, else the toolkit's.
/// Empty when udf was configured without one and no wheel provides it.
std::string cuda_include_dir();

/// libdevice.10.bc, which the IR front ends link: the one beside the libNVVM that loads
/// (the wheel's nvidia/cu13/nvvm/libdevice, the toolkit's nvvm/libdevice), else the file
/// found at configure time.  Looks without loading libNVVM when `load` is false (depfiles).
std::string libdevice_path(bool load = true);

/// The nvidia/cu13 folders of NVIDIA's wheels for this binary (item 2 above): the one beside
/// site-packages/udf when the binary lives in the udf package, then $UDF_CUDA_WHEEL_DIRS.
std::vector<std::string> cuda_wheel_dirs();

}  // namespace udf

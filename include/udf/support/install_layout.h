// Where udf's files are relative to the running binary, so that a build tree
// and an install tree (moved anywhere) work alike: the tools in BIN, the
// libraries in LIB, data (kernel pack, built-in metrics, schemas) in DATA.
// The relative paths come from the install layout (GNUInstallDirs) at
// configure time; a build tree has the same shape (bin/, lib/, share/udf/).
#pragma once

#include <string>
#include <vector>

namespace udf {

/// The folder holding the running executable (/proc/self/exe); empty if unknown.
std::string executable_dir();

/// The shared object (its real path) that contains `address` (dladdr), and
/// its folder: libudf_runtime.so passes one of its own functions.  Empty if unknown.
std::string shared_object_path(const void* address);
std::string shared_object_dir(const void* address);

/// Candidate folders for the libraries (libudf_frontend_ir.so) next to the
/// tools: BIN/<bin-to-lib>, then BIN/../lib.
std::vector<std::string> library_dirs_near_executable();

/// Candidate folders for udf's data (share/udf) next to the tools or to a
/// library folder, first the configured layout, then the build tree's.
std::vector<std::string> data_dirs_near_executable();
std::vector<std::string> data_dirs_near_library(const std::string& lib_dir);

}  // namespace udf

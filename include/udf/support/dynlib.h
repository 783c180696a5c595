// Shared libraries loaded with dlopen, so that a missing CUDA library is a
// clear message at the moment it is needed, and start-up pays for nothing it
// does not use.  Used for NVRTC, nvJitLink, nvFatbin, libNVVM and libcuda.
#pragma once

#include <string>
#include <vector>

namespace udf {

/// What `--version` reports of a library loaded at run time: where it was
/// found and its version, or why it could not be loaded.
struct LibraryStatus {
  std::string name;     // "NVRTC"
  bool loaded = false;
  std::string path;     // the candidate that loaded
  std::string version;  // "13.0"
  std::string error;    // why not, when !loaded
  std::string origin;   // where that candidate came from ("python env", "CUDA toolkit"); may be empty
};

/// Identifies a library file for cache keys without loading it: its
/// file_identity (fs.h: device, inode, size, times; one stat).  Empty when
/// `path` is not an absolute path to an existing file (a soname: the caller
/// falls back to asking the library its version), or changed within the last
/// seconds.
std::string library_file_identity(const std::string& path);

class DynamicLibrary {
 public:
  /// Tries each candidate (a path or a soname) in order.  `what` names the
  /// library in the error, e.g. "nvJitLink (libnvJitLink.so.13)"; `hint`, if
  /// any, ends the error (how to get the library).
  static DynamicLibrary open(const std::vector<std::string>& candidates, const std::string& what,
                             const std::string& hint = {});

  bool loaded() const { return handle_ != nullptr; }
  const std::string& path() const { return path_; }    // the candidate that loaded
  const std::string& error() const { return error_; }  // why none loaded, naming the library
  const std::string& reason() const { return reason_; }  // every candidate's dlerror alone, "; " between
  void* symbol(const char* name) const;                 // nullptr if not loaded or absent
  template <class Fn>
  Fn function(const char* name) const { return reinterpret_cast<Fn>(symbol(name)); }

 private:
  void* handle_ = nullptr;  // never closed: the library lives as long as the process
  std::string path_;
  std::string error_;
  std::string reason_;
};

}  // namespace udf

#include "udf/support/dynlib.h"

#include "udf/support/fs.h"

#include <dlfcn.h>

namespace udf {

std::string library_file_identity(const std::string& path) {
  if (path.empty() || path[0] != '/') return {};
  return file_identity(path);
}

DynamicLibrary DynamicLibrary::open(const std::vector<std::string>& candidates, const std::string& what,
                                    const std::string& hint) {
  DynamicLibrary lib;
  std::string tried;
  for (const auto& c : candidates) {
    if (c.empty()) continue;
    if (void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      lib.handle_ = h;
      lib.path_ = c;
      return lib;
    }
    const char* e = ::dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(e ? e : c.c_str());
  }
  lib.reason_ = tried.empty() ? "no candidate" : tried;
  lib.error_ = what + " could not be loaded: " + lib.reason_;
  if (!hint.empty()) lib.error_ += ". " + hint;
  return lib;
}

void* DynamicLibrary::symbol(const char* name) const { return handle_ ? ::dlsym(handle_, name) : nullptr; }

}  // namespace udf

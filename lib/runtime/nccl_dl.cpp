#include "nccl_dl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "runtime_error.h"

namespace udf::rt {
namespace {

struct Loaded {
  NcclApi api;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded l;
  const char* env = std::getenv("UDF_NCCL_LIBRARY");
  const std::string path = env && *env ? env : "libnccl.so.2";
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    l.why = "cannot load " + path + " (" + (e ? e : "unknown reason") + ")";
    return l;
  }
  // Kept loaded for the life of the process, like the driver.
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    if (!fn && l.why.empty()) l.why = path + " lacks " + name;
  };
  sym(l.api.ncclGetVersion, "ncclGetVersion");
  sym(l.api.ncclCommInitAll, "ncclCommInitAll");
  sym(l.api.ncclCommDestroy, "ncclCommDestroy");
  sym(l.api.ncclGroupStart, "ncclGroupStart");
  sym(l.api.ncclGroupEnd, "ncclGroupEnd");
  sym(l.api.ncclSend, "ncclSend");
  sym(l.api.ncclRecv, "ncclRecv");
  sym(l.api.ncclGetErrorString, "ncclGetErrorString");
  if (!l.why.empty()) return l;
  if (l.api.ncclGetVersion(&l.api.version) != 0) {
    l.why = path + ": ncclGetVersion failed";
    return l;
  }
  if (l.api.version < 20700) {  // ncclSend / ncclRecv came with 2.7
    l.why = path + " is NCCL " + std::to_string(l.api.version) + "; 2.7 or newer is needed";
    return l;
  }
  l.api.path = path;
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const NcclApi* nccl(std::string* why) {
  // Read at every call (a new index's choice), the library loaded once.
  if (const char* e = std::getenv("UDF_NCCL"); e && std::strcmp(e, "0") == 0) {
    if (why) *why = "UDF_NCCL=0";
    return nullptr;
  }
  const Loaded& l = loaded();
  if (why) *why = l.why;
  return l.ok ? &l.api : nullptr;
}

void nccl_check(ncclResult_t r, const char* call) {
  if (r == 0) return;
  static const Loaded& l = loaded();
  const NcclApi* n = l.ok ? &l.api : nullptr;
  fail(UDF_ERROR_CUDA, std::string(call) + ": " + (n ? std::string(n->ncclGetErrorString(r)) : "NCCL error " + std::to_string(r)));
}

}  // namespace udf::rt

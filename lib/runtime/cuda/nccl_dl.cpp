#include "cuda/nccl_dl.h"

#include <cstdlib>
#include <cstring>

#include "cuda/runtime_error.h"

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
  // Kept loaded for the life of the process, like the driver.
  static const DynamicLibrary library = DynamicLibrary::open({path}, "NCCL (" + path + ")");
  const auto functions = load_functions<NcclApi>(library);
  if (!functions.loaded()) {
    l.why = "cannot load " + path + " (" + library.reason() + ")";
    return l;
  }
  if (!functions.missing.empty()) {
    l.why = path + " lacks " + functions.missing;
    return l;
  }
  l.api = functions.fn;
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

#include "cuda/cuda_dl.h"

#include <atomic>
#include <cstring>
#include <mutex>

namespace udf::rt {
namespace {

// The fault hook for tests (udf_testing_cuda_fault): every driver function
// is called through Faulty<tag, F>::call, which calls the driver unless a
// fault is armed for it and its countdown reaches zero; then it returns the
// armed CUresult instead, once.  An unarmed call costs one relaxed load.
template <class Tag, class F> struct Faulty;
template <class Tag, class... A> struct Faulty<Tag, CUresult (*)(A...)> {
  static inline CUresult (*real)(A...) = nullptr;
  static inline std::atomic<int64_t> countdown{0};  // > 0: armed; the call that takes it to 0 fails
  static inline std::atomic<int> result{CUDA_SUCCESS};
  static CUresult call(A... a) {
    if (countdown.load(std::memory_order_relaxed) > 0 && countdown.fetch_sub(1) == 1)
      return static_cast<CUresult>(result.load());
    return real(a...);
  }
  static int64_t arm(int64_t calls_first, int r) {
    result.store(r);
    return countdown.exchange(calls_first < 0 ? 0 : calls_first + 1);
  }
};
#define UDF_CU_TAG(name) struct tag_##name {};
UDF_CU_FUNCTIONS(UDF_CU_TAG)
#undef UDF_CU_TAG

struct Loaded {
  CudaApi api;
  udf_status status = UDF_OK;
  std::string error;
};

Loaded load() {
  Loaded l;
  // Kept loaded for the life of the process (a driver cannot be unloaded safely).
  static const DynamicLibrary driver = DynamicLibrary::open({"libcuda.so.1"}, "the CUDA driver (libcuda.so.1)");
  const auto functions = load_functions<CudaApi>(driver);
  if (!functions.loaded()) {
    l.status = UDF_ERROR_NO_DRIVER;
    l.error = "no CUDA driver: cannot load libcuda.so.1 (" + driver.reason() + ")";
    return l;
  }
  if (!functions.missing.empty()) {
    l.status = UDF_ERROR_NO_DRIVER;
    l.error = "the CUDA driver libcuda.so.1 is too old: it lacks " + functions.missing + " (CUDA 12.0 or newer needed)";
    return l;
  }
  l.api = functions.fn;
  // Every call goes through its Faulty wrapper (the fault hook).
#define UDF_CU_WRAP(name)                                          \
  Faulty<tag_##name, decltype(&::name)>::real = l.api.name;        \
  l.api.name = &Faulty<tag_##name, decltype(&::name)>::call;
  UDF_CU_FUNCTIONS(UDF_CU_WRAP)
#undef UDF_CU_WRAP
  CUresult r = l.api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    l.api.cuGetErrorName(r, &name);
    l.status = r == CUDA_ERROR_NO_DEVICE ? UDF_ERROR_NO_DEVICE : UDF_ERROR_NO_DRIVER;
    l.error = std::string("cuInit failed: ") + (name ? name : "unknown error") +
              (r == CUDA_ERROR_NO_DEVICE ? " (no CUDA-capable device)" : "");
    return l;
  }
  l.api.cuDriverGetVersion(&l.api.driver_version);
  return l;
}

}  // namespace

bool arm_cuda_fault(const char* function, int64_t calls_first, int result, int64_t* pending) {
  // The cuda.h names callers know (cuMemAlloc), and the versioned symbols
  // the macros make of them (cuMemAlloc_v2).
#define UDF_CU_ARM(name)                                                                  \
  if (std::strcmp(function, #name) == 0 || std::strcmp(function, UDF_DL_STR(name)) == 0) {\
    *pending = Faulty<tag_##name, decltype(&::name)>::arm(calls_first, result);           \
    return true;                                                                          \
  }
  UDF_CU_FUNCTIONS(UDF_CU_ARM)
#undef UDF_CU_ARM
  return false;
}

const CudaApi& cuda() {
  static const Loaded l = load();  // thread-safe, once
  if (l.status != UDF_OK) fail(l.status, l.error);
  return l.api;
}

std::string cu_message(CUresult r, const char* call) {
  const char* name = nullptr;
  const char* text = nullptr;
  const CudaApi& c = cuda();
  if (c.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (c.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  return std::string(call) + ": " + (name ? name : "CUresult " + std::to_string(static_cast<int>(r))) +
         (text ? std::string(" (") + text + ")" : std::string());
}

void cu_check(CUresult r, const char* call, const std::string& what) {
  if (r == CUDA_SUCCESS) return;
  udf_status s = UDF_ERROR_CUDA;
  if (r == CUDA_ERROR_OUT_OF_MEMORY) s = UDF_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_ERROR_NO_BINARY_FOR_GPU) s = UDF_ERROR_NO_BINARY_FOR_GPU;
  fail(s, (what.empty() ? std::string() : what + ": ") + cu_message(r, call));
}

}  // namespace udf::rt

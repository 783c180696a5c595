// The CUDA driver API, loaded with dlopen("libcuda.so.1") on first use so that
// libudf_runtime.so loads (and reports "no CUDA driver") on machines without
// a driver.  One table of the functions the runtime calls, loaded with the
// mechanism every CUDA library shares (udf/cudalibs/dl_api.h); types and
// signatures come from the toolkit's cuda.h.
#pragma once

#include <cuda.h>

#include <string>

#include "cuda/runtime_error.h"
#include "udf/cudalibs/dl_api.h"

namespace udf::rt {

// Every driver function the runtime calls.  The names are cuda.h's macros
// (cuMemAlloc -> cuMemAlloc_v2 ...), so the versioned symbol is looked up.
#define UDF_CU_FUNCTIONS(X)                                                                                      \
  X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet)     \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)                   \
  X(cuDevicePrimaryCtxRelease) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuStreamCreate) X(cuStreamDestroy)     \
  X(cuStreamSynchronize) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)                  \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) X(cuMemsetD32Async) X(cuPointerGetAttribute) X(cuLibraryLoadData)    \
  X(cuLibraryUnload) X(cuLibraryGetKernel) X(cuKernelGetFunction) X(cuFuncGetAttribute) X(cuFuncSetAttribute)  \
  X(cuLaunchKernel) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize)                   \
  X(cuEventElapsedTime) X(cuStreamWaitEvent) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemcpy2DAsync) X(cuMemGetInfo) X(cuMemHostGetDevicePointer) \
  X(cuMemcpyPeerAsync) X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess) X(cuEventQuery) X(cuLaunchHostFunc) \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor)

struct CudaApi {
  UDF_DL_FUNCTIONS(UDF_CU_FUNCTIONS)
  int driver_version = 0;
};

/// The loaded and initialised (cuInit) driver; throws UDF_ERROR_NO_DRIVER
/// (or UDF_ERROR_NO_DEVICE when cuInit finds no device) with the reason.
const CudaApi& cuda();

/// The fault hook (udf_testing_cuda_fault): the call of `function` (a cuda.h
/// name, cuMemAlloc or cuMemAlloc_v2) after the next `calls_first` ones
/// returns `result` instead of calling the driver, once; calls_first < 0
/// disarms; *pending gets the previous arming's countdown (> 0: its fault
/// has not happened).  False for a function the runtime does not call.
bool arm_cuda_fault(const char* function, int64_t calls_first, int result, int64_t* pending);

/// "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string cu_message(CUresult r, const char* call);
/// Throws a RuntimeFailure for r != CUDA_SUCCESS: OOM -> UDF_ERROR_OUT_OF_MEMORY,
/// NO_BINARY_FOR_GPU -> UDF_ERROR_NO_BINARY_FOR_GPU, others UDF_ERROR_CUDA.
void cu_check(CUresult r, const char* call, const std::string& what = {});

}  // namespace udf::rt

// CU(cuMemAlloc, &p, n): calls the loaded function and checks its result.
#define CU(fn, ...) ::udf::rt::cu_check(::udf::rt::cuda().fn(__VA_ARGS__), #fn)

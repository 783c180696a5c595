// The runtime behind udf_runtime*: one device, its primary context, the
// streams a search uses, the runtime's own kernels and the host copy workers.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "cuda/context.h"
#include "cuda/host_pool.h"
#include "cuda/index_kernels.h"
#include "cuda/cuda_dl.h"
#include "udf/runtime.h"

struct udf_runtime {
  int32_t ordinal = 0;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  CUstream aux_stream = nullptr;   // side copies off the search's critical path (index/search_stages.cpp)
  CUstream wake_stream = nullptr;  // host functions that wake the host pool before a copy (index/search.cpp)
  CUevent wait_event = nullptr;    // udf_runtime_wait_stream's (made at its first call)
  udf_device_info info{};
  int max_smem_optin = 0;
  udf::rt::Library index_lib;
  udf::rt::IndexKernels kernels;  // the functions of index_lib
  // prepare_smem's checks, per kernel: the largest dynamic shared memory
  // already checked (and opted into) for it, so a search asks the driver
  // nothing; cleared when a module is destroyed (its handles may come back).
  std::unordered_map<CUfunction, size_t> smem_checked;
  int live_children = 0;  // modules
  bool released = false;  // udf_runtime_destroy was called while modules lived: freed with the last one
  // The host copy workers (host_pool(), cuda/tensors.cpp): started by the
  // first copy that can use them, joined when the runtime is freed.
  std::once_flag host_pool_once;
  std::unique_ptr<udf::rt::HostPool> host_pool;
};

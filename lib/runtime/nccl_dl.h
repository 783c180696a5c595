// NCCL, loaded with dlopen on first use (the runtime links only libc and
// loads every CUDA library itself): $UDF_NCCL_LIBRARY, else libnccl.so.2 as
// the system's loader finds it (the nvidia-nccl wheel's lib/ on
// LD_LIBRARY_PATH, or a system package).  Only what a sharded index's
// gather needs (index_shards.cpp).  The declarations are NCCL's own (nccl.h,
// NCCL 2.x): its handles are opaque pointers and its enums ints, stable
// across NCCL 2 releases.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

namespace udf::rt {

using ncclComm_t = struct ncclComm*;
using ncclResult_t = int;      // ncclSuccess = 0
using ncclDataType_t = int;    // ncclUint8 = 1
constexpr ncclDataType_t kNcclUint8 = 1;

struct NcclApi {
  ncclResult_t (*ncclGetVersion)(int*) = nullptr;
  ncclResult_t (*ncclCommInitAll)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*ncclCommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*ncclGroupStart)() = nullptr;
  ncclResult_t (*ncclGroupEnd)() = nullptr;
  ncclResult_t (*ncclSend)(const void*, size_t, ncclDataType_t, int, ncclComm_t, CUstream) = nullptr;
  ncclResult_t (*ncclRecv)(void*, size_t, ncclDataType_t, int, ncclComm_t, CUstream) = nullptr;
  const char* (*ncclGetErrorString)(ncclResult_t) = nullptr;
  int version = 0;     // ncclGetVersion: e.g. 22703 for 2.27.3
  std::string path;    // what was loaded
};

/// The loaded NCCL, or null with `why` set (not found, or a symbol missing).
/// UDF_NCCL=0 in the environment: null ("UDF_NCCL=0"), read at each call
/// (each new sharded index); the library is loaded once.
const NcclApi* nccl(std::string* why = nullptr);

/// Throws UDF_ERROR_CUDA "NCCL call: <ncclGetErrorString>" for r != 0.
void nccl_check(ncclResult_t r, const char* call);

}  // namespace udf::rt

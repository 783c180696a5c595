// NCCL, loaded with dlopen on first use (the runtime links only libc and
// loads every CUDA library itself): $UDF_NCCL_LIBRARY, else libnccl.so.2 as
// the system's loader finds it (the nvidia-nccl wheel's lib/ on
// LD_LIBRARY_PATH, or a system package).  Only what a sharded index's
// gather needs (index_shards.cpp), as one table loaded with the mechanism
// every CUDA library shares (udf/cudalibs/dl_api.h).  The declarations are
// NCCL's own (nccl.h, NCCL 2.x): its handles are opaque pointers and its
// enums ints, stable across NCCL 2 releases.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

#include "udf/cudalibs/dl_api.h"

namespace udf::rt {

using ncclComm_t = struct ncclComm*;
using ncclResult_t = int;      // ncclSuccess = 0
using ncclDataType_t = int;    // ncclUint8 = 1
constexpr ncclDataType_t kNcclUint8 = 1;

}  // namespace udf::rt

// NCCL's C API, as nccl.h declares it; never called directly, only through
// udf::rt::nccl().
extern "C" {
udf::rt::ncclResult_t ncclGetVersion(int* version);
udf::rt::ncclResult_t ncclCommInitAll(udf::rt::ncclComm_t* comms, int ndev, const int* devlist);
udf::rt::ncclResult_t ncclCommDestroy(udf::rt::ncclComm_t comm);
udf::rt::ncclResult_t ncclGroupStart();
udf::rt::ncclResult_t ncclGroupEnd();
udf::rt::ncclResult_t ncclSend(const void* sendbuff, size_t count, udf::rt::ncclDataType_t datatype, int peer,
                               udf::rt::ncclComm_t comm, CUstream stream);
udf::rt::ncclResult_t ncclRecv(void* recvbuff, size_t count, udf::rt::ncclDataType_t datatype, int peer,
                               udf::rt::ncclComm_t comm, CUstream stream);
const char* ncclGetErrorString(udf::rt::ncclResult_t result);
}

// Every NCCL function the runtime calls.
#define UDF_NCCL_FUNCTIONS(X)                                                                    \
  X(ncclGetVersion) X(ncclCommInitAll) X(ncclCommDestroy) X(ncclGroupStart) X(ncclGroupEnd)     \
  X(ncclSend) X(ncclRecv) X(ncclGetErrorString)

namespace udf::rt {

struct NcclApi {
  UDF_DL_FUNCTIONS(UDF_NCCL_FUNCTIONS)
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

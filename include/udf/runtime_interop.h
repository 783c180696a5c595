/*
 * udf runtime interop: DLPack and the Arrow C Device data interface.
 *
 * Datasets, queries and captures may come as DLPack tensors (CuPy, PyTorch,
 * JAX, NumPy >= 1.22) or Arrow C Device arrays (cuDF, PyArrow) already on the
 * GPU; the runtime reads them in place (no copy) through the udf_tensor view
 * these functions return.  Results can be returned the same way: buffers the
 * runtime allocates and hands out as DLPack tensors or Arrow arrays whose
 * deleter / release frees them.  docs/runtime-interop.md has the rules.
 *
 * Ownership (every path, error paths included)
 * - udf_tensor_from_dlpack*: the DLPack consumer rule: the call takes
 *   ownership of the DLManagedTensor.  On success the view stays valid until
 *   udf_tensor_handle_release(handle), which calls the tensor's deleter
 *   exactly once.  On failure the deleter has already been called (exactly
 *   once) and *handle is NULL.  A NULL tensor is UDF_ERROR_INVALID_ARGUMENT.
 * - udf_tensor_from_arrow_device: the array is MOVED in (Arrow's import
 *   rule): its release is called exactly once, by udf_tensor_handle_release
 *   on success, before returning on failure; the caller's struct is marked
 *   released (release = NULL) in both cases.  The schema is only read: it
 *   stays the caller's (it may be released right after the call).
 * - Exported tensors (udf_tensor_alloc_dlpack / udf_tensor_alloc_arrow and
 *   the search helpers) own their buffer: the DLPack deleter / Arrow release
 *   frees it (device buffers with the CUDA driver, retaining the device's
 *   primary context until then, so they may outlive the udf_runtime).
 *
 * Accepted inputs
 * - DLPack: device kDLCPU / kDLCUDAHost (-> host view) or kDLCUDA /
 *   kDLCUDAManaged (-> device view, device_id = the CUDA ordinal); dtypes
 *   float32, float16, int8, uint8, int32, int64 with lanes 1; ndim 0, 1
 *   (-> 1 x n) or 2; row-major with unit stride along the last axis (a row
 *   stride larger than the row, as from slicing columns, is fine; strides
 *   NULL means compact).  DLManagedTensorVersioned: major version 1; a
 *   READ_ONLY tensor is refused where the runtime would write (for_writing).
 * - Arrow: device ARROW_DEVICE_CPU / ARROW_DEVICE_CUDA_HOST (-> host) or
 *   ARROW_DEVICE_CUDA / ARROW_DEVICE_CUDA_MANAGED (-> device); schema
 *   "+w:DIM" (fixed-size list) of "f" (float32), "e" (float16), "c" (int8),
 *   "C" (uint8) -> rows x DIM, or a primitive "f" "e" "c" "C" "i" (int32)
 *   "l" (int64) array -> 1 x length (captures, ids); no nulls.  A CUDA
 *   sync_event (a CUevent*) is waited on before the view is returned.
 */
#ifndef UDF_RUNTIME_INTEROP_H
#define UDF_RUNTIME_INTEROP_H

#include <stdint.h>

#include <dlpack/dlpack.h>

#include "udf/runtime.h"

/* DLPack 1.x's versioned tensor, declared as the DLPack spec has it where the
 * installed header is older (Debian 12's libdlpack-dev is 0.6). */
#ifndef DLPACK_MAJOR_VERSION
#ifndef UDF_DLPACK_VERSIONED_DECLARED
#define UDF_DLPACK_VERSIONED_DECLARED 1
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#endif
#endif

/* The Arrow C data and C device data interfaces, exactly as the Arrow spec
 * declares them (consumers declare them themselves). */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  const char *format;
  const char *name;
  const char *metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema **children;
  struct ArrowSchema *dictionary;
  void (*release)(struct ArrowSchema *);
  void *private_data;
};

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void **buffers;
  struct ArrowArray **children;
  struct ArrowArray *dictionary;
  void (*release)(struct ArrowArray *);
  void *private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

#ifndef ARROW_C_DEVICE_DATA_INTERFACE
#define ARROW_C_DEVICE_DATA_INTERFACE

typedef int32_t ArrowDeviceType;

#define ARROW_DEVICE_CPU 1
#define ARROW_DEVICE_CUDA 2
#define ARROW_DEVICE_CUDA_HOST 3
#define ARROW_DEVICE_OPENCL 4
#define ARROW_DEVICE_VULKAN 7
#define ARROW_DEVICE_METAL 8
#define ARROW_DEVICE_VPI 9
#define ARROW_DEVICE_ROCM 10
#define ARROW_DEVICE_ROCM_HOST 11
#define ARROW_DEVICE_EXT_DEV 12
#define ARROW_DEVICE_CUDA_MANAGED 13
#define ARROW_DEVICE_ONEAPI 14
#define ARROW_DEVICE_WEBGPU 15
#define ARROW_DEVICE_HEXAGON 16

struct ArrowDeviceArray {
  struct ArrowArray array;
  int64_t device_id;
  ArrowDeviceType device_type;
  void *sync_event;
  int64_t reserved[3];
};

#endif /* ARROW_C_DEVICE_DATA_INTERFACE */

#ifdef __cplusplus
extern "C" {
#endif

/* Keeps an imported tensor alive while the runtime uses its view. */
typedef struct udf_tensor_handle udf_tensor_handle;

/* Calls the producer's deleter / release exactly once; NULL is accepted. */
UDF_API void udf_tensor_handle_release(udf_tensor_handle *h);

UDF_API udf_status udf_tensor_from_dlpack(DLManagedTensor *t, udf_tensor *view, udf_tensor_handle **handle);
/* for_writing: nonzero when the runtime will write the view (search
 * outputs); a READ_ONLY tensor is then refused. */
UDF_API udf_status udf_tensor_from_dlpack_versioned(DLManagedTensorVersioned *t, int32_t for_writing,
                                                    udf_tensor *view, udf_tensor_handle **handle);
UDF_API udf_status udf_tensor_from_arrow_device(struct ArrowDeviceArray *array, const struct ArrowSchema *schema,
                                                udf_tensor *view, udf_tensor_handle **handle);

/* A new rows x cols buffer owned by the returned tensor: host memory for
 * device = UDF_HOST_DEVICE, else device memory of that CUDA ordinal (needs
 * the driver).  Contents are unspecified.  *view, if not NULL, gets the
 * runtime view of the same buffer.  The DLPack deleter frees the buffer. */
UDF_API udf_status udf_tensor_alloc_dlpack(int32_t device, udf_dtype dtype, int64_t rows, int64_t cols,
                                           DLManagedTensor **out, udf_tensor *view);
/* The same as an Arrow device array: "+w:cols" of the dtype's primitive
 * (rows x cols; cols = 1 and rows = n for a plain primitive array when
 * as_list is 0).  Both structs are filled; release each exactly once. */
UDF_API udf_status udf_tensor_alloc_arrow(int32_t device, udf_dtype dtype, int64_t rows, int64_t cols,
                                          int32_t as_list, struct ArrowDeviceArray *out, struct ArrowSchema *schema,
                                          udf_tensor *view);

/* udf_index_search into new runtime-owned result buffers on `device`
 * (UDF_HOST_DEVICE or the runtime's device): distances F32 n x k, ids I64
 * n x k.  On failure nothing is returned and nothing leaks. */
UDF_API udf_status udf_index_search_dlpack(udf_index *ix, const udf_tensor *queries, const udf_search_params *params,
                                           int32_t device, DLManagedTensor **distances, DLManagedTensor **ids);
UDF_API udf_status udf_index_search_arrow(udf_index *ix, const udf_tensor *queries, const udf_search_params *params,
                                          int32_t device, struct ArrowDeviceArray *distances,
                                          struct ArrowSchema *distances_schema, struct ArrowDeviceArray *ids,
                                          struct ArrowSchema *ids_schema);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UDF_RUNTIME_INTEROP_H */

/*
 * udf runtime C API, version 2 (UDF_RUNTIME_API_VERSION): load linked UDF modules (.udfm), build and
 * persist IVF-Flat indexes on the GPU, and search them with a UDF metric.
 *
 * CHANGE LOG (compatible changes only within one UDF_RUNTIME_API_VERSION):
 *   1  first version; later: udf_driver_version.
 *   2  filters (ABI ivf_flat.filter.v1): udf_search_params gains filter,
 *      filter_captures and n_filter_captures (the struct grew, so a caller
 *      built against version 1 must be rebuilt: hence the new major version
 *      and SONAME libudf_runtime.so.2); udf_module_filter_count,
 *      udf_module_filter_info, udf_module_find_filter,
 *      udf_module_filter_capture_info.  Later: udf_index_search_async,
 *      udf_dtype_name; the
 *      stage times of udf_search_stats are GPU times (CUDA events);
 *      udf_index_last_search_work; metrics of ABI ivf_flat.metric.v2
 *      (include/udf/abi/metric_v2.h) and udf_module_metric_abi;
 *      udf_module_link_ex and udf_link_options (entries linked on demand,
 *      the first struct with a leading struct_size).
 *   3  the parameter structs udf_index_params and udf_search_params begin
 *      with struct_size, as udf_link_options does; the *_default functions
 *      are inline and call udf_*_init(p, sizeof *p), so a caller built
 *      against an older header is never written or read past (SONAME
 *      libudf_runtime.so.3).  See "Versioned structs" below.  Later:
 *      indexes over several GPUs (udf_index_build_sharded,
 *      udf_index_load_sharded, udf_index_shard_count, udf_index_shard_info,
 *      udf_index_shard_transport); udf_index_params.centroids (an index over
 *      given centroids) and udf_index_centroids; udf_index_build_chunked;
 *      udf_index_params.coarse_weights and udf_index_coarse_weights
 *      (later: udf_module_metric_coarse_weights);
 *      device arrays (udf_device_array_create, udf_device_array_tensor,
 *      udf_device_array_destroy): capture values copied to the GPU once;
 *      FAISS IndexIVFFlat files (udf_index_load_faiss,
 *      udf_index_file_from_faiss); cuVS IVF-Flat files
 *      (udf_index_load_cuvs, udf_index_file_from_cuvs); exact search and
 *      refine (udf_exact_search, udf_refine; udf_link_options.exact in
 *      place of a reserved field).
 *
 * Conventions
 * - C99 and C++; every function has C linkage and returns a udf_status,
 *   except the destroy functions (void; NULL is accepted) and the few that
 *   return a version or a string.  On failure the calling thread's
 *   udf_last_error() holds a one-line message naming the parameter, capture,
 *   file or CUDA call at fault; output handles are set to NULL.
 * - Handles are opaque.  A udf_runtime owns a CUDA device's primary context
 *   and one stream; modules and indexes belong to the runtime that created
 *   them.  Destroying a runtime that still has modules, or a module that
 *   still has indexes, releases it only when the last of those is destroyed:
 *   they stay usable until then.  A runtime and everything made
 *   from it may be used by one thread at a time (no internal locking).
 * - The library loads libcuda.so.1 with dlopen on the first
 *   udf_runtime_create(); without a driver that call returns
 *   UDF_ERROR_NO_DRIVER and nothing else changes.  udf_last_error,
 *   udf_status_name and udf_runtime_api_version never need a driver.
 * - Every call is synchronous -- when it returns, results are in the caller's
 *   memory (host or device) and the runtime's stream is idle -- except
 *   udf_index_search_async, which queues a search on a stream and returns.
 * - Versioned structs: the parameter structs (udf_link_options,
 *   udf_index_params, udf_search_params) begin with size_t struct_size, the
 *   size of the struct the caller was compiled with.  udf_X_default(p) (an
 *   inline function) calls udf_X_init(p, sizeof *p), which writes the
 *   defaults into exactly that many bytes.  Every call that takes one reads
 *   only the bytes struct_size covers and takes the defaults for fields
 *   beyond it (an older caller); a struct_size larger than the library's
 *   struct is accepted when the bytes it does not know are zero (a newer
 *   caller using no new field), refused with UDF_ERROR_INVALID_ARGUMENT
 *   otherwise, as is a struct_size below the first version's size (a struct
 *   never filled by udf_X_default).  Fields are only ever added at the end,
 *   and a new field's zero value means "as before".  ctypes and other FFI
 *   callers call udf_X_init(byref(p), sizeof(p)).  The output structs
 *   (udf_*_info, udf_search_stats, udf_search_work) and the array elements
 *   (udf_tensor, udf_capture_binding, udf_artifact_source) do not change
 *   within one UDF_RUNTIME_API_VERSION: new outputs come as new functions.
 * - ctypes: all structs are plain data with fixed-size fields; enums are
 *   C ints (4 bytes).  C callers may pass any int where an enum is taken
 *   (an unknown value is refused with UDF_ERROR_INVALID_ARGUMENT), so in C++
 *   the enums have the fixed underlying type int, which makes every int a
 *   valid value (UDF_ENUM).  Strings are NUL-terminated UTF-8.
 */
#ifndef UDF_RUNTIME_H
#define UDF_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define UDF_API
#else
#define UDF_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
#define UDF_ENUM(name) enum name : int
#else
#define UDF_ENUM(name) enum name
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define UDF_RUNTIME_API_VERSION 3

/* ---------------------------------------------------------------- status */

typedef UDF_ENUM(udf_status) {
  UDF_OK = 0,
  UDF_ERROR_INVALID_ARGUMENT = 1,   /* a bad parameter (message names it) */
  UDF_ERROR_NO_DRIVER = 2,          /* libcuda.so.1 missing or unusable */
  UDF_ERROR_NO_DEVICE = 3,          /* no CUDA device, or the ordinal is out of range */
  UDF_ERROR_CUDA = 4,               /* a CUDA driver call failed (message has the call and CUresult name) */
  UDF_ERROR_OUT_OF_MEMORY = 5,      /* device or host allocation failed */
  UDF_ERROR_IO = 6,                 /* a file could not be read or written */
  UDF_ERROR_BAD_FORMAT = 7,         /* a module or index file is corrupt, truncated or of another version */
  UDF_ERROR_MISMATCH = 8,           /* module/ABI/index/metric/element type/dim do not fit together */
  UDF_ERROR_NO_BINARY_FOR_GPU = 9,  /* the module has no code for this GPU's architecture */
  UDF_ERROR_CAPTURE = 10,           /* a capture is missing, unknown, mistyped or of the wrong length */
  UDF_ERROR_UNSUPPORTED = 11,       /* a valid request beyond this implementation or device (k, smem, sizes) */
  UDF_ERROR_NOT_IMPLEMENTED = 12,
  UDF_ERROR_INTERNAL = 13
} udf_status;

/* UDF_RUNTIME_API_VERSION of the library actually loaded. */
UDF_API uint32_t udf_runtime_api_version(void);
/* The last error of the calling thread ("" if none).  Valid until the next
 * failing call on this thread. */
UDF_API const char *udf_last_error(void);
/* "UDF_OK", "UDF_ERROR_INVALID_ARGUMENT", ...; "UDF_ERROR_UNKNOWN" otherwise. */
UDF_API const char *udf_status_name(udf_status s);

/* ---------------------------------------------------------------- tensors */

typedef UDF_ENUM(udf_dtype) {
  UDF_DTYPE_F32 = 0,
  UDF_DTYPE_F16 = 1,
  UDF_DTYPE_I8 = 2,
  UDF_DTYPE_U8 = 3,
  UDF_DTYPE_I32 = 4,
  UDF_DTYPE_I64 = 5
} udf_dtype;

/* Size in bytes of one element (0 for an unknown dtype). */
UDF_API size_t udf_dtype_size(udf_dtype t);
/* "f32", "f16", "i8", "u8", "i32", "i64"; NULL for an unknown dtype. */
UDF_API const char *udf_dtype_name(udf_dtype t);

#define UDF_HOST_DEVICE (-1)

/* A 2-D row-major view of caller-owned memory.  device: UDF_HOST_DEVICE (-1)
 * for host memory, else the CUDA ordinal (must be the runtime's device).
 * row_stride is in ELEMENTS between consecutive rows (0 means cols).  A 1-D
 * array is rows = 1 (or cols = 1); a scalar is rows = cols = 1. */
typedef struct udf_tensor {
  void *data;
  int32_t device;
  udf_dtype dtype;
  int64_t rows;
  int64_t cols;
  int64_t row_stride;
} udf_tensor;

/* ---------------------------------------------------------------- runtime */

typedef struct udf_runtime udf_runtime;
typedef struct udf_module udf_module;
typedef struct udf_index udf_index;

/* The CUDA driver's version, as cuDriverGetVersion gives it (13000 for CUDA
 * 13.0).  UDF_ERROR_NO_DRIVER without a usable libcuda.so.1 and
 * UDF_ERROR_NO_DEVICE when it finds no device (udf_last_error says why). */
UDF_API udf_status udf_driver_version(int32_t *version);

/* Retains the primary context of device `ordinal` and creates a stream. */
UDF_API udf_status udf_runtime_create(int32_t ordinal, udf_runtime **out);
UDF_API void udf_runtime_destroy(udf_runtime *rt);

typedef struct udf_device_info {
  char name[256];
  int32_t ordinal;
  int32_t arch;                 /* 90 for sm_90 */
  int32_t sm_count;
  int32_t reserved;
  int64_t total_memory;         /* bytes */
  int64_t max_shared_per_block; /* opt-in dynamic shared memory limit, bytes */
} udf_device_info;

UDF_API udf_status udf_runtime_device_info(const udf_runtime *rt, udf_device_info *out);
/* The runtime's CUstream (as void*), for callers that order their own work
 * against it.  All runtime calls synchronize it before returning. */
UDF_API udf_status udf_runtime_stream(const udf_runtime *rt, void **stream);
/* Orders the runtime's stream after the work queued on `stream` so far (a
 * CUstream of the runtime's context, as void*; NULL is the legacy default
 * stream): an event recorded there, waited for on the runtime's stream, so
 * the host does not block.  Every later call that runs on the runtime's
 * stream (all but udf_index_search_async on a stream of its own, and a
 * sharded index's other devices) then reads what that work wrote.  For
 * callers whose inputs come from their own stream (a framework's current
 * stream) instead of synchronizing it before each call. */
UDF_API udf_status udf_runtime_wait_stream(udf_runtime *rt, void *stream);

/* ---------------------------------------------------------------- modules */

/* Loads a module (.udfm): the container and manifest are validated
 * (udf::parse_module), the ABI must be ivf_flat.metric.v1 version 1, the
 * fatbin is loaded with cuLibraryLoadData and EVERY entry is fetched with
 * cuLibraryGetKernel now, so a module without code for this GPU fails here
 * with UDF_ERROR_NO_BINARY_FOR_GPU (naming the module's archs and the GPU's). */
UDF_API udf_status udf_module_load_file(udf_runtime *rt, const char *path, udf_module **out);
/* Same from memory; `name` (may be NULL) is used in messages.  The bytes are
 * copied: the buffer may be freed after the call. */
UDF_API udf_status udf_module_load_memory(udf_runtime *rt, const void *data, size_t size, const char *name,
                                          udf_module **out);
UDF_API void udf_module_destroy(udf_module *m);

typedef UDF_ENUM(udf_order) { UDF_ORDER_MIN = 0, UDF_ORDER_MAX = 1 } udf_order;
typedef UDF_ENUM(udf_coarse_metric) {
  UDF_COARSE_L2 = 0,
  UDF_COARSE_INNER_PRODUCT = 1,
  UDF_COARSE_COSINE = 2
} udf_coarse_metric;

/* One metric (= one linked artifact) of a module.  Strings stay valid while
 * the module lives. */
typedef struct udf_metric_info {
  const char *symbol;        /* the UDF's symbol: the metric's name */
  const char *finalize;      /* finalize symbol or NULL */
  const char *source_name;   /* the artifact's source file name */
  const char *cache_key;     /* the artifact's cache key */
  udf_dtype elem;            /* F32, F16, I8 or U8 */
  udf_dtype acc;             /* F32 or I32 */
  udf_order order;
  udf_coarse_metric coarse_metric;
  double initial;            /* initial accumulator */
  uint32_t n_captures;
  uint32_t max_k;            /* largest k any of its scan entries supports */
} udf_metric_info;

/* A capture declared by a metric or a filter, in ABI order. */
typedef struct udf_capture_info {
  const char *name;
  udf_dtype type;            /* F32, F16, I32 or U8 */
  int32_t is_array;          /* 1: array (a metric's: of length dim; a filter's: any length >= 1); 0: scalar (F32 or I32) */
} udf_capture_info;

UDF_API udf_status udf_module_metric_count(const udf_module *m, size_t *count);
UDF_API udf_status udf_module_metric_info(const udf_module *m, size_t index, udf_metric_info *out);
/* The ABI a metric follows.  For ABI v2 metrics udf_metric_info's `initial`
 * is 0 and `finalize` is the state shape's finalize (NULL for the vector
 * shape); the initial state is in the module manifest. */
typedef enum udf_metric_abi {
  UDF_METRIC_ABI_V1 = 1,        /* ivf_flat.metric.v1: ACC f(x, y, acc, ctx) per coordinate */
  UDF_METRIC_ABI_V2_STATE = 2,  /* ivf_flat.metric.v2, state shape: update per coordinate + finalize */
  UDF_METRIC_ABI_V2_VECTOR = 3  /* ivf_flat.metric.v2, vector shape: distance(x, y, n_dims, ctx) per pair */
} udf_metric_abi;
UDF_API udf_status udf_module_metric_abi(const udf_module *m, size_t index, udf_metric_abi *out);
/* Index of the metric named `symbol`; UDF_ERROR_INVALID_ARGUMENT listing the
 * module's metrics when absent. */
UDF_API udf_status udf_module_find_metric(const udf_module *m, const char *symbol, size_t *index);
UDF_API udf_status udf_module_capture_info(const udf_module *m, size_t metric, size_t capture,
                                           udf_capture_info *out);
/* The capture a metric names as its coarse weights (udfc --coarse-weights; an
 * f32 array): *capture = its index, or -1 when it names none.  A build with
 * that metric (udf_index_build, _build_sharded, _build_chunked) must be given
 * udf_index_params.coarse_weights -- the capture's value, as a rule -- or it
 * is refused with UDF_ERROR_CAPTURE; a loaded, imported or rebound index keeps
 * its own. */
UDF_API udf_status udf_module_metric_coarse_weights(const udf_module *m, size_t metric, int32_t *capture);
/* One filter (ABI ivf_flat.filter.v1, include/udf/abi/filter_v1.h) of a
 * module: a predicate keep(query, id, ctx) the scan applies before the
 * metric.  Strings stay valid while the module lives. */
typedef struct udf_filter_info {
  const char *symbol;        /* the filter's name */
  const char *source_name;
  const char *cache_key;
  uint32_t n_captures;
  uint32_t reserved;
} udf_filter_info;

UDF_API udf_status udf_module_filter_count(const udf_module *m, size_t *count);
UDF_API udf_status udf_module_filter_info(const udf_module *m, size_t index, udf_filter_info *out);
/* Index of the filter named `symbol`; UDF_ERROR_INVALID_ARGUMENT listing the
 * module's filters when absent. */
UDF_API udf_status udf_module_find_filter(const udf_module *m, const char *symbol, size_t *index);
UDF_API udf_status udf_module_filter_capture_info(const udf_module *m, size_t filter, size_t capture,
                                                  udf_capture_info *out);

/* The module manifest as JSON and the module's cache key; valid while the module lives. */
UDF_API const char *udf_module_manifest_json(const udf_module *m);
UDF_API const char *udf_module_cache_key(const udf_module *m);

/* Run-time linking: artifacts (.udfa) from files or memory, linked with the
 * kernel pack for this runtime's GPU into a loaded module.  (Implemented in
 * lib/runtime/capi/link_api.cpp; may return UDF_ERROR_NOT_IMPLEMENTED.) */
typedef struct udf_artifact_source {
  const char *path;  /* a .udfa file, or NULL to use data/size */
  const void *data;
  size_t size;
  const char *name;  /* for messages when from memory; may be NULL */
} udf_artifact_source;

/* Links every entry now (all k buckets; parallel links, each entry cached
 * on disk as udf-link caches it). */
UDF_API udf_status udf_module_link(udf_runtime *rt, const udf_artifact_source *artifacts, size_t n,
                                   udf_module **out);

/* Options of udf_module_link_ex (a versioned struct: see the conventions). */
typedef struct udf_link_options {
  size_t struct_size;           /* the caller's sizeof(udf_link_options) (udf_link_options_default sets it) */
  int32_t on_demand;            /* 1 (default): link the entries of a k bucket when a search first needs them
                                   (searches for k up to 32 share one bucket, then 128, 256, 1024); 0: every
                                   entry before udf_module_link_ex returns */
  uint32_t prefetch_k;          /* on demand: start linking the bucket of searches up to this k in the
                                   background at once (default 32; 0: none), so that it overlaps building an
                                   index: one link an entry (merges, scans, filtered scans, pruning scans),
                                   a search waiting only for the entries it runs */
  uint32_t max_k;               /* the largest k searched (0, the default: the kernel pack's largest, 1024) */
  uint32_t threads;             /* links run at once (0: $UDF_LINK_JOBS, else the CPUs this process may use) */
  int32_t no_cache;             /* 1: neither read nor write the on-disk cache */
  int32_t exact;                /* not on demand: 1 also links every metric's exact-search and refine entries
                                   (udf_exact_search, udf_refine); 0 (default): those calls fail naming the
                                   module.  On demand they are linked when first used, whatever this says */
  const char *cache_dir;        /* NULL: $UDF_CACHE_DIR, else $XDG_CACHE_HOME/udf, else ~/.cache/udf */
  const char *kernel_pack_dir;  /* NULL: $UDF_KERNEL_PACK_DIR, else share/udf/kernels next to this library */
} udf_link_options;

/* Fills the first `struct_size` bytes of *options with the defaults:
 * struct_size, on_demand 1, prefetch_k 32, the rest 0 / NULL. */
UDF_API void udf_link_options_init(udf_link_options *options, size_t struct_size);
static inline void udf_link_options_default(udf_link_options *options) {
  udf_link_options_init(options, sizeof *options);
}

/* udf_module_link with options (NULL: the defaults, on demand).  On demand,
 * the module lists only the entries linked so far (udf_module_manifest_json);
 * udf_metric_info.max_k is the largest k it can link; a link a search starts
 * that fails (an undefined symbol in a UDF, say) fails that search with
 * UDF_ERROR_MISMATCH and its diagnostics, and the module stays usable for the
 * buckets already linked. */
UDF_API udf_status udf_module_link_ex(udf_runtime *rt, const udf_artifact_source *artifacts, size_t n,
                                      const udf_link_options *options, udf_module **out);

/* ---------------------------------------------------------------- index */

/* Progress: fraction in [0, 1], stage "kmeans", "assign", "pack", "upload". */
typedef void (*udf_progress_fn)(void *user, double fraction, const char *stage);

/* How an index over several GPUs splits its vectors (docs/scale-out.md).
 * By lists: each device keeps a contiguous range of whole lists, and scans
 * only the probed lists it keeps.  By vectors: each device keeps a part of
 * every list (the lists cut into equal parts), and scans its part of every
 * probed list, so the devices' work is even for any query and each prunes
 * with the bounds of every probed list; it costs 8 bytes a vector more (the
 * slots' tie keys) and a small kernel a search on each device. */
typedef enum udf_shard_layout {
  UDF_SHARD_DEFAULT = 0,     /* UDF_SHARD_BY_VECTORS */
  UDF_SHARD_BY_LISTS = 1,
  UDF_SHARD_BY_VECTORS = 2
} udf_shard_layout;

typedef struct udf_index_params {
  size_t struct_size;        /* the caller's sizeof(udf_index_params) (udf_index_params_default sets it) */
  uint32_t n_lists;          /* coarse lists (k-means centroids), 1 .. 16384 and <= rows */
  uint32_t kmeans_iters;     /* Lloyd iterations on the GPU (default 20; 0 = centroids are a random sample) */
  uint64_t seed;             /* sampling and initialisation (default 1234) */
  double balance;            /* list length cap as a multiple of the mean (default 2.0; 0 = no cap, plain nearest) */
  uint32_t max_train_rows;   /* k-means training sample (default 0 = min(rows, 256 * n_lists)) */
  uint32_t shard_layout;     /* several GPUs: a udf_shard_layout (0, the default: UDF_SHARD_BY_VECTORS) */
  udf_progress_fn progress;  /* may be NULL */
  void *progress_user;
  const float *centroids;    /* NULL (the default): k-means.  Else n_lists x dim f32 centroids, row-major, in
                                host memory: the build skips k-means (kmeans_iters, seed and max_train_rows
                                are not used) and assigns the rows to these lists, as given (not
                                normalized for a cosine coarse metric); data then needs only 1 row.  For
                                shards that share centroids (udf.dask; docs/scale-out.md) and builds that
                                train on a sample elsewhere.  See udf_index_centroids. */
  uint32_t kmeans_mesoclusters; /* 0 or 1 (the default 0): k-means trains every list over the whole sample,
                                   balanced, every iteration.  m >= 2 (at most n_lists): in two levels, as
                                   cuVS does: m mesoclusters (kmeans_iters iterations on 1024 * m sample
                                   rows), each one's share of the lists trained on its own rows
                                   (kmeans_iters / 2), then every list over the whole sample, balanced
                                   (max(2, kmeans_iters / 4)).  round(sqrt(n_lists)) builds faster, but its
                                   lists recall less at a given n_probes on data of many small clusters
                                   (docs/performance.md, "Index build"). */
  const float *coarse_weights; /* NULL (the default): k-means, the assignment and the coarse probe use the
                                  metric's coarse metric on the rows as given.  Else dim f32 weights w
                                  (finite, >= 0, not all 0) in host memory, copied: they use it on each row
                                  multiplied element by element by sqrt(w), the space of a weighted metric
                                  sum_d w[d] (x[d] - y[d])^2 (or sum_d w[d] x[d] y[d]), so that its queries
                                  probe the lists its own distance puts them near.  The lists hold the rows as
                                  given and the scan sees them so; centroids (given, or from
                                  udf_index_centroids) are in the scaled space.  Not for a cosine coarse
                                  metric.  Kept in the index file (docs/runtime.md, "Coarse weights"). */
} udf_index_params;

/* Fills the first `struct_size` bytes of *p with the defaults (struct_size, n_lists 1024, ...). */
UDF_API void udf_index_params_init(udf_index_params *p, size_t struct_size);
static inline void udf_index_params_default(udf_index_params *p) { udf_index_params_init(p, sizeof *p); }

/* Builds an index for metric `metric` (a symbol of the module) over `data`
 * (rows x dim, dtype = the metric's element type, host or device): k-means
 * on the GPU with the metric's coarse metric, a balanced assignment, the
 * lists laid out on the GPU (they live there; no host copy is kept).
 * ids: NULL (ids 0 .. rows-1) or an I64 tensor of `rows` values.
 * The index keeps a reference to the module: destroying the module first is
 * allowed (see the conventions at the top). */
UDF_API udf_status udf_index_build(udf_module *m, const char *metric, const udf_tensor *data,
                                   const udf_tensor *ids, const udf_index_params *params, udf_index **out);
/* Adds vectors to an index (assigned to the existing lists with the balanced
 * rule; a new device layout holds each list's old vectors, then its new
 * ones).  ids: NULL (continue from the largest id + 1) or I64.  On an error
 * the index is unchanged. */
UDF_API udf_status udf_index_add(udf_index *ix, const udf_tensor *data, const udf_tensor *ids);
/* Writes the index atomically (temp file + rename). */
UDF_API udf_status udf_index_save(const udf_index *ix, const char *path);
/* Reads an index written by udf_index_save and binds it to `m`: the file's
 * metric symbol must be in the module with the file's element type and coarse
 * metric (UDF_ERROR_MISMATCH otherwise); truncation and corruption give
 * UDF_ERROR_BAD_FORMAT.  The artifact's cache key the file records is not
 * compared: the lists depend on the element type and the coarse metric only,
 * so an index loads with its metric recompiled by another udfc or toolkit, for
 * other archs, or with another body. */
UDF_API udf_status udf_index_load(udf_module *m, const char *path, udf_index **out);
/* Reads a FAISS IndexIVFFlat file (faiss.write_index; ArrayInvertedLists,
 * METRIC_L2 or METRIC_INNER_PRODUCT, an IndexFlatL2 / IndexFlatIP quantizer)
 * and binds it to metric `metric` of `m` without rebuilding it: the index has
 * FAISS's centroids and lists, each list's vectors and ids in FAISS's order,
 * so the built-in l2 with the same n_probes finds FAISS's neighbours.  The
 * metric must take f32 elements and have the FAISS index's coarse metric
 * (l2 for METRIC_L2, inner_product for METRIC_INNER_PRODUCT), else
 * UDF_ERROR_MISMATCH naming both; another index or inverted-list kind, a
 * truncated or inconsistent file is UDF_ERROR_BAD_FORMAT naming the field and
 * its byte offset; more than 16384 lists too.  Ids are FAISS's int64 ids as they are
 * (any value; -1 is also the padding of a search's results, as in FAISS);
 * udf_index_add without ids continues from the largest + 1.  The index's
 * balance is 0 (udf_index_add puts rows in their nearest list). */
UDF_API udf_status udf_index_load_faiss(udf_module *m, const char *metric, const char *faiss_path, udf_index **out);
/* The same FAISS IndexIVFFlat written as an index file of this runtime
 * (atomically), bound to metric symbol `metric` with artifact cache key
 * `cache_key` (udf_module_metric_info's, recorded as the file's provenance): the
 * index udf_index_load_faiss makes, without a GPU or a module.  Needs no
 * driver. */
UDF_API udf_status udf_index_file_from_faiss(const char *faiss_path, const char *metric, const char *cache_key,
                                             const char *out_path);
/* Reads a cuVS IVF-Flat index file (cuvs::neighbors::ivf_flat::serialize,
 * Python's cuvs.neighbors.ivf_flat.save: serialization version 4, cuVS 25.02
 * to 26.08, or 5, cuVS 26.10; float, half, int8_t or uint8_t vectors; L2Expanded,
 * L2SqrtExpanded, InnerProduct or CosineExpanded) and binds it to metric
 * `metric` of `m` without rebuilding it: the index has cuVS's centroids and
 * lists, each list's vectors and ids in cuVS's order (held in this runtime's
 * list layout), so the built-in metric of the same coarse metric with the
 * same n_probes finds cuVS's neighbours.  int8_t / uint8_t centroids are
 * cuVS's times 128 / 256 (cuVS compares them with the vectors divided so);
 * for CosineExpanded the vectors and centroids are stored L2-normalized, as
 * this runtime's cosine index stores them.  The metric must take the cuVS
 * index's element type and have its coarse metric (l2 for L2Expanded and
 * L2SqrtExpanded, inner_product for InnerProduct, cosine for
 * CosineExpanded), else UDF_ERROR_MISMATCH naming both; another file, metric
 * or version, a truncated or inconsistent file is UDF_ERROR_BAD_FORMAT naming
 * the field and its byte offset; more than 16384 lists too.  Ids are cuVS's
 * int64 ids as they are; udf_index_add without ids continues from the
 * largest + 1.  The index's balance is 0 (udf_index_add puts rows in their
 * nearest list). */
UDF_API udf_status udf_index_load_cuvs(udf_module *m, const char *metric, const char *cuvs_path, udf_index **out);
/* The same cuVS IVF-Flat index written as an index file of this runtime
 * (atomically), bound to metric symbol `metric` with artifact cache key
 * `cache_key` (udf_module_metric_info's, recorded as the file's provenance): the
 * index udf_index_load_cuvs makes, without a GPU or a module.  Needs no
 * driver. */
UDF_API udf_status udf_index_file_from_cuvs(const char *cuvs_path, const char *metric, const char *cache_key,
                                            const char *out_path);
/* A new index over a copy of `ix`'s lists that scans with metric `metric` of
 * module `m` (loaded by the same runtime): for a UDF searched over lists
 * built with another metric, e.g. the built-in l2.  The metric must have the
 * index's element type and coarse metric (UDF_ERROR_MISMATCH otherwise). */
UDF_API udf_status udf_index_with_metric(const udf_index *ix, udf_module *m, const char *metric, udf_index **out);
UDF_API void udf_index_destroy(udf_index *ix);

typedef struct udf_index_info {
  const char *metric;        /* valid while the index lives */
  udf_dtype elem;
  uint32_t dim;
  uint32_t n_lists;
  uint32_t max_list_size;
  int64_t size;              /* vectors */
} udf_index_info;
UDF_API udf_status udf_index_info_get(const udf_index *ix, udf_index_info *out);
/* List sizes into sizes[0 .. n_lists). */
UDF_API udf_status udf_index_list_sizes(const udf_index *ix, uint32_t *sizes, size_t n);
/* The coarse centroids into out[0 .. n_lists * dim) (f32, row-major): what
 * udf_index_params.centroids takes, for another index over the same lists.
 * n must be at least n_lists * dim (UDF_ERROR_INVALID_ARGUMENT otherwise). */
UDF_API udf_status udf_index_centroids(const udf_index *ix, float *out, size_t n);
/* The index's coarse weights (udf_index_params.coarse_weights): *count = dim
 * and the weights into out[0 .. dim) when it has them, else *count = 0 and
 * nothing written.  out may be NULL to ask for the count only; else n must be
 * at least the count (UDF_ERROR_INVALID_ARGUMENT otherwise). */
UDF_API udf_status udf_index_coarse_weights(const udf_index *ix, float *out, size_t n, size_t *count);

/* ---------------------------------------------------------------- several GPUs */

/* An index over several GPUs of one host (docs/scale-out.md).  modules[i] is
 * the same module loaded by the runtime of the i-th device (one
 * udf_runtime_create per device; a device may appear more than once).  The
 * build gives the one-GPU build's lists (the same lists, in the same order,
 * as udf_index_build on modules[0] gives; k-means runs on the first device,
 * every device helping with its nearest centres and the assignment's
 * nearest lists), then the devices split the vectors as
 * params->shard_layout says (udf_shard_layout): by vectors (the default),
 * device i keeps part i of every list, each list cut into parts of equal
 * size (an add gives each list's new rows to the parts that fall shortest);
 * by lists, device i keeps the contiguous range of lists
 * udf_index_shard_info reports, the ranges cut so that their vectors
 * balance.  Every device holds every centroid.  A search probes on every
 * device (from 1024 queries each probes its part of the batch and shares
 * it), scans each device's own vectors of the probed lists there, and
 * merges the devices' top-k on the first device: exactly the distances and
 * ids of a one-GPU index over the same lists (ties to the smaller slot, as
 * there), for every metric, order, filter and layout.
 *
 * The sharded index is a udf_index: udf_index_search, _search_async, _add,
 * _save, _info_get, _list_sizes, _last_search_stats and _destroy take it as
 * they take a one-GPU one.  Its first device is its home: async streams,
 * device queries, device outputs and device capture arrays belong to it (the
 * other devices get copies: at every search, but of a udf_device_array once).
 * The shards' top-k reach the first device through NCCL when every device
 * is a different one and libnccl.so.2 loads ($UDF_NCCL_LIBRARY, else the
 * system's), and by peer copies otherwise (UDF_NCCL=0 forces those);
 * udf_index_shard_transport says which.  A file
 * written by udf_index_save is the one-GPU format: it loads on one device
 * (udf_index_load) or several (udf_index_load_sharded).
 * udf_index_with_metric does not take a sharded index (UDF_ERROR_UNSUPPORTED).
 * Of udf_search_stats, a sharded search fills total_ms and chunks only (the
 * shards' stages run at once on several devices); udf_search_work stays zero. */
UDF_API udf_status udf_index_build_sharded(udf_module *const *modules, size_t n_modules, const char *metric,
                                           const udf_tensor *data, const udf_tensor *ids,
                                           const udf_index_params *params, udf_index **out);
UDF_API udf_status udf_index_load_sharded(udf_module *const *modules, size_t n_modules, const char *path,
                                          udf_index **out);
/* udf_index_load_sharded with a layout (a udf_shard_layout; the file is the
 * same for every layout and device count). */
UDF_API udf_status udf_index_load_sharded_layout(udf_module *const *modules, size_t n_modules, const char *path,
                                                 uint32_t shard_layout, udf_index **out);

/* Rows for udf_index_build_chunked: sets *data to chunk `chunk`'s rows
 * (rows >= 1 x dim, the metric's element type, in host memory or the first
 * module's device memory) and, to give their ids, *ids to an I64 tensor of
 * as many values (left as it is, with data NULL: the ids go on from the
 * largest so far + 1, from 0 for chunk 0).  Both arrive zeroed; the memory
 * must stay valid until the next call or the build's return.  Returns 0, or
 * non-zero to stop the build. */
typedef int (*udf_chunk_fn)(void *user, size_t chunk, udf_tensor *data, udf_tensor *ids);
/* An index over rows given a chunk at a time, for data larger than host
 * memory or than half a device: the index udf_index_build (n_modules 1) or
 * udf_index_build_sharded would give over chunk 0 followed by udf_index_add
 * of each further chunk, in order -- the same centroids (k-means on chunk 0,
 * or params->centroids), lists, list order and search results -- but each
 * device allocates its lists once, at their final sizes: it holds its part
 * of the index and one chunk, where an add holds its part twice.  The chunks
 * are asked for in two passes, in order (the assignment, then the placement;
 * chunk 0 also once before, for its width and the checks), and must be the
 * same rows every time.  Between the passes the host keeps 4 bytes a row.
 * A sharded index's lists are cut between the devices by their final sizes.
 * A callback that returns non-zero fails the build with UDF_ERROR_IO; a
 * chunk whose row count changes between the passes with
 * UDF_ERROR_INVALID_ARGUMENT. */
UDF_API udf_status udf_index_build_chunked(udf_module *const *modules, size_t n_modules, const char *metric,
                                           size_t n_chunks, udf_chunk_fn chunk, void *user,
                                           const udf_index_params *params, udf_index **out);

typedef struct udf_shard_info {
  int32_t device;       /* the CUDA ordinal of the shard's runtime */
  uint32_t list_begin;  /* its lists: [list_begin, list_end) (by vectors: every list, 0 .. n_lists) */
  uint32_t list_end;
  uint32_t layout;      /* UDF_SHARD_BY_LISTS or UDF_SHARD_BY_VECTORS (a one-GPU index: by lists) */
  int64_t size;         /* its vectors */
} udf_shard_info;
/* Shards of an index: 1 for a one-GPU index (its info: the whole index). */
UDF_API udf_status udf_index_shard_count(const udf_index *ix, size_t *count);
UDF_API udf_status udf_index_shard_info(const udf_index *ix, size_t shard, udf_shard_info *out);
/* "nccl", "peer" or "none" (one shard); valid while the index lives. */
UDF_API const char *udf_index_shard_transport(const udf_index *ix);

/* ---------------------------------------------------------------- search */

/* A device array: a copy of a host array in device memory that the runtime
 * owns, for a capture value bound at many searches (a filter's allow-list,
 * a metric's weights).  A host array binding costs every search a pass
 * over its bytes (compared with the last upload, copied to the GPU when they
 * differ); the device array's view (udf_device_array_tensor) is read in
 * place, like any device array.  Its contents are a snapshot of the host array at
 * udf_device_array_create and never change afterwards (no call writes
 * them), so a sharded index copies it to each of its other devices once, at
 * the first search that binds it there, and keeps those copies with the
 * array (a caller's device array is copied there at every search: it may
 * have changed).  The array retains its device's primary context and may
 * outlive the runtime that made it; it must outlive the searches that read
 * it (udf_index_search_async: until the stream has passed them).  Apart
 * from create, which uses the runtime's stream (one thread at a time, as
 * for any call on the runtime), its calls may come from any thread. */
typedef struct udf_device_array udf_device_array;

/* Copies `host` (a host tensor, device UDF_HOST_DEVICE: rows x cols >= 1 of
 * any dtype, rows contiguous or row_stride apart) into new device memory
 * of rt's device; returns when the copy is complete.  A device tensor is
 * refused (UDF_ERROR_INVALID_ARGUMENT: bind it as it is). */
UDF_API udf_status udf_device_array_create(udf_runtime *rt, const udf_tensor *host, udf_device_array **out);
/* Its view: data in device memory (256-byte aligned), device = the
 * runtime's ordinal, the host tensor's dtype, rows and cols, row_stride 0
 * (packed).  Valid until udf_device_array_destroy. */
UDF_API udf_status udf_device_array_tensor(const udf_device_array *a, udf_tensor *out);
/* Frees the array and its copies on other devices; NULL is accepted. */
UDF_API void udf_device_array_destroy(udf_device_array *a);

/* A capture value bound by name.  Arrays: `tensor` (1 x dim or dim x 1,
 * host or device, dtype = the capture's type; host arrays are copied at
 * each search, device arrays -- a udf_device_array's view among them -- are
 * read in place).
 * Scalars: `tensor` may be NULL and the value given in f32 or i32 (by the
 * capture's type), or a 1 x 1 host tensor. */
typedef struct udf_capture_binding {
  const char *name;
  const udf_tensor *tensor;
  float f32;
  int32_t i32;
} udf_capture_binding;

typedef struct udf_search_params {
  size_t struct_size;           /* the caller's sizeof(udf_search_params) (udf_search_params_default sets it) */
  uint32_t k;                   /* 1 .. max_k of the metric (1024), and <= the index size */
  uint32_t n_probes;            /* 1 .. n_lists */
  uint32_t queries_per_item;    /* 0 = automatic (1 for small batches, up to 8, 12 or 16 for k <= 32 v1 scans of many queries) */
  uint32_t max_batch;           /* queries per internal chunk; 0 = automatic */
  const udf_capture_binding *captures;  /* the metric's */
  size_t n_captures;
  /* A filter of the index's module (NULL: none), linked with the index's
   * metric (udf-link pairs them).  Only vectors it keeps for a query are
   * scored and reported; rows with fewer than k kept vectors are padded
   * (id -1, worst distance).  Its captures are bound like the metric's, by
   * name; its arrays may have any length >= 1 (the filter indexes them). */
  const char *filter;
  const udf_capture_binding *filter_captures;
  size_t n_filter_captures;
} udf_search_params;

/* Fills the first `struct_size` bytes of *p with the defaults (struct_size, k 10, n_probes 32, no filter). */
UDF_API void udf_search_params_init(udf_search_params *p, size_t struct_size);
static inline void udf_search_params_default(udf_search_params *p) { udf_search_params_init(p, sizeof *p); }

/* Searches `queries` (n x dim, the index's element type, host or device).
 * Outputs: distances F32 n x k and ids I64 n x k (host or device, rows
 * contiguous or strided), nearest first; rows with fewer than k candidates
 * are padded with id -1 and the worst distance (+inf for min, -inf for max).
 * Distances are the finalized metric values.  Errors: k = 0 or too large,
 * n_probes = 0 or > n_lists, dim or dtype mismatch, missing/unknown/mistyped
 * capture, array capture length != dim (metric captures), a filter not in
 * the module (UDF_ERROR_INVALID_ARGUMENT) or not linked with the metric
 * (UDF_ERROR_MISMATCH).  With a filter, keep(query, id) gets the query's
 * row in `queries` and the vector's id. */
UDF_API udf_status udf_index_search(udf_index *ix, const udf_tensor *queries, const udf_search_params *params,
                                    const udf_tensor *out_distances, const udf_tensor *out_ids);

/* Queues the same search on `stream` (a CUstream of the runtime's device and
 * context; NULL: the runtime's stream) and returns without waiting: no host
 * round trip, no synchronization.  Outputs must be device memory (host
 * outputs: UDF_ERROR_INVALID_ARGUMENT; use udf_index_search); host queries
 * are copied into pinned staging before the call returns, so the caller may
 * reuse them at once; device queries, device captures and the outputs must
 * stay valid until the stream reaches the end of the search.  Searches of
 * one index run one after the other on the GPU, whatever their streams (each
 * waits for the previous one), so they may share the index's scratch
 * memory.  Argument errors are reported by the call, as for
 * udf_index_search; udf_index_last_search_stats is not updated. */
UDF_API udf_status udf_index_search_async(udf_index *ix, const udf_tensor *queries, const udf_search_params *params,
                                          const udf_tensor *out_distances, const udf_tensor *out_ids, void *stream);

/* EXACT SEARCH AND REFINE (docs/exact-search.md): a metric's UDF over every
 * row of a dataset, or over each query's candidates, with no index.  The
 * module's rows scans do the work (ivf_flat_v1.h, ROWS LAYOUT): linked with
 * udf-link --exact or udf_link_options.exact, or on demand (the default of
 * udf_module_link_ex) when first used; a module without them gives
 * UDF_ERROR_UNSUPPORTED saying so.  `dataset`: n x dim rows (n >= 1) of the
 * metric's element type, host or device memory of the runtime's device,
 * rows contiguous or row_stride apart; a device dataset whose rows start on
 * 16 bytes and are dim rounded up to 16 bytes apart is read in place, any
 * other is copied first (a host one to the device).  Queries, outputs and
 * `params` as for udf_index_search (k up to the metric's max_k; filter and
 * captures; max_batch and queries_per_item), n_probes ignored.  Results are
 * the k best rows under the metric, ids their row numbers, nearest first
 * (ties to the smaller row for exact search), padded with id -1 where fewer
 * rows (a filter's) remain.  Synchronous; one call at a time per module
 * (the module keeps each metric's scratch). */
UDF_API udf_status udf_exact_search(udf_module *m, const char *metric, const udf_tensor *dataset, const udf_tensor *queries,
                                    const udf_search_params *params, const udf_tensor *out_distances,
                                    const udf_tensor *out_ids);
/* Re-ranking: for query q, the k best of the rows candidates[q][0 .. m-1]
 * (an n_queries x m int64 tensor, host or device memory) under the metric.
 * A candidate -1 is padding; a row named twice counts once; an id below -1
 * or at or above the dataset's rows is UDF_ERROR_INVALID_ARGUMENT naming
 * the first such and its place (nothing is read there; the outputs then
 * hold the result over the other candidates).  Ids in the results are row
 * numbers, ties to the earlier candidate. */
UDF_API udf_status udf_refine(udf_module *m, const char *metric, const udf_tensor *dataset, const udf_tensor *queries,
                              const udf_tensor *candidates, const udf_search_params *params, const udf_tensor *out_distances,
                              const udf_tensor *out_ids);

/* Timings of the last udf_index_search on this index, milliseconds:
 * total_ms is the call's wall time (host clock); the stages' times are GPU
 * times between CUDA events (coarse includes the queries' upload, merge the
 * results' download), summed over the internal chunks, and are measured only
 * while stage timing is on (udf_index_set_stage_timing; 0 otherwise).
 * chunks, queries_per_item and work_items are always filled in. */
typedef struct udf_search_stats {
  double total_ms;
  double coarse_ms;
  double schedule_ms;
  double scan_ms;
  double merge_ms;
  uint32_t chunks;
  uint32_t queries_per_item;
  uint64_t work_items;
} udf_search_stats;
UDF_API udf_status udf_index_last_search_stats(const udf_index *ix, udf_search_stats *out);

/* Turns the stage times of udf_index_search on this index on (enabled != 0)
 * or off (the default).  They take five CUDA events a chunk, a cost a small
 * search can measure (docs/runtime.md); total_ms and the work counts do not
 * need them. */
UDF_API udf_status udf_index_set_stage_timing(udf_index *ix, int enabled);

/* The work of the last udf_index_search on this index (not the async one),
 * summed over its chunks: `scored`, the (query, vector) pairs it scored (per
 * query the sizes of its probed lists added up; with a filter, before it);
 * `list_bytes_read`, the list data its scan read (padded groups of 32 slots;
 * a list read once for all the queries of an item), so list_bytes_read /
 * scan_ms is the scan's bandwidth. */
typedef struct udf_search_work {
  uint64_t scored;
  uint64_t list_bytes_read;
} udf_search_work;
UDF_API udf_status udf_index_last_search_work(const udf_index *ix, udf_search_work *out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UDF_RUNTIME_H */

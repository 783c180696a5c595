/*
 * UDF ABI v2: "ivf_flat.metric.v2" -- metrics that need more than one running
 * value, or the whole vector.  It lives beside ABI v1 (metric_v1.h): a module
 * may link v1 and v2 metrics together.  A v2 metric picks one of two shapes.
 *
 * STATE: a fold over the coordinates into a small user state.
 *
 *     void  update(ACC x, ACC y, udf_state_v2 *s, const udf_ctx_v2 *ctx);
 *     float finalize(const udf_state_v2 *s, const udf_ctx_v2 *ctx);
 *
 *   update is called once per coordinate, dim = 0 .. n_dims-1 in order, for
 *   every (query, stored vector) pair; finalize once at the end returns the
 *   distance.  The state is UDF_ABI_METRIC_V2_STATE_WORDS (8) 32-bit words,
 *   zero-initialised or from the manifest's `initial` list (udfc --initial
 *   a,b,c: the first words, in the accumulator type; the rest are zero).
 *   The state streams through the same scan as v1: each stored vector is read
 *   once per tile for all of its queries.  Keep the state in the words you
 *   use: the words a UDF never touches cost nothing once inlined.
 *
 * VECTOR: one call per (query, stored vector) with both vectors whole.
 *
 *     float distance(const ACC *x, const ACC *y, uint32_t n_dims, const udf_ctx_v2 *ctx);
 *
 *   x is the stored vector and y the query, both converted to ACC and
 *   contiguous (x[0] .. x[n_dims-1]); the scan stages them in shared memory.
 *   The function may loop, branch and read captures across dimensions in any
 *   order.  It must not write through x or y.
 *
 * x is always the stored (database) vector and y the query, as in v1.  ACC
 * is the accumulator type (f32 elements: float; f16: float; i8/u8: int32_t or
 * float), as in v1.  Ordering (min/max), the coarse (centroid) metric and the
 * captures are metadata in the manifest, as in v1.  A distance that is NaN,
 * or +inf under min / -inf under max, is never reported.
 *
 * udf_ctx_v2 carries the coordinate (state shape's update only), the query's
 * row in the caller's batch, the stored vector's id, and the captures.
 *
 * This header is valid C99/C++ for the host and CUDA C++ for the device; udfc
 * makes it available to NVRTC as <udf/abi/metric_v2.h> and includes it before
 * a v2 metric's source.
 */
#ifndef UDF_ABI_METRIC_V2_H
#define UDF_ABI_METRIC_V2_H

#include <udf/abi/metric_v1.h>

#if defined(__CUDACC_RTC__)
typedef long long int64_t;
#endif

#define UDF_ABI_METRIC_V2_ID "ivf_flat.metric.v2"
#define UDF_ABI_METRIC_V2_VERSION 2
#define UDF_ABI_METRIC_V2_MAX_CAPTURES UDF_ABI_METRIC_V1_MAX_CAPTURES
#define UDF_ABI_METRIC_V2_STATE_WORDS 8

/* Captures are passed as in v1 (device array pointers or scalars). */
typedef udf_capture_v1 udf_capture_v2;

/* The user state of the state shape: 8 words, read as floats or integers. */
typedef union udf_state_v2 {
  float f[UDF_ABI_METRIC_V2_STATE_WORDS];
  int32_t i[UDF_ABI_METRIC_V2_STATE_WORDS];
  uint32_t u[UDF_ABI_METRIC_V2_STATE_WORDS];
} udf_state_v2;

/* The context of one call.  Layout is part of the ABI: 24 + 8 * 8 bytes. */
typedef struct udf_ctx_v2 {
  uint32_t dim;        /* state update: the coordinate being folded; finalize and vector: n_dims */
  uint32_t n_dims;     /* dimension of the vectors */
  uint32_t query;      /* the query's row in the caller's batch */
  uint32_t n_captures; /* number of captures declared in the manifest */
  int64_t id;          /* the stored vector's id (the id given at index build) */
  udf_capture_v2 captures[UDF_ABI_METRIC_V2_MAX_CAPTURES];
} udf_ctx_v2;

typedef void (*udf_update_v2_f32_fn)(float x, float y, udf_state_v2 *s, const udf_ctx_v2 *ctx);
typedef void (*udf_update_v2_i32_fn)(int32_t x, int32_t y, udf_state_v2 *s, const udf_ctx_v2 *ctx);
typedef float (*udf_finalize_v2_fn)(const udf_state_v2 *s, const udf_ctx_v2 *ctx);
typedef float (*udf_distance_v2_f32_fn)(const float *x, const float *y, uint32_t n_dims, const udf_ctx_v2 *ctx);
typedef float (*udf_distance_v2_i32_fn)(const int32_t *x, const int32_t *y, uint32_t n_dims, const udf_ctx_v2 *ctx);

#ifdef __cplusplus
static_assert(sizeof(udf_state_v2) == 32, "udf_state_v2 must be 32 bytes");
static_assert(sizeof(udf_ctx_v2) == 88, "udf_ctx_v2 must be 88 bytes");
#endif

/* Captures by name: as in v1, udfc generates `udf_capture_NAME(ctx)` for the
 * v2 context, and UDF_CAPTURE(ctx, NAME) reads it. */

#endif /* UDF_ABI_METRIC_V2_H */

/*
 * UDF ABI v1: "ivf_flat.metric.v1" -- the coordinate-wise accumulator.
 *
 * A metric is a device function with C linkage that folds one coordinate
 * pair into an accumulator:
 *
 *     ACC f(ACC x, ACC y, ACC acc, const udf_ctx_v1 *ctx);
 *
 * x is the coordinate of the stored (database) vector, y the coordinate of
 * the query, acc the accumulator so far (starting at the manifest's
 * `initial` value), and ctx carries the coordinate index and the captures.
 * Elements are converted to the accumulator type before the call:
 *
 *     element  accumulator (default first)   ACC in C
 *     f32      f32                           float
 *     f16      f32                           float
 *     i8       i32 | f32                     int32_t | float
 *     u8       i32 | f32                     int32_t | float
 *
 * An optional finalize function maps the accumulator to the reported
 * distance (always f32):
 *
 *     float g(ACC acc, const udf_ctx_v1 *ctx);
 *
 * Without one, the distance is (float)acc.  Ordering (min: smaller is
 * nearer, max: larger is nearer), the initial accumulator and the coarse
 * (centroid) metric are metadata in the artifact manifest, not code.
 *
 * This header is valid C99/C++ for the host and CUDA C++ for the device;
 * udfc makes it available to NVRTC as <udf/abi/metric_v1.h> and includes
 * it before the user's source.
 */
#ifndef UDF_ABI_METRIC_V1_H
#define UDF_ABI_METRIC_V1_H

#if defined(__CUDACC_RTC__)
typedef int int32_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#define UDF_ABI_METRIC_V1_ID "ivf_flat.metric.v1"
#define UDF_ABI_METRIC_V1_VERSION 1
#define UDF_ABI_METRIC_V1_MAX_CAPTURES 8

/* One captured value.  Arrays are passed as a device pointer to their first
 * element (f32: const float*, f16: const __half*, i32: const int32_t*,
 * u8: const uint8_t*); scalars are passed by value. */
typedef union udf_capture_v1 {
  const void *ptr;
  float f32;
  int32_t i32;
  uint64_t bits;
} udf_capture_v1;

/* The context of one call.  Layout is part of the ABI: 16 + 8 * 8 bytes. */
typedef struct udf_ctx_v1 {
  uint32_t dim;        /* index of the coordinate being folded, 0 <= dim < n_dims */
  uint32_t n_dims;     /* dimension of the vectors */
  uint32_t n_captures; /* number of captures declared in the manifest */
  uint32_t reserved;   /* zero */
  udf_capture_v1 captures[UDF_ABI_METRIC_V1_MAX_CAPTURES];
} udf_ctx_v1;

typedef float (*udf_metric_v1_f32_fn)(float x, float y, float acc, const udf_ctx_v1 *ctx);
typedef int32_t (*udf_metric_v1_i32_fn)(int32_t x, int32_t y, int32_t acc, const udf_ctx_v1 *ctx);
typedef float (*udf_finalize_v1_f32_fn)(float acc, const udf_ctx_v1 *ctx);
typedef float (*udf_finalize_v1_i32_fn)(int32_t acc, const udf_ctx_v1 *ctx);

#ifdef __cplusplus
static_assert(sizeof(udf_capture_v1) == 8, "udf_capture_v1 must be 8 bytes");
static_assert(sizeof(udf_ctx_v1) == 80, "udf_ctx_v1 must be 80 bytes");
#endif

/* Captures by name.  udfc generates, for each `--capture NAME:TYPE[]` or
 * `--capture NAME:TYPE`, an accessor `udf_capture_NAME(ctx)` returning the
 * typed pointer or the scalar; UDF_CAPTURE(ctx, NAME) reads it. */
#define UDF_CAPTURE(ctx, name) udf_capture_##name(ctx)

#endif /* UDF_ABI_METRIC_V1_H */

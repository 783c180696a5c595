/*
 * IVF index kernels v1: the UDF-independent kernels of the runtime (element
 * conversion + normalization, coarse probe / k-means assignment, k-means
 * accumulation).  Compiled by nvcc into one fatbin (kernels/ivf_index_v1.cu)
 * that is embedded in libudf_runtime.so and loaded next to each module: they
 * are not in the LTO kernel pack, so udf-link never pays for them.
 *
 * All kernels: 1-D block of UDF_IVF_INDEX_V1_THREADS threads, one row (a
 * vector or a query) per block, grid = rows (x) [* grid.y tiles].  Arguments
 * are one struct passed by value.  Element codes match udf_dtype: 0 f32,
 * 1 f16, 2 i8, 3 u8.
 */
#ifndef UDF_KERNELS_IVF_INDEX_V1_H
#define UDF_KERNELS_IVF_INDEX_V1_H

#if defined(__CUDACC_RTC__)
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#define UDF_IVF_INDEX_V1_THREADS 128
/* Coarse metric codes. */
#define UDF_IVF_INDEX_V1_L2 0
#define UDF_IVF_INDEX_V1_IP 1 /* also cosine, on normalized rows and centroids */

/* udf_ivf_index_v1_convert: dst[r] = src[r] converted (f32 or f16 out),
 * optionally divided by its L2 norm (rows of norm 0 stay 0).  No dynamic
 * shared memory. */
typedef struct udf_ivf_convert_args_v1 {
  const void *src;
  void *dst;
  uint64_t src_stride; /* elements */
  uint64_t dst_stride; /* elements */
  uint32_t rows;
  uint32_t dim;
  uint32_t src_elem;
  uint32_t dst_elem;   /* 0 f32 or 1 f16 */
  uint32_t normalize;
  uint32_t reserved;
} udf_ivf_convert_args_v1;

/* udf_ivf_index_v1_nearest: for each f32 row, the n_out nearest centroids
 * under `metric` (L2: smallest squared distance; IP: largest dot product),
 * nearest first, ties to the smaller list.  Writes out_lists[r * n_out + i]
 * and, when out_dists is not null, the distances.  Dynamic shared memory =
 * UDF_IVF_NEAREST_V1_SMEM_BYTES(n_lists, dim). */
typedef struct udf_ivf_nearest_args_v1 {
  const float *rows;       /* [n_rows][dim] */
  const float *centroids;  /* [n_lists][dim] */
  uint32_t *out_lists;     /* [n_rows][n_out] */
  float *out_dists;        /* [n_rows][n_out] or null */
  uint32_t n_rows;
  uint32_t dim;
  uint32_t n_lists;
  uint32_t n_out;          /* 1 .. n_lists */
  uint32_t metric;
  uint32_t sort_size;      /* power of two >= n_lists, >= 2 */
} udf_ivf_nearest_args_v1;
#define UDF_IVF_NEAREST_V1_SMEM_BYTES(sort_size, dim) (8u * (sort_size) + 4u * (dim))

/* udf_ivf_index_v1_accumulate: sums[labels[r]][d] += rows[r][d], counts[labels[r]] += 1. */
typedef struct udf_ivf_accumulate_args_v1 {
  const float *rows;
  const uint32_t *labels;
  float *sums;           /* [n_lists][dim] */
  uint32_t *counts;      /* [n_lists] */
  uint32_t n_rows;
  uint32_t dim;
} udf_ivf_accumulate_args_v1;

#endif /* UDF_KERNELS_IVF_INDEX_V1_H */

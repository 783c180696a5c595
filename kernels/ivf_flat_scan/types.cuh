// The scan's and the merge's vocabulary: block shape, element and
// accumulator types, the UDF's functions by metric shape, and the loads that
// turn stored vectors and queries into accumulator values.
#pragma once
#include <cuda_fp16.h>

#include <udf/kernels/ivf_flat_v1.h>

namespace udf_kernels {

constexpr int kThreads = UDF_IVF_V1_BLOCK_THREADS;
constexpr int kWarps = kThreads / 32;
constexpr int kBatch = 8;  // 16-byte loads in flight per lane before the metric runs
constexpr unsigned kFull = 0xFFFFFFFFu;

// ---------------------------------------------------------------------------
// Element and accumulator types.

struct ElemF32 { using raw = float; static constexpr int veclen = 4; };
struct ElemF16 { using raw = unsigned short; static constexpr int veclen = 8; };
struct ElemI8 { using raw = signed char; static constexpr int veclen = 16; };
struct ElemU8 { using raw = unsigned char; static constexpr int veclen = 16; };

template <class A> struct AccFns;
template <> struct AccFns<float> {
  using metric = udf_metric_v1_f32_fn;
  using finalize = udf_finalize_v1_f32_fn;
  static __device__ __forceinline__ float from_bits(uint32_t b) { return __uint_as_float(b); }
};
template <> struct AccFns<int32_t> {
  using metric = udf_metric_v1_i32_fn;
  using finalize = udf_finalize_v1_i32_fn;
  static __device__ __forceinline__ int32_t from_bits(uint32_t b) { return static_cast<int32_t>(b); }
};

// The UDF's functions, by ABI: v1 (metric + optional finalize), v2 state
// (update + finalize), v2 vector (distance).
enum class Shape { V1, State, Vector };
template <class A> struct UdfV1 {
  static constexpr Shape shape = Shape::V1;
  typename AccFns<A>::metric metric;
  typename AccFns<A>::finalize finalize;
};
template <class A> struct UdfState;
template <> struct UdfState<float> {
  static constexpr Shape shape = Shape::State;
  udf_update_v2_f32_fn update;
  udf_finalize_v2_fn finalize;
};
template <> struct UdfState<int32_t> {
  static constexpr Shape shape = Shape::State;
  udf_update_v2_i32_fn update;
  udf_finalize_v2_fn finalize;
};
template <class A> struct UdfVector;
template <> struct UdfVector<float> {
  static constexpr Shape shape = Shape::Vector;
  udf_distance_v2_f32_fn distance;
};
template <> struct UdfVector<int32_t> {
  static constexpr Shape shape = Shape::Vector;
  udf_distance_v2_i32_fn distance;
};

// One scalar element (a query coordinate) converted to the accumulator type.
template <class E, class A> __device__ __forceinline__ A load_scalar(const void* base, uint64_t i) {
  const typename E::raw r = static_cast<const typename E::raw*>(base)[i];
  if constexpr (sizeof(typename E::raw) == 2) {
    return static_cast<A>(__half2float(__ushort_as_half(r)));
  } else {
    return static_cast<A>(r);
  }
}

// A 16-byte load unpacked into veclen accumulator values.
// kByteExtract: u8 bytes through prmt (__byte_perm) instead of shift + mask.
// The ABI v2 state scans use it: nvJitLink 13.0 crashes (SIGSEGV) optimising
// a u8 state scan whose update sums two byte products (s[0] += x*y; s[1] +=
// x*x) from shift + mask extracts once the module has another metric; the
// opaque extract avoids the pattern.  v1 scans keep shift + mask.
template <class E, class A, bool kByteExtract = false>
__device__ __forceinline__ void unpack(const uint4& r, A (&x)[E::veclen]) {
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
  if constexpr (E::veclen == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = static_cast<A>(__uint_as_float(w[i]));
  } else if constexpr (E::veclen == 8) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      x[2 * i] = static_cast<A>(f.x);
      x[2 * i + 1] = static_cast<A>(f.y);
    }
  } else if constexpr (sizeof(typename E::raw) == 1 && static_cast<typename E::raw>(-1) < 0) {
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = static_cast<A>(static_cast<int32_t>(w[i / 4] << (24 - 8 * (i % 4))) >> 24);
  } else if constexpr (kByteExtract) {
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = static_cast<A>(static_cast<int32_t>(__byte_perm(w[i / 4], 0u, 0x4440u + (i % 4))));
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = static_cast<A>(static_cast<int32_t>((w[i / 4] >> (8 * (i % 4))) & 0xFFu));
  }
}

}  // namespace udf_kernels

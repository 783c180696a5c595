// Out of memory and driver errors in the middle of a build or a search, on
// the GPU.  Every allocation a build or a search makes is made to fail in
// turn (the runtime's fault hook, udf_testing_cuda_fault: the n-th call of a
// driver function returns an error instead of reaching the driver), and so is
// every kernel launch, copy, memset and event/stream call a search makes;
// each time the call must fail with the right status and a message naming the
// driver call (and, for an allocation, what it was for), write nothing, leave
// the index and the module usable, and the next call must succeed with
// results equal to the float64 reference.  A fault that never happens ends a
// sweep: the call then succeeded with the hook armed but untouched.  And two
// real out-of-memory cases: a search whose one chunk of candidates is larger
// than any GPU, and an index build of 1.1 x the card's memory.
#include <sys/mman.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <map>

#include "runtime_test_support.h"

extern "C" udf_status udf_testing_cuda_fault(const char* function, int64_t calls_first, int cuda_result,
                                             int64_t* pending);

namespace {

// Disarms `fn` and says whether the fault armed last is still pending.
bool disarm(const char* fn) {
  int64_t pending = 0;
  EXPECT_EQ(udf_testing_cuda_fault(fn, -1, 0, &pending), UDF_OK) << udf_last_error();
  return pending > 0;
}

struct Faults : Fixture {
  std::mt19937_64 rng{fresh_seed()};
  Data base, q;
  void SetUp() override {
    Fixture::SetUp();
    base = make_data(rng, UDF_DTYPE_F32, 3000, 24);
    q = make_data(rng, UDF_DTYPE_F32, 300, 24);
  }
  // The module builds an index that searches correctly.
  void expect_usable_after_build(udf_module* m) {
    udf_index* ix = build(m, "udf_builtin_l2", base, 16, 2.0, 3);
    ASSERT_NE(ix, nullptr);
    expect_usable(ix, 16, "a build after the failure");
    udf_index_destroy(ix);
  }
  // The index is usable: an exact search equals the reference.
  void expect_usable(udf_index* ix, uint32_t n_lists, const std::string& what) {
    SCOPED_TRACE(what + ": the next search");
    Result r;
    ASSERT_EQ(search(ix, q, 20, n_lists, r), UDF_OK) << udf_last_error();
    expect_exact(base, q, r, 20, false, l2, 2e-4);
  }
};

TEST(FaultHook, RefusesUnknownFunctions) {
  REQUIRE_GPU();
  EXPECT_EQ(udf_testing_cuda_fault("cuNoSuchCall", 0, 2, nullptr), UDF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(udf_last_error()).find("cuNoSuchCall"), std::string::npos);
  int64_t pending = -1;
  EXPECT_EQ(udf_testing_cuda_fault("cuMemAlloc_v2", -1, 0, &pending), UDF_OK) << udf_last_error();
  EXPECT_EQ(pending, 0);
}

// Every allocation of a build fails in turn: UDF_ERROR_OUT_OF_MEMORY naming
// what was being allocated, no index, and the module builds the next one.
TEST_F(Faults, EveryAllocationOfABuild) {
  REQUIRE_GPU();
  for (const char* fn : {"cuMemAlloc", "cuMemHostAlloc"}) {
    int failures = 0;
    for (int64_t n = 0; n < 500; ++n) {
      udf_index_params p;
      udf_index_params_default(&p);
      p.n_lists = 16;
      p.kmeans_iters = 3;
      udf_tensor t = base.tensor();
      udf_index* ix = reinterpret_cast<udf_index*>(0x1);
      ASSERT_EQ(udf_testing_cuda_fault(fn, n, CUDA_ERROR_OUT_OF_MEMORY, nullptr), UDF_OK) << udf_last_error();
      const udf_status s = udf_index_build(builtin, "udf_builtin_l2", &t, nullptr, &p, &ix);
      const std::string err = udf_last_error();
      const bool pending = disarm(fn);
      const std::string what = std::string(fn) + " #" + std::to_string(n);
      if (s == UDF_OK) {
        EXPECT_TRUE(pending) << what << ": the build succeeded although its fault happened (an error swallowed)";
        expect_usable(ix, 16, what);
        udf_index_destroy(ix);
        break;
      }
      ++failures;
      EXPECT_EQ(s, UDF_ERROR_OUT_OF_MEMORY) << what << ": " << err;
      EXPECT_NE(err.find(fn), std::string::npos) << what << ": " << err;
      EXPECT_NE(err.find("allocating"), std::string::npos) << what << ": the message names what: " << err;
      EXPECT_EQ(ix, nullptr) << what;
      if (HasFailure()) break;
    }
    std::printf("%s: a build failed cleanly at each of its %d allocations, then built\n", fn, failures);
    if (std::string(fn) == "cuMemAlloc") {
      EXPECT_GT(failures, 0);
    }
  }
}

// Every allocation and every driver call of a search fails in turn: the
// status for it (OUT_OF_MEMORY / CUDA), a message naming the call, outputs
// untouched, and the same index then searches correctly.
TEST_F(Faults, EveryDriverCallOfASearch) {
  REQUIRE_GPU();
  udf_index* ix = build(builtin, "udf_builtin_l2", base, 16, 2.0, 3);
  ASSERT_NE(ix, nullptr);
  struct Case {
    const char* fn;
    CUresult error;
    udf_status status;
  };
  const Case cases[] = {
      {"cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY, UDF_ERROR_OUT_OF_MEMORY},
      {"cuMemHostAlloc", CUDA_ERROR_OUT_OF_MEMORY, UDF_ERROR_OUT_OF_MEMORY},
      {"cuLaunchKernel", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, UDF_ERROR_CUDA},
      {"cuMemcpyHtoDAsync", CUDA_ERROR_INVALID_VALUE, UDF_ERROR_CUDA},
      {"cuMemcpyDtoHAsync", CUDA_ERROR_INVALID_VALUE, UDF_ERROR_CUDA},
      {"cuMemcpy2DAsync", CUDA_ERROR_INVALID_VALUE, UDF_ERROR_CUDA},
      {"cuMemsetD32Async", CUDA_ERROR_INVALID_VALUE, UDF_ERROR_CUDA},
      {"cuEventRecord", CUDA_ERROR_INVALID_HANDLE, UDF_ERROR_CUDA},
      {"cuStreamWaitEvent", CUDA_ERROR_INVALID_HANDLE, UDF_ERROR_CUDA},
      {"cuStreamSynchronize", CUDA_ERROR_INVALID_HANDLE, UDF_ERROR_CUDA},
  };
  std::map<std::string, int> failed_at;
  for (const Case& c : cases) {
    int failures = 0;
    for (int64_t n = 0; n < 500; ++n) {
      // A copy of the index (same lists) for each try: a search that fails
      // part-way through leaves a fresh index's first-use state half made,
      // which is what must survive.
      udf_index* copy = nullptr;
      ASSERT_EQ(udf_index_with_metric(ix, builtin, "udf_builtin_l2", &copy), UDF_OK) << udf_last_error();
      const uint32_t k = 20;
      Result r;
      r.dist.assign(q.rows * k, std::numeric_limits<float>::quiet_NaN());
      r.ids.assign(q.rows * k, 0x5A5A5A5A5A5A5A5A);
      udf_search_params sp;
      udf_search_params_default(&sp);
      sp.k = k;
      sp.n_probes = 16;
      sp.max_batch = 100;  // three chunks: faults between chunks too
      udf_tensor qt = q.tensor();
      udf_tensor od = udf::tensor(r.dist.data(), UDF_DTYPE_F32, q.rows, k), oi = udf::tensor(r.ids.data(), UDF_DTYPE_I64, q.rows, k);
      ASSERT_EQ(udf_testing_cuda_fault(c.fn, n, c.error, nullptr), UDF_OK) << udf_last_error();
      const udf_status s = udf_index_search(copy, &qt, &sp, &od, &oi);
      const std::string err = udf_last_error();
      const bool pending = disarm(c.fn);
      const std::string what = std::string(c.fn) + " #" + std::to_string(n);
      if (s == UDF_OK) {
        EXPECT_TRUE(pending) << what << ": the search succeeded although its fault happened (an error swallowed)";
        SCOPED_TRACE(what + ": untouched fault");
        expect_exact(base, q, r, k, false, l2, 2e-4);
        udf_index_destroy(copy);
        break;
      }
      ++failures;
      EXPECT_EQ(s, c.status) << what << ": " << err;
      EXPECT_NE(err.find(c.fn), std::string::npos) << what << ": the message names the call: " << err;
      if (c.status == UDF_ERROR_OUT_OF_MEMORY) {
        EXPECT_NE(err.find("allocating"), std::string::npos) << what << ": the message names what: " << err;
      }
      // Outputs are host memory here: a failed search copies nothing back...
      // except chunks already finished, which a failure may leave written:
      // the contract is the status, not the buffers (runtime.h).
      expect_usable(copy, 16, what);
      udf_index_destroy(copy);
      if (HasFailure()) break;
    }
    failed_at[c.fn] = failures;
  }
  for (const auto& [fn, n] : failed_at) std::printf("  %-20s a search failed cleanly at %d call(s), then searched\n", fn.c_str(), n);
  EXPECT_GT(failed_at["cuLaunchKernel"], 0);
  EXPECT_GT(failed_at["cuMemcpyHtoDAsync"], 0);
  expect_usable(ix, 16, "after every fault");
  udf_index_destroy(ix);
}

// A real out-of-memory, no hook: one chunk of candidates (400k queries x 64
// probes x k 1024 x 8 bytes = 200 GB) larger than any GPU's memory.  The
// host outputs are reserved address space only (never touched by a failing
// search).  Then the same index searches normally.
TEST_F(Faults, SearchLargerThanTheGpu) {
  REQUIRE_GPU();
  const Data big_base = make_data(rng, UDF_DTYPE_F32, 70000, 8);
  udf_index* ix = build(builtin, "udf_builtin_l2", big_base, 64, 2.0, 2);
  ASSERT_NE(ix, nullptr);
  const int64_t nq = 400000;
  const uint32_t k = 1024;
  std::vector<float> qv(static_cast<size_t>(nq) * 8, 0.5f);
  const size_t dist_bytes = static_cast<size_t>(nq) * k * 4, id_bytes = static_cast<size_t>(nq) * k * 8;
  void* dist = mmap(nullptr, dist_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void* ids = mmap(nullptr, id_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(dist, MAP_FAILED);
  ASSERT_NE(ids, MAP_FAILED);
  udf_tensor qt = udf::tensor(qv.data(), UDF_DTYPE_F32, nq, 8);
  udf_tensor od = udf::tensor(static_cast<float*>(dist), UDF_DTYPE_F32, nq, k);
  udf_tensor oi = udf::tensor(static_cast<int64_t*>(ids), UDF_DTYPE_I64, nq, k);
  udf_search_params sp;
  udf_search_params_default(&sp);
  sp.k = k;
  sp.n_probes = 64;
  sp.max_batch = static_cast<uint32_t>(nq);  // one chunk
  const udf_status s = udf_index_search(ix, &qt, &sp, &od, &oi);
  const std::string err = udf_last_error();
  munmap(dist, dist_bytes);
  munmap(ids, id_bytes);
  EXPECT_TRUE(s == UDF_ERROR_OUT_OF_MEMORY || s == UDF_ERROR_UNSUPPORTED) << udf_status_name(s) << ": " << err;
  std::printf("one 200 GB chunk: %s: %s\n", udf_status_name(s), err.c_str());
  if (s == UDF_ERROR_OUT_OF_MEMORY) {
    EXPECT_NE(err.find("allocating"), std::string::npos) << err;
  }
  // The index and the module are usable.
  const Data small = make_data(rng, UDF_DTYPE_F32, 50, 8);
  Result r;
  ASSERT_EQ(search(ix, small, 10, 64, r), UDF_OK) << udf_last_error();
  expect_exact(big_base, small, r, 10, false, l2, 2e-4);
  udf_index_destroy(ix);
}

// An index larger than the GPU: 1.1 x the card's memory of vectors (dim
// 1024, f32), from a host region of reserved address space that reads as
// zeros (no host memory behind it).  The build streams the rows through the
// coarse assignment, then cannot place the lists: UDF_ERROR_OUT_OF_MEMORY
// naming what it was allocating, no index; the module builds the next one.
TEST_F(Faults, BuildLargerThanTheGpu) {
  REQUIRE_GPU();
  udf_device_info info{};
  ASSERT_EQ(udf_runtime_device_info(gpu().rt, &info), UDF_OK) << udf_last_error();
  const int64_t dim = 1024;
  const int64_t rows = static_cast<int64_t>(static_cast<double>(info.total_memory) * 1.1) / (dim * 4);
  const size_t bytes = static_cast<size_t>(rows) * dim * 4;
  void* zeros = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(zeros, MAP_FAILED) << bytes << " bytes of address space";
  udf_tensor t{zeros, UDF_HOST_DEVICE, UDF_DTYPE_F32, rows, dim, 0};
  udf_index_params p;
  udf_index_params_default(&p);
  p.n_lists = 64;
  p.kmeans_iters = 1;
  udf_index* ix = reinterpret_cast<udf_index*>(0x1);
  const auto t0 = std::chrono::steady_clock::now();
  const udf_status s = udf_index_build(builtin, "udf_builtin_l2", &t, nullptr, &p, &ix);
  const std::string err = udf_last_error();
  munmap(zeros, bytes);
  std::printf("an index of %.1f GB on a %.1f GB GPU: %s after %.1f s: %s\n", bytes / 1e9, info.total_memory / 1e9,
              udf_status_name(s), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              err.c_str());
  EXPECT_EQ(s, UDF_ERROR_OUT_OF_MEMORY) << err;
  EXPECT_NE(err.find("allocating"), std::string::npos) << err;
  EXPECT_EQ(ix, nullptr);
  expect_usable_after_build(builtin);
}

}  // namespace

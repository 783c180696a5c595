// The CUDA library layer (udf/cudalibs): the one loader every library's table
// goes through, the check-and-log helpers, and the runtime's driver and NCCL
// tables (lib/runtime/cuda/cuda_dl.cpp, nccl_dl.cpp) where no driver or NCCL is
// installed: their "not found" paths.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "cuda/cuda_dl.h"
#include "cuda/nccl_dl.h"
#include "udf/cudalibs/check.h"
#include "udf/cudalibs/dl_api.h"
#include "udf/cudalibs/nvrtc.h"
#include "udf/support/cuda_libs.h"

// A function no library defines, for a table that asks for it.
extern "C" int udf_cudalibs_test_absent(int);

#define UDF_TEST_PRESENT(X) X(strlen) X(atoi)
#define UDF_TEST_ABSENT(X) X(strlen) X(udf_cudalibs_test_absent) X(atoi)

namespace {

struct Present {
  UDF_DL_FUNCTIONS(UDF_TEST_PRESENT)
};
struct Absent {
  UDF_DL_FUNCTIONS(UDF_TEST_ABSENT)
};

TEST(CudaLibs, LoaderResolvesEveryFunctionOfATable) {
  const auto lib = udf::DynamicLibrary::open({"libc.so.6"}, "libc");
  ASSERT_TRUE(lib.loaded()) << lib.error();
  const auto l = udf::load_functions<Present>(lib);
  EXPECT_TRUE(l.complete());
  ASSERT_NE(l.fn.strlen, nullptr);
  EXPECT_EQ(l.fn.strlen("four"), 4u);
  EXPECT_EQ(l.fn.atoi("-3"), -3);
}

TEST(CudaLibs, LoaderNamesTheFirstMissingFunction) {
  const auto lib = udf::DynamicLibrary::open({"libc.so.6"}, "libc");
  const auto l = udf::load_functions<Absent>(lib);
  EXPECT_TRUE(l.loaded());
  EXPECT_FALSE(l.complete());
  EXPECT_EQ(l.missing, "udf_cudalibs_test_absent");
  EXPECT_NE(l.fn.atoi, nullptr);  // the others are resolved all the same
}

TEST(CudaLibs, LoaderOfALibraryThatIsNotThere) {
  const auto lib = udf::DynamicLibrary::open({"/nonexistent/libfoo.so.1"}, "foo (libfoo.so.1)", "install foo");
  const auto l = udf::load_functions<Present>(lib);
  EXPECT_FALSE(l.loaded());
  EXPECT_EQ(l.fn.strlen, nullptr);
  EXPECT_NE(lib.reason().find("/nonexistent/libfoo.so.1"), std::string::npos) << lib.reason();
  EXPECT_EQ(lib.error(), "foo (libfoo.so.1) could not be loaded: " + lib.reason() + ". install foo");
}

TEST(CudaLibs, LibraryCallFailedNamesLibraryCallAndCode) {
  const udf::Error e = udf::library_call_failed("NVRTC", "nvrtcGetPTX", "NVRTC_ERROR_INVALID_INPUT", 3);
  EXPECT_EQ(e.message(), "NVRTC nvrtcGetPTX failed: NVRTC_ERROR_INVALID_INPUT (3)");
  EXPECT_EQ(e.kind(), udf::ErrorKind::Internal);
  EXPECT_EQ(e.diagnostics().front().code, udf::DiagCode::LibraryFailure);
}

TEST(CudaLibs, NvrtcForwardersAndLog) {
  if (!udf::cuda_library(udf::CudaLibrary::Nvrtc).loaded()) GTEST_SKIP() << "no NVRTC here";
  EXPECT_EQ(udf::nvrtc_version_string().rfind("nvrtc ", 0), 0u) << udf::nvrtc_version_string();
  udf::NvrtcProgram prog;
  ASSERT_EQ(nvrtcCreateProgram(&prog.p, "__device__ int f() { return undefined_name; }\n", "t.cu", 0, nullptr, nullptr),
            NVRTC_SUCCESS);
  const char* opts[] = {"-rdc=true"};
  EXPECT_NE(nvrtcCompileProgram(prog.p, 1, opts), NVRTC_SUCCESS);
  const std::string log = udf::nvrtc_program_log(prog.p);
  EXPECT_NE(log.find("undefined_name"), std::string::npos) << log;
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back(), '\0');
  EXPECT_NE(log.back(), '\n');
  auto ir = udf::nvrtc_ltoir(prog.p, "the test");
  EXPECT_FALSE(ir);
}

TEST(RuntimeTables, DriverNotFound) {
  if (void* h = dlopen("libcuda.so.1", RTLD_NOW)) {
    dlclose(h);
    GTEST_SKIP() << "a CUDA driver is installed: the no-driver path cannot be exercised here";
  }
  try {
    udf::rt::cuda();
    FAIL() << "no exception";
  } catch (const udf::rt::RuntimeFailure& e) {
    EXPECT_EQ(e.status, UDF_ERROR_NO_DRIVER);
    EXPECT_EQ(std::string(e.what()).rfind("no CUDA driver: cannot load libcuda.so.1 (libcuda.so.1: ", 0), 0u) << e.what();
  }
}

TEST(RuntimeTables, FaultHookKnowsBothSpellingsOfEveryDriverFunction) {
  int64_t pending = -1;
  EXPECT_TRUE(udf::rt::arm_cuda_fault("cuMemAlloc", 0, CUDA_ERROR_OUT_OF_MEMORY, &pending));
  EXPECT_TRUE(udf::rt::arm_cuda_fault("cuMemAlloc_v2", -1, 0, &pending));
  EXPECT_EQ(pending, 1);  // the first arming's fault had not happened
  EXPECT_TRUE(udf::rt::arm_cuda_fault("cuLaunchKernel", -1, 0, &pending));
  EXPECT_FALSE(udf::rt::arm_cuda_fault("cuNoSuchFunction", -1, 0, &pending));
}

TEST(RuntimeTables, NcclNotFound) {
  ::setenv("UDF_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  std::string why;
  EXPECT_EQ(udf::rt::nccl(&why), nullptr);
  EXPECT_EQ(why.rfind("cannot load /nonexistent/libnccl.so.2 (/nonexistent/libnccl.so.2: ", 0), 0u) << why;
  ::setenv("UDF_NCCL", "0", 1);
  EXPECT_EQ(udf::rt::nccl(&why), nullptr);
  EXPECT_EQ(why, "UDF_NCCL=0");
  ::unsetenv("UDF_NCCL");
  ::unsetenv("UDF_NCCL_LIBRARY");
}

}  // namespace

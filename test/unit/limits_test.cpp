// Resource limits (include/udf/support/limits.h, watchdog.h): file sizes
// refused before reading, and the compile watchdog's limits.  Vector files
// read in place are tested in vector_files_test.cpp.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "udf/support/fs.h"
#include "udf/support/limits.h"
#include "udf/support/watchdog.h"

namespace udf {
namespace {

namespace fs = std::filesystem;

class Limits : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(UDF_TEST_BINARY_DIR) / "limits_test.tmp" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  std::string write(const std::string& name, const Bytes& b) {
    std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return p;
  }
  // A sparse file of `size` bytes: nothing written.
  std::string sparse(const std::string& name, std::uint64_t size) {
    std::string p = (dir_ / name).string();
    std::ofstream(p).close();
    fs::resize_file(p, size);
    return p;
  }
  fs::path dir_;
};

DiagCode code(const Error& e) { return e.diagnostics().front().code; }

TEST(FormatSize, Units) {
  EXPECT_EQ(format_size(0), "0 bytes");
  EXPECT_EQ(format_size(1), "1 byte");
  EXPECT_EQ(format_size(1023), "1023 bytes");
  EXPECT_EQ(format_size(16 * kMiB), "16 MiB");
  EXPECT_EQ(format_size(3 * kGiB / 2), "1.5 GiB");
  EXPECT_EQ(format_size(256 * kGiB), "256 GiB");
}

TEST(CheckFileSize, AtAndOverTheLimit) {
  EXPECT_TRUE(check_file_size("a.cu", 16 * kMiB, limits::kCudaSource));
  auto e = check_file_size("a.cu", 16 * kMiB + 1, limits::kCudaSource);
  ASSERT_FALSE(e);
  EXPECT_EQ(code(e.error()), DiagCode::FileTooLarge);
  EXPECT_EQ(e.error().exit_code(), 1);
  EXPECT_EQ(e.error().message(),
            "'a.cu' is too large: 16777217 bytes (16 MiB), more than the 16 MiB limit for CUDA sources and headers");
  auto s = check_file_size("-", 2 * kMiB, limits::kResponseFile);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message().rfind("standard input is too large", 0), 0u);
}

TEST_F(Limits, ReadFileRefusesFromTheSize) {
  auto big = sparse("big.rsp", limits::kResponseFile.max_bytes + 1);
  auto t0 = std::chrono::steady_clock::now();
  auto r = read_file(big, limits::kResponseFile);
  ASSERT_FALSE(r);
  EXPECT_EQ(code(r.error()), DiagCode::FileTooLarge);
  // Even a 200 GiB file is refused at once: nothing is read.
  auto huge = sparse("huge.bin", 200 * kGiB);
  auto h = read_file(huge, limits::kArtifact);
  ASSERT_FALSE(h);
  EXPECT_NE(h.error().message().find("214748364800 bytes (200 GiB), more than the 1 GiB limit for artifacts"),
            std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  // At the limit: read whole.
  auto ok = sparse("ok.rsp", limits::kResponseFile.max_bytes);
  auto o = read_file(ok, limits::kResponseFile);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->size(), limits::kResponseFile.max_bytes);
}

TEST_F(Limits, ReadFileHead) {
  auto p = write("t.txt", Bytes{'a', 'b', '\n', 'c'});
  auto h = read_file_head(p, 2);
  ASSERT_TRUE(h);
  EXPECT_EQ(*h, (Bytes{'a', 'b'}));
  auto all = read_file_head(p, 100);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 4u);
  EXPECT_FALSE(read_file_head((dir_ / "missing").string(), 10));
  EXPECT_FALSE(read_file_head(dir_.string(), 10));  // a folder
}

struct EnvVar {
  std::string name;
  EnvVar(std::string n, const char* v) : name(std::move(n)) {
    if (v) ::setenv(name.c_str(), v, 1);
    else ::unsetenv(name.c_str());
  }
  ~EnvVar() { ::unsetenv(name.c_str()); }
};

TEST(CompileLimitsFrom, FlagsEnvironmentDefaults) {
  EnvVar t("UDF_COMPILE_TIMEOUT", nullptr), m("UDF_COMPILE_MEMORY_LIMIT", nullptr);
  auto d = resolve_compile_limits(std::nullopt, std::nullopt);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->timeout_s, limits::kCompileTimeoutSeconds);
  EXPECT_EQ(d->memory_mib, limits::kCompileMemoryMiB);
  auto f = resolve_compile_limits("2.5", "3G");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->timeout_s, 2.5);
  EXPECT_EQ(f->memory_mib, 3072u);
  {
    EnvVar t2("UDF_COMPILE_TIMEOUT", "0"), m2("UDF_COMPILE_MEMORY_LIMIT", "512");
    auto e = resolve_compile_limits(std::nullopt, std::nullopt);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->timeout_s, 0);
    EXPECT_EQ(e->memory_mib, 512u);
    auto flag_wins = resolve_compile_limits("7", "100M");
    ASSERT_TRUE(flag_wins);
    EXPECT_EQ(flag_wins->timeout_s, 7);
    EXPECT_EQ(flag_wins->memory_mib, 100u);
  }
  for (const char* bad : {"", "-1", "abc", "1e3", "inf", "1.2.3"}) {
    auto b = resolve_compile_limits(std::string(bad), std::nullopt);
    ASSERT_FALSE(b) << bad;
    EXPECT_EQ(code(b.error()), DiagCode::InvalidOptionValue) << bad;
    EXPECT_EQ(b.error().exit_code(), 2);
  }
  for (const char* bad : {"", "1T", "G", "-5", "12345678901234"}) {
    auto b = resolve_compile_limits(std::nullopt, std::string(bad));
    ASSERT_FALSE(b) << bad;
  }
  EnvVar bad_env("UDF_COMPILE_MEMORY_LIMIT", "lots");
  auto b = resolve_compile_limits(std::nullopt, std::nullopt);
  ASSERT_FALSE(b);
  EXPECT_EQ(code(b.error()), DiagCode::Environment);
  EXPECT_EQ(b.error().message(), "bad $UDF_COMPILE_MEMORY_LIMIT 'lots': expected a number of MiB (or G for GiB) (0: no limit)");
}

TEST(CompileWatchdog, QuietWhenTheCompileEndsInTime) {
  bool fired = false;
  {
    CompileWatchdog w(CompileLimits{5, 1024 * 1024}, "compiling 'a.cu'", [&](const Error&) { fired = true; });
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
  }
  EXPECT_FALSE(fired);
  // No handler, or no limits: no thread at all.
  CompileWatchdog none(CompileLimits{0.001, 1}, "x", nullptr);
  CompileWatchdog off(CompileLimits{0, 0}, "x", [](const Error&) { std::abort(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
}

TEST(CompileWatchdogDeathTest, TimeLimitEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto tmp = fs::path(UDF_TEST_BINARY_DIR) / "limits_test.tmp" / "watchdog-temp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  EXPECT_EXIT(
      {
        TempPathGuard guard(tmp.string());
        CompileWatchdog w(CompileLimits{0.2, 0}, "compiling 'slow.cu'", [](const Error& e) {
          std::fprintf(stderr, "%s [%s] %s\n", e.message().c_str(), diag_code_id(e.diagnostics().front().code).c_str(),
                       e.diagnostics().front().notes.at(0).c_str());
        });
        std::this_thread::sleep_for(std::chrono::seconds(30));
      },
      ::testing::ExitedWithCode(1),
      "compiling 'slow.cu' ran past its time limit of 0.2 s and was stopped \\[UDF5003\\] raise the limit with "
      "--compile-timeout");
  EXPECT_FALSE(fs::exists(tmp));  // registered temporary paths are removed first
}

TEST(CompileWatchdogDeathTest, MemoryLimitEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        CompileWatchdog w(CompileLimits{0, 64}, "compiling 'big.cu'", [](const Error& e) {
          std::fprintf(stderr, "%s\n", e.message().c_str());
          std::fflush(stderr);
          ::_exit(1);
        });
        // Touch 1 MiB at a time until the watchdog stops us.
        std::vector<std::unique_ptr<char[]>> keep;
        for (int i = 0; i < 4096; ++i) {
          keep.emplace_back(new char[kMiB]);
          std::memset(keep.back().get(), 1, kMiB);
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        std::this_thread::sleep_for(std::chrono::seconds(30));
      },
      ::testing::ExitedWithCode(1), "compiling 'big.cu' used [0-9.]+ MiB of memory, more than its limit of 64 MiB");
}

TEST(ResidentMemory, Measured) {
  EXPECT_GT(resident_memory_bytes(), 1 * kMiB);
}

}  // namespace
}  // namespace udf

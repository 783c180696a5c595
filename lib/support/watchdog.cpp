#include "udf/support/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace udf {
namespace {

using Clock = std::chrono::steady_clock;

// How often the resident memory is read: a compile that allocates as fast as
// it can passes the limit by at most this much time's worth of allocation.
constexpr auto kMemoryPoll = std::chrono::milliseconds(50);

std::optional<double> parse_seconds(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789.") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v < 0 || v > 1e9) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> parse_mib(const std::string& s) {
  std::size_t digits = s.find_first_not_of("0123456789");
  if (digits == 0 || s.empty()) return std::nullopt;
  std::string suffix = digits == std::string::npos ? "" : s.substr(digits);
  std::uint64_t scale = 1;
  if (suffix == "G" || suffix == "g") scale = 1024;
  else if (!suffix.empty() && suffix != "M" && suffix != "m") return std::nullopt;
  std::string num = s.substr(0, digits);
  if (num.size() > 12) return std::nullopt;  // beyond any machine's memory
  return std::stoull(num) * scale;
}

std::string seconds_text(double s) { return fmt::format("{:g} s", s); }

struct LimitSource {
  const char* flag;
  const char* env;
  const char* expected;
};

template <typename T, typename Parse>
Expected<T> resolve_one(const std::optional<std::string>& flag, const LimitSource& src, T fallback, Parse parse) {
  if (flag) {
    if (auto v = parse(*flag)) return *v;
    return usage_error(DiagCode::InvalidOptionValue,
                       fmt::format("bad {} '{}': expected {} (0: no limit)", src.flag, *flag, src.expected));
  }
  const char* e = std::getenv(src.env);
  if (!e || !*e) return fallback;
  if (auto v = parse(std::string(e))) return *v;
  return usage_error(DiagCode::Environment, fmt::format("bad ${} '{}': expected {} (0: no limit)", src.env, e, src.expected));
}

std::mutex& temp_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& temp_paths() {
  static std::vector<std::string> v;
  return v;
}

}  // namespace

Expected<CompileLimits> resolve_compile_limits(const std::optional<std::string>& timeout_flag,
                                               const std::optional<std::string>& memory_flag) {
  CompileLimits l;
  std::vector<Diagnostic> errs;
  auto t = resolve_one<double>(timeout_flag, {"--compile-timeout", "UDF_COMPILE_TIMEOUT", "a number of seconds"},
                               limits::kCompileTimeoutSeconds, parse_seconds);
  if (t) l.timeout_s = *t;
  else errs.insert(errs.end(), t.error().diagnostics().begin(), t.error().diagnostics().end());
  auto m = resolve_one<std::uint64_t>(memory_flag,
                                      {"--compile-memory-limit", "UDF_COMPILE_MEMORY_LIMIT", "a number of MiB (or G for GiB)"},
                                      limits::kCompileMemoryMiB, parse_mib);
  if (m) l.memory_mib = *m;
  else errs.insert(errs.end(), m.error().diagnostics().begin(), m.error().diagnostics().end());
  if (!errs.empty()) return Error(ErrorKind::Usage, std::move(errs));
  return l;
}

std::uint64_t resident_memory_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "re");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<std::uint64_t>(resident) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

struct CompileWatchdog::State {
  CompileLimits limits;
  std::string subject;
  LimitHandler on_limit;
  Clock::time_point deadline;  // moved by progress()
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;
};

namespace {

[[noreturn]] void fire(CompileWatchdog::State& s, Error e) {
  remove_registered_temp_paths();
  s.on_limit(e);
  std::fflush(nullptr);
  ::_exit(1);
}

void watch(CompileWatchdog::State& s) {
  const bool timed = s.limits.timeout_s > 0;
  const std::uint64_t max_rss = s.limits.memory_mib * kMiB;
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    auto next = Clock::now() + (max_rss ? Clock::duration(kMemoryPoll) : Clock::duration(std::chrono::hours(1)));
    if (timed) next = std::min(next, s.deadline);
    if (s.cv.wait_until(lock, next, [&] { return s.stop; })) return;
    if (timed && Clock::now() >= s.deadline) {
      lock.unlock();
      fire(s, Error(ErrorKind::Diagnosed, DiagCode::CompileLimit,
                    fmt::format("{} ran past its time limit of {} and was stopped", s.subject,
                                seconds_text(s.limits.timeout_s)))
                  .note(fmt::format("raise the limit with --compile-timeout SECONDS or $UDF_COMPILE_TIMEOUT "
                                    "(0: no limit; default {})",
                                    seconds_text(limits::kCompileTimeoutSeconds))));
    }
    if (max_rss) {
      std::uint64_t rss = resident_memory_bytes();
      if (rss > max_rss) {
        lock.unlock();
        fire(s, Error(ErrorKind::Diagnosed, DiagCode::CompileLimit,
                      fmt::format("{} used {:.1f} MiB of memory, more than its limit of {} MiB, and was stopped",
                                  s.subject, static_cast<double>(rss) / kMiB, s.limits.memory_mib))
                    .note(fmt::format("raise the limit with --compile-memory-limit MiB or $UDF_COMPILE_MEMORY_LIMIT "
                                      "(0: no limit; default {} MiB)",
                                      limits::kCompileMemoryMiB)));
      }
    }
  }
}

}  // namespace

CompileWatchdog::CompileWatchdog(const CompileLimits& limits, std::string subject, LimitHandler on_limit) {
  if (!on_limit || (limits.timeout_s <= 0 && limits.memory_mib == 0)) return;
  state_ = std::make_unique<State>();
  state_->limits = limits;
  state_->subject = std::move(subject);
  state_->on_limit = std::move(on_limit);
  state_->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits.timeout_s));
  State* s = state_.get();
  state_->thread = std::thread([s] { watch(*s); });
}

CompileWatchdog::~CompileWatchdog() {
  if (!state_) return;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

void CompileWatchdog::progress() {
  if (!state_ || state_->limits.timeout_s <= 0) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(state_->limits.timeout_s));
}

TempPathGuard::TempPathGuard(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  std::lock_guard<std::mutex> lock(temp_mutex());
  temp_paths().push_back(path_);
}

TempPathGuard::~TempPathGuard() {
  if (path_.empty()) return;
  std::lock_guard<std::mutex> lock(temp_mutex());
  auto& v = temp_paths();
  if (auto it = std::find(v.rbegin(), v.rend(), path_); it != v.rend()) v.erase(std::next(it).base());
}

void remove_registered_temp_paths() {
  std::lock_guard<std::mutex> lock(temp_mutex());
  for (const auto& p : temp_paths()) {
    std::error_code ec;
    std::filesystem::remove_all(p, ec);
  }
}

}  // namespace udf

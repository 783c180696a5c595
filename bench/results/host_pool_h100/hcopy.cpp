// Host staging copy on the device machine: 5 MB user rows -> a staging buffer, as the runtime does it
// (1 MB slices, each split over T threads created per call) and alternatives (NT stores, a persistent pool).
#include <immintrin.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <thread>
#include <vector>
#include <functional>
#include <condition_variable>
#include <mutex>
using clk = std::chrono::steady_clock;
static void nt_copy(void* d, const void* s, size_t n) {
  auto* dp = static_cast<char*>(d); auto* sp = static_cast<const char*>(s);
  size_t i = 0;
  // assume 32-byte aligned dst for the bench
  for (; i + 128 <= n; i += 128) {
    __m256i a = _mm256_loadu_si256((const __m256i*)(sp + i)), b = _mm256_loadu_si256((const __m256i*)(sp + i + 32));
    __m256i c = _mm256_loadu_si256((const __m256i*)(sp + i + 64)), e = _mm256_loadu_si256((const __m256i*)(sp + i + 96));
    _mm256_stream_si256((__m256i*)(dp + i), a); _mm256_stream_si256((__m256i*)(dp + i + 32), b);
    _mm256_stream_si256((__m256i*)(dp + i + 64), c); _mm256_stream_si256((__m256i*)(dp + i + 96), e);
  }
  std::memcpy(dp + i, sp + i, n - i);
  _mm_sfence();
}
struct Pool {
  std::vector<std::thread> th; std::mutex m; std::condition_variable cv; std::function<void(int)> job; int gen = 0; std::atomic<int> left{0}; bool quit = false;
  explicit Pool(int n) { for (int i = 0; i < n; ++i) th.emplace_back([this, i] { int seen = 0; for (;;) { std::function<void(int)> j; { std::unique_lock<std::mutex> l(m); cv.wait(l, [&] { return quit || gen != seen; }); if (quit) return; seen = gen; j = job; } j(i + 1); left.fetch_sub(1); } }); }
  void run(std::function<void(int)> j) { { std::lock_guard<std::mutex> l(m); job = std::move(j); left = (int)th.size(); ++gen; } cv.notify_all(); }
  void wait() { while (left.load()) std::this_thread::yield(); }
  ~Pool() { { std::lock_guard<std::mutex> l(m); quit = true; } cv.notify_all(); for (auto& t : th) t.join(); }
};
int main() {
  const size_t N = 10000 * 128 * 4, slice = 1 << 20;
  char* src = (char*)aligned_alloc(64, N); char* dst = (char*)aligned_alloc(64, N);
  std::memset(src, 1, N); std::memset(dst, 2, N);
  auto bench = [&](const char* name, auto f) {
    std::vector<double> t;
    for (int r = 0; r < 60; ++r) {
      for (size_t i = 0; i < N; i += 4096) src[i]++;  // the user touches the rows between searches
      auto a = clk::now(); f(); t.push_back(std::chrono::duration<double, std::milli>(clk::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    std::printf("%-44s best %.3f  median %.3f ms  (%.1f GB/s median)\n", name, t[0], t[t.size() / 2], N / t[t.size() / 2] / 1e6);
  };
  for (int nt = 0; nt < 2; ++nt) for (int T : {1, 2, 4, 8}) {
    auto cp = nt ? nt_copy : (void (*)(void*, const void*, size_t))[](void* d, const void* s, size_t n) { std::memcpy(d, s, n); };
    char name[80];
    std::snprintf(name, sizeof name, "%s slices, %d threads made per call", nt ? "NT" : "memcpy", T);
    bench(name, [&] {
      const size_t ns = (N + slice - 1) / slice;
      std::vector<std::atomic<int>> done(ns);
      for (auto& d : done) d = 0;
      auto part = [&](size_t s, int p) { size_t s0 = s * slice, sn = std::min(slice, N - s0); size_t a = s0 + sn * p / T / 64 * 64, b = p + 1 == T ? s0 + sn : s0 + sn * (p + 1) / T / 64 * 64; cp(dst + a, src + a, b - a); done[s]++; };
      std::vector<std::thread> th;
      for (int p = 1; p < T; ++p) th.emplace_back([&, p] { for (size_t s = 0; s < ns; ++s) part(s, p); });
      for (size_t s = 0; s < ns; ++s) { part(s, 0); while (done[s].load() < T) std::this_thread::yield(); }
      for (auto& t : th) t.join();
    });
    Pool pool(T - 1);
    std::snprintf(name, sizeof name, "%s slices, %d threads pooled", nt ? "NT" : "memcpy", T);
    bench(name, [&] {
      const size_t ns = (N + slice - 1) / slice;
      std::vector<std::atomic<int>> done(ns);
      for (auto& d : done) d = 0;
      auto part = [&](size_t s, int p) { size_t s0 = s * slice, sn = std::min(slice, N - s0); size_t a = s0 + sn * p / T / 64 * 64, b = p + 1 == T ? s0 + sn : s0 + sn * (p + 1) / T / 64 * 64; cp(dst + a, src + a, b - a); done[s]++; };
      if (T > 1) pool.run([&](int p) { for (size_t s = 0; s < ns; ++s) part(s, p); });
      for (size_t s = 0; s < ns; ++s) { part(s, 0); while (done[s].load() < T) std::this_thread::yield(); }
      if (T > 1) pool.wait();
    });
  }
  return 0;
}

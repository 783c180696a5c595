// The runtime's host pool after the GPU's idle time: 8 ms asleep between jobs, as in a batch-10k search.
#include "host_pool.h"
#include <chrono>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <vector>
using clk = std::chrono::steady_clock;
static double ms(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }
int main(int argc, char** argv) {
  const int idle_us = argc > 1 ? atoi(argv[1]) : 8000;
  udf::rt::HostPool pool(udf::rt::host_pool_workers(std::thread::hardware_concurrency()));
  const size_t N = 5 << 20, R = 1200000, slice = 1 << 20;
  std::vector<char> src(N, 1), dst(N, 2), res(R, 3), out(R, 4);
  std::vector<double> first, all, fin_pool, fin_one, noop;
  for (int rep = 0; rep < 40; ++rep) {
    std::this_thread::sleep_for(std::chrono::microseconds(idle_us));
    const size_t parts = pool.width(), slices = N / slice;
    auto t0 = clk::now(); clk::time_point t1;
    pool.run(slices * parts, [&](size_t i) {
      const size_t s0 = (i / parts) * slice, p = i % parts, a = s0 + slice * p / parts, b = s0 + slice * (p + 1) / parts;
      std::memcpy(dst.data() + a, src.data() + a, b - a);
    }, parts, [&](size_t g) { if (g == 0) t1 = clk::now(); });
    auto t2 = clk::now();
    first.push_back(ms(t0, t1)); all.push_back(ms(t0, t2));
    std::this_thread::sleep_for(std::chrono::microseconds(idle_us));
    t0 = clk::now();
    const size_t np = std::min<size_t>(pool.width(), R / (256 << 10));
    pool.run(np, [&](size_t i) { const size_t b = R * i / np, e = R * (i + 1) / np; std::memcpy(out.data() + b, res.data() + b, e - b); });
    fin_pool.push_back(ms(t0, clk::now()));
    std::this_thread::sleep_for(std::chrono::microseconds(idle_us));
    t0 = clk::now(); std::memcpy(out.data(), res.data(), R); fin_one.push_back(ms(t0, clk::now()));
    std::this_thread::sleep_for(std::chrono::microseconds(idle_us));
    t0 = clk::now(); pool.run(8, [](size_t) {}); noop.push_back(ms(t0, clk::now()));
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  auto p90 = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() * 9 / 10]; };
  std::printf("idle %d us, width %u: first slice %.3f (p90 %.3f) ms, 5 MB all %.3f (p90 %.3f); 1.2 MB pool %.3f (p90 %.3f), one thread %.3f (p90 %.3f); no-op job %.3f (p90 %.3f)\n",
    idle_us, pool.width(), med(first), p90(first), med(all), p90(all), med(fin_pool), p90(fin_pool), med(fin_one), p90(fin_one), med(noop), p90(noop));
}

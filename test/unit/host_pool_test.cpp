// The host pool (lib/runtime/cuda/host_pool.h): the runtime's host copy workers.  No
// GPU: every part runs once, groups are handed on in order and only when
// complete, concurrent callers finish, and a throwing hand-over leaves no
// worker behind.
#include "cuda/host_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

using udf::rt::HostPool;
using namespace std::chrono_literals;

TEST(HostPool, WorkersForCores) {
  EXPECT_EQ(udf::rt::host_pool_workers(0), 0u);
  EXPECT_EQ(udf::rt::host_pool_workers(1), 0u);
  EXPECT_EQ(udf::rt::host_pool_workers(2), 1u);
  EXPECT_EQ(udf::rt::host_pool_workers(8), 7u);
  EXPECT_EQ(udf::rt::host_pool_workers(64), 7u);
}

TEST(HostPool, EveryPartRunsOnceOnTheWorkersAndTheCaller) {
  for (unsigned workers : {0u, 1u, 3u, 7u}) {
    HostPool pool(workers);
    ASSERT_EQ(pool.width(), workers + 1);
    std::set<std::thread::id> seen;
    for (int run = 0; run < 100; ++run) {
      for (size_t n : {size_t(1), size_t(2), size_t(8), size_t(40)}) {
        std::vector<std::atomic<int>> count(n);
        std::mutex m;
        pool.run(n, [&](size_t i) {
          count[i].fetch_add(1);
          if (n == 40) std::this_thread::sleep_for(10us);  // long enough for the workers to take some
          std::lock_guard<std::mutex> l(m);
          seen.insert(std::this_thread::get_id());
        });
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(count[i].load(), 1) << "part " << i << " of " << n << ", run " << run;
      }
    }
    EXPECT_TRUE(seen.count(std::this_thread::get_id())) << "the caller takes parts too";
    if (workers > 0) {
      EXPECT_GT(seen.size(), 1u) << "the workers take parts";
    }
  }
}

TEST(HostPool, GroupsAreHandedOnInOrderOnceComplete) {
  HostPool pool(3);
  for (int run = 0; run < 200; ++run) {
    const size_t n = 23, group = 4;  // a last, partial group of 3
    std::vector<std::atomic<int>> done(n);
    std::vector<size_t> order;
    pool.run(
        n, [&](size_t i) { done[i].store(1, std::memory_order_release); }, group,
        [&](size_t g) {
          order.push_back(g);
          for (size_t i = g * group; i < std::min(n, (g + 1) * group); ++i)
            ASSERT_EQ(done[i].load(std::memory_order_acquire), 1) << "group " << g << " handed on before part " << i;
        });
    ASSERT_EQ(order.size(), 6u);
    for (size_t g = 0; g < order.size(); ++g) ASSERT_EQ(order[g], g);
  }
}

TEST(HostPool, TheHandOverRunsOnTheCallingThread) {
  HostPool pool(4);
  const auto caller = std::this_thread::get_id();
  pool.run(16, [](size_t) {}, 2, [&](size_t) { ASSERT_EQ(std::this_thread::get_id(), caller); });
}

TEST(HostPool, CopiesAsTheRuntimeDoes) {
  HostPool pool(7);
  std::vector<unsigned char> src(5 << 20), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  const size_t slice = 1 << 20, parts = pool.width(), slices = (src.size() + slice - 1) / slice;
  std::vector<size_t> handed;
  pool.run(
      slices * parts,
      [&](size_t i) {
        const size_t s0 = (i / parts) * slice, sn = std::min(slice, src.size() - s0), p = i % parts;
        const size_t a = s0 + sn * p / parts, b = s0 + sn * (p + 1) / parts;
        std::memcpy(dst.data() + a, src.data() + a, b - a);
      },
      parts,
      [&](size_t s) {
        const size_t s0 = s * slice, sn = std::min(slice, src.size() - s0);
        ASSERT_EQ(std::memcmp(dst.data() + s0, src.data() + s0, sn), 0) << "slice " << s;
        handed.push_back(s);
      });
  EXPECT_EQ(handed.size(), slices);
  EXPECT_EQ(dst, src);
}

TEST(HostPool, ConcurrentCallersAllFinish) {
  HostPool pool(2);
  std::vector<std::thread> callers;
  std::atomic<size_t> total{0};
  for (int c = 0; c < 6; ++c)
    callers.emplace_back([&] {
      for (int run = 0; run < 200; ++run) {
        std::atomic<size_t> mine{0};
        pool.run(9, [&](size_t i) { mine.fetch_add(i + 1); }, 3, [&](size_t) {});
        ASSERT_EQ(mine.load(), 45u);
        total.fetch_add(mine.load());
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 6u * 200u * 45u);
}

// What the pool guarantees when a hand-over throws: the exception reaches
// the caller; the groups handed over were complete; no part is running when
// run() returns, and none starts after; parts not started when the throw
// cancels the job are skipped.  Which parts had started by then is the
// scheduler's choice: on the workers, the parts after the thrown group wait
// for the throw (the caller, which throws, must not), so that the workers
// cannot finish them all before it, and the skip is asserted
// over the rounds, not for each (a worker preempted in the throw's unwinding
// may still run the rest).
TEST(HostPool, AThrowingHandOverSkipsTheRestAndWaitsForTheRunningParts) {
  HostPool pool(3);
  constexpr size_t kParts = 64, kGroup = 8;
  const std::thread::id caller = std::this_thread::get_id();
  int rounds_that_skipped = 0;
  for (int run = 0; run < 50; ++run) {
    std::atomic<int> running{0}, ran{0};
    std::atomic<bool> thrown{false};
    int ran_at_throw = -1;
    bool threw = false;
    try {
      pool.run(
          kParts,
          [&](size_t i) {
            running.fetch_add(1);
            if (i >= 2 * kGroup && std::this_thread::get_id() != caller)
              while (!thrown.load()) std::this_thread::yield();
            std::this_thread::sleep_for(20us);
            ran.fetch_add(1);
            running.fetch_sub(1);
          },
          kGroup,
          [&](size_t g) {
            if (g == 1) {
              ran_at_throw = ran.load();
              thrown.store(true);
              throw std::runtime_error("upload failed");
            }
          });
    } catch (const std::runtime_error&) {
      threw = true;
    }
    ASSERT_TRUE(threw) << "the hand-over's exception reaches the caller";
    EXPECT_GE(ran_at_throw, int(2 * kGroup)) << "groups 0 and 1 were complete when handed over";
    EXPECT_EQ(running.load(), 0) << "a part still ran after run() returned";
    const int ran_at_return = ran.load();
    std::this_thread::sleep_for(200us);
    EXPECT_EQ(ran.load(), ran_at_return) << "a part started after run() returned";
    if (ran_at_return < int(kParts)) ++rounds_that_skipped;
  }
  EXPECT_GT(rounds_that_skipped, 0) << "the parts not started at the throw are skipped";
  // The pool still works after it.
  std::atomic<int> n{0};
  pool.run(10, [&](size_t) { n.fetch_add(1); });
  EXPECT_EQ(n.load(), 10);
}

TEST(HostPool, AwakeWorkersTakeJobsAndTheirTimeRunsOut) {
  HostPool pool(3);
  pool.set_linger(2ms);
  for (int run = 0; run < 50; ++run) {
    if (run % 2 == 0) pool.keep_awake(500us);
    std::atomic<int> n{0};
    std::mutex m;
    std::set<std::thread::id> seen;
    pool.run(32, [&](size_t) {
      n.fetch_add(1);
      std::this_thread::sleep_for(5us);
      std::lock_guard<std::mutex> l(m);
      seen.insert(std::this_thread::get_id());
    });
    ASSERT_EQ(n.load(), 32);
  }
  // Their time runs out: a pool left alone goes back to sleep, and the
  // destructor finds every worker (asleep or spinning) and joins it.
  std::this_thread::sleep_for(5ms);
  pool.keep_awake(10s);  // spinning when destroyed
}

TEST(HostPool, KeepAwakeFromAnotherThreadWhileJobsRun) {
  HostPool pool(2);
  std::atomic<bool> done{false};
  std::thread waker([&] {
    while (!done.load()) {
      pool.keep_awake(200us);
      std::this_thread::sleep_for(50us);
    }
  });
  for (int run = 0; run < 300; ++run) {
    std::atomic<size_t> sum{0};
    pool.run(7, [&](size_t i) { sum.fetch_add(i); }, 2, [](size_t) {});
    ASSERT_EQ(sum.load(), 21u);
  }
  done = true;
  waker.join();
}

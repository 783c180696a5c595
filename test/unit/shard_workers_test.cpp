// The shard workers (lib/runtime/shards/shard_workers.h): the threads that start shards
// 1 .. of a sharded search beside the caller, and the rendezvous where they
// meet to share out the coarse probe (shards/rendezvous.h).  No GPU: the
// hand-over alone.
#include "shards/shard_workers.h"
#include "shards/rendezvous.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using udf::rt::Rendezvous;
using udf::rt::ShardWorkers;
using namespace std::chrono_literals;

TEST(ShardWorkers, EveryShardRunsOnceARunEachOnAThreadOfItsOwn) {
  for (uint32_t n : {1u, 3u, 7u}) {
    ShardWorkers w(n);
    EXPECT_EQ(w.workers(), n);
    for (int run = 0; run < 200; ++run) {
      std::vector<std::atomic<int>> count(n + 1);
      std::mutex m;
      std::set<std::thread::id> threads;
      w.run([&](uint32_t s) {
        count[s].fetch_add(1);
        std::lock_guard<std::mutex> l(m);
        threads.insert(std::this_thread::get_id());
      });
      for (uint32_t s = 0; s <= n; ++s) ASSERT_EQ(count[s].load(), 1) << "shard " << s << ", run " << run;
      ASSERT_EQ(threads.size(), n + 1);
      ASSERT_TRUE(threads.count(std::this_thread::get_id())) << "shard 0 runs on the caller's thread";
    }
  }
}

TEST(ShardWorkers, RunReturnsOnlyWhenEveryShardHasReturned) {
  ShardWorkers w(3);
  std::atomic<int> finished{0};
  w.run([&](uint32_t s) {
    if (s == 2) std::this_thread::sleep_for(30ms);
    finished.fetch_add(1);
  });
  EXPECT_EQ(finished.load(), 4);
}

TEST(ShardWorkers, WorkersWokenFromSleepAfterTheirPollingEnds) {
  ShardWorkers w(2, 100us);
  for (int run = 0; run < 5; ++run) {
    std::this_thread::sleep_for(5ms);  // past the polling: the workers sleep on the futex
    std::atomic<int> count{0};
    w.run([&](uint32_t) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 3);
  }
}

TEST(ShardWorkers, TheFirstErrorInShardOrderIsRethrownAfterAllReturned) {
  ShardWorkers w(3);
  std::atomic<int> finished{0};
  try {
    w.run([&](uint32_t s) {
      if (s == 3) {
        std::this_thread::sleep_for(10ms);
        finished.fetch_add(1);
        throw std::runtime_error("shard 3");
      }
      finished.fetch_add(1);
      if (s == 1) throw std::runtime_error("shard 1");
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "shard 1");
  }
  EXPECT_EQ(finished.load(), 4);
  // The caller's own error comes first; and a run after errors starts clean.
  EXPECT_THROW(w.run([](uint32_t s) {
    if (s == 0) throw std::invalid_argument("shard 0");
    throw std::runtime_error("other");
  }),
               std::invalid_argument);
  std::atomic<int> count{0};
  EXPECT_NO_THROW(w.run([&](uint32_t) { count.fetch_add(1); }));
  EXPECT_EQ(count.load(), 4);
}

TEST(ShardWorkers, DestroyedWhilePollingOrAsleep) {
  for (auto spin : {0us, 100us, 100000us}) {
    ShardWorkers w(4, spin);
    std::atomic<int> count{0};
    w.run([&](uint32_t) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 5);
  }  // each destructor joins its threads (a hang here fails by the test's timeout)
  ShardWorkers never_ran(2);
}

// Nobody passes a meeting before all have arrived, however late the last
// one is; the next meeting follows at once, for many rounds.
TEST(Rendezvous, NobodyPassesUntilAllHaveArrived) {
  for (uint32_t n : {1u, 2u, 4u}) {
    ShardWorkers w(n - 1);
    Rendezvous meet(n);
    for (int round = 0; round < 50; ++round) {
      std::atomic<uint32_t> arrived{0}, early{0}, met{0};
      w.run([&](uint32_t s) {
        for (int m = 0; m < 3; ++m) {
          if (s == uint32_t(round) % n && round % 5 == 0) std::this_thread::sleep_for(2ms);  // a late one
          arrived.fetch_add(1);
          if (meet.arrive_and_wait()) met.fetch_add(1);
          if (arrived.load() < n * uint32_t(m + 1)) early.fetch_add(1);
        }
      });
      ASSERT_EQ(met.load(), 3 * n) << "round " << round;
      ASSERT_EQ(early.load(), 0u) << "a thread passed before the last one arrived, round " << round;
    }
    EXPECT_FALSE(meet.broken());
  }
}

// A thread that fails breaks the rendezvous: those waiting go on with
// false, and so does everyone who arrives later; a meeting met before the
// failure stays met.
TEST(Rendezvous, AFailureReleasesEveryoneWithFalse) {
  ShardWorkers w(3);
  Rendezvous meet(4);
  std::atomic<int> first_met{0}, second_met{0}, second_refused{0};
  w.run([&](uint32_t s) {
    if (meet.arrive_and_wait()) first_met.fetch_add(1);
    if (s == 2) {
      std::this_thread::sleep_for(5ms);  // the others wait at the second meeting
      meet.fail();
      return;
    }
    (meet.arrive_and_wait() ? second_met : second_refused).fetch_add(1);
  });
  EXPECT_EQ(first_met.load(), 4);
  EXPECT_EQ(second_met.load(), 0);
  EXPECT_EQ(second_refused.load(), 3);
  EXPECT_TRUE(meet.broken());
  EXPECT_FALSE(meet.arrive_and_wait()) << "a broken rendezvous refuses later arrivals at once";
}

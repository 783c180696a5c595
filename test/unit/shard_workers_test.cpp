// The shard workers (lib/runtime/shards/shard_workers.h): the threads that start shards
// 1 .. of a sharded search beside the caller, the rendezvous where they
// meet to share out the coarse probe (shards/rendezvous.h), and the host
// queries they stage once for every device (shards/slice_staging.h).  No
// GPU: the hand-over alone.
#include "shards/shard_workers.h"
#include "shards/rendezvous.h"
#include "shards/slice_staging.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using udf::rt::HostPool;
using udf::rt::Rendezvous;
using udf::rt::SliceStaging;
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

namespace {

// One staging: `parties` threads (the shard workers), each with a host pool
// of `width` threads, copy `slices` slices of 1 + (slice % 5) * 97 bytes
// into one buffer.  Every party checks, at each hand-on, that it comes in
// order and that the slice is complete; every part must be copied once.
struct StagingRun {
  StagingRun(uint32_t parties, uint32_t slices) : staging(parties, slices), copies(slices * 8) {
    for (uint32_t i = 0; i < slices; ++i) {
      begin.push_back(src.size());
      for (uint32_t b = 0; b < 1 + (i % 5) * 97; ++b) src.push_back(static_cast<unsigned char>(i * 31 + b));
    }
    begin.push_back(src.size());
    dst.assign(src.size(), 0);
  }
  void copy(uint32_t slice, size_t part, size_t parts) {
    const size_t a = begin[slice], n = begin[slice + 1] - a;
    std::memcpy(dst.data() + a + n * part / parts, src.data() + a + n * part / parts,
                n * (part + 1) / parts - n * part / parts);
    copies[slice * 8 + part].fetch_add(1);
  }
  bool complete(uint32_t slice) const {
    return std::memcmp(dst.data() + begin[slice], src.data() + begin[slice], begin[slice + 1] - begin[slice]) == 0;
  }
  SliceStaging staging;
  std::vector<size_t> begin;
  std::vector<unsigned char> src, dst;
  std::vector<std::atomic<int>> copies;
};

}  // namespace

TEST(SliceStaging, EveryPartyHandsOnEverySliceInOrderOnceItIsComplete) {
  for (const uint32_t parties : {1u, 2u, 3u, 4u}) {
    ShardWorkers w(parties - 1);
    for (const unsigned workers : {0u, 1u, 3u}) {
      std::vector<std::unique_ptr<HostPool>> pools;
      for (uint32_t p = 0; p < parties; ++p) pools.push_back(std::make_unique<HostPool>(workers));
      const size_t width = pools[0]->width();
      for (const uint32_t slices : {1u, 2u, 3u, 7u, 16u}) {
        for (int round = 0; round < 20; ++round) {
          SCOPED_TRACE(std::to_string(parties) + " parties, " + std::to_string(workers) + " workers each, " +
                       std::to_string(slices) + " slices, round " + std::to_string(round));
          StagingRun r(parties, slices);
          std::vector<std::vector<uint32_t>> order(parties);
          std::atomic<int> incomplete{0};
          w.run([&](uint32_t p) {
            if (p == uint32_t(round) % parties && round % 4 == 0) std::this_thread::sleep_for(1ms);  // a late party
            r.staging.stage(
                p, *pools[p], [&](uint32_t slice, size_t part, size_t parts) { r.copy(slice, part, parts); },
                [&](uint32_t slice) {
                  if (!r.complete(slice)) incomplete.fetch_add(1);
                  order[p].push_back(slice);
                },
                [] {});
          });
          ASSERT_EQ(incomplete.load(), 0) << "a slice was handed on before it was copied";
          for (uint32_t p = 0; p < parties; ++p) {
            ASSERT_EQ(order[p].size(), slices) << "party " << p;
            for (uint32_t i = 0; i < slices; ++i) ASSERT_EQ(order[p][i], i) << "party " << p;
          }
          for (uint32_t i = 0; i < slices; ++i)
            for (size_t part = 0; part < 8; ++part)
              ASSERT_EQ(r.copies[i * 8 + part].load(), part < width ? 1 : 0) << "slice " << i << ", part " << part;
        }
      }
    }
  }
}

// A party that fails (here: its hand-on of slice 1 throws) copies none of
// its slices not yet started; the others, waiting for one of them, give up
// through give_up (as a shard's start does when the rendezvous is broken),
// and every party returns.
TEST(SliceStaging, APartyThatFailsReleasesTheOthersThroughGiveUp) {
  for (const unsigned workers : {0u, 2u}) {
    for (int round = 0; round < 50; ++round) {
      const uint32_t parties = 3, slices = 9;
      ShardWorkers w(parties - 1);
      std::vector<std::unique_ptr<HostPool>> pools;
      for (uint32_t p = 0; p < parties; ++p) pools.push_back(std::make_unique<HostPool>(workers));
      StagingRun r(parties, slices);
      Rendezvous meet(parties);
      std::atomic<int> failed{0}, gave_up{0}, finished{0};
      struct GaveUp {};
      w.run([&](uint32_t p) {
        try {
          r.staging.stage(
              p, *pools[p], [&](uint32_t slice, size_t part, size_t parts) { r.copy(slice, part, parts); },
              [&](uint32_t slice) {
                if (p == 1 && slice == 1) throw std::runtime_error("upload failed");
              },
              [&] {
                if (meet.broken()) throw GaveUp{};
              });
          finished.fetch_add(1);
        } catch (const GaveUp&) {
          gave_up.fetch_add(1);
        } catch (const std::runtime_error&) {
          failed.fetch_add(1);
          meet.fail();
        }
      });
      ASSERT_EQ(failed.load(), 1) << "round " << round;
      // Slice 7 is party 1's; with no workers it is never copied, and both others wait for it.
      if (workers == 0) {
        ASSERT_EQ(gave_up.load(), 2) << "round " << round;
      }
      ASSERT_EQ(failed.load() + gave_up.load() + finished.load(), int(parties)) << "round " << round;
    }
  }
}

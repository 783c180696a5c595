// A meeting point for the threads that start a sharded search's shards
// (shards/search.cpp, the shared coarse probe): each of n threads arrives,
// and all go on once the last has arrived; it can be met again at once.
// A thread that fails breaks it, so that the others stop waiting: their
// arrive_and_wait returns false from then on, and they give up their part
// (the failing thread's error is the search's).
//
// Header-only and free of CUDA: test/unit/shard_workers_test.cpp runs it on
// the CPU.  It waits with std::atomic::wait, as the shard workers do (not
// std::condition_variable, whose wait needs a newer libstdc++ than the
// wheel's manylinux policy allows).
#pragma once

#include <atomic>
#include <cstdint>

namespace udf::rt {

class Rendezvous {
 public:
  explicit Rendezvous(uint32_t n) : n_(n) {}
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  /// Waits until all n threads have arrived at this meeting; false when the
  /// rendezvous is broken (before or while waiting).
  bool arrive_and_wait() {
    uint64_t w = word_.load(std::memory_order_acquire);
    if (w & kBroken) return false;
    const uint64_t meeting = w >> 1;
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      arrived_.store(0, std::memory_order_relaxed);  // before the next meeting's arrivals, which follow this
      word_.fetch_add(2, std::memory_order_release);
      word_.notify_all();
      return true;
    }
    for (;;) {
      w = word_.load(std::memory_order_acquire);
      if ((w >> 1) != meeting) return true;
      if (w & kBroken) return false;
      word_.wait(w, std::memory_order_acquire);
    }
  }

  /// Breaks it: every waiting and later arrive_and_wait returns false (a
  /// meeting that every thread had reached before stays met).
  void fail() {
    word_.fetch_or(kBroken, std::memory_order_release);
    word_.notify_all();
  }

  bool broken() const { return (word_.load(std::memory_order_acquire) & kBroken) != 0; }

 private:
  static constexpr uint64_t kBroken = 1;
  const uint32_t n_;
  std::atomic<uint32_t> arrived_{0};  // at the current meeting
  std::atomic<uint64_t> word_{0};     // meetings completed << 1 | broken
};

}  // namespace udf::rt

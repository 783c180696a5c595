// Host queries staged once for all the devices of a sharded search
// (shards/search.cpp): the queries' slices go into one pinned buffer that
// every device reads.  Slice i is copied by party i % parties (a device's
// thread and its runtime's host pool), and every party hands every slice on
// (its upload and coarse probe), in order, as soon as the slice is complete.
// So the host copies the queries once, on every party's pool, not once a
// device on each device's pool.
//
// A party waits only for slices below the one it has just completed, and
// each party completes its own slices in order, so the lowest slice not yet
// copied always has a party copying it: the parties cannot wait for each
// other in a cycle.
//
// Header-only and free of CUDA: test/unit/slice_staging_test.cpp runs it on
// the CPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "cuda/cpu_relax.h"
#include "cuda/host_pool.h"

namespace udf::rt {

class SliceStaging {
 public:
  SliceStaging(uint32_t parties, uint32_t slices)
      : parties_(parties), slices_(slices), done_(std::make_unique<std::atomic<uint32_t>[]>(slices)) {
    for (uint32_t i = 0; i < slices; ++i) done_[i].store(0, std::memory_order_relaxed);
  }
  SliceStaging(const SliceStaging&) = delete;
  SliceStaging& operator=(const SliceStaging&) = delete;

  uint32_t slices() const { return slices_; }
  /// The party that copies slice i.
  uint32_t owner(uint32_t slice) const { return slice % parties_; }

  /// Party p's part, on its own thread: copy(slice, part, parts) for every
  /// part of its slices on `pool` (parts: the pool's width), and
  /// ready(slice) on this thread for every slice of all parties, in order,
  /// as soon as it is complete.  While it waits for another party's slice,
  /// it calls give_up(), which throws to stop waiting (another party
  /// failed); a throw from ready or give_up leaves this party's slices not
  /// yet started uncopied.
  void stage(uint32_t p, HostPool& pool, const std::function<void(uint32_t slice, size_t part, size_t parts)>& copy,
             const std::function<void(uint32_t slice)>& ready, const std::function<void()>& give_up) {
    const size_t parts = pool.width();
    const uint32_t own = p < slices_ ? (slices_ - p + parties_ - 1) / parties_ : 0;  // slices p, p + parties, ...
    uint32_t next = 0;  // the next slice to hand on
    auto hand_on_to = [&](uint32_t end) {
      for (; next < end; ++next) {
        wait(next, give_up);
        ready(next);
      }
    };
    pool.run(
        size_t(own) * parts,
        [&](size_t i) { copy(p + static_cast<uint32_t>(i / parts) * parties_, i % parts, parts); }, parts,
        [&](size_t g) {
          const uint32_t slice = p + static_cast<uint32_t>(g) * parties_;
          done_[slice].store(1, std::memory_order_release);
          hand_on_to(slice + 1);
        });
    hand_on_to(slices_);
  }

 private:
  void wait(uint32_t slice, const std::function<void()>& give_up) {
    for (uint32_t spins = 0; done_[slice].load(std::memory_order_acquire) == 0; ++spins) {
      give_up();
      if (spins < 4096)
        cpu_relax();
      else
        std::this_thread::yield();
    }
  }

  const uint32_t parties_, slices_;
  std::unique_ptr<std::atomic<uint32_t>[]> done_;  // [slice]: copied
};

}  // namespace udf::rt

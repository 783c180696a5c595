// Shard workers: a thread for each of shards 1 .. of a sharded index, kept
// for the index's life, that starts its shard's part of every search while
// the calling thread starts shard 0's (shards/search.cpp, start_shards).
//
// Each shard's start is host work (staging host queries, planning, three or
// four launches on its own context); one after the other, the last device
// starts that much later.  A thread made for each search (std::async) costs
// about what it saves at batch 1, so these threads stay: a worker that has
// just finished a search keeps polling for the next one for `spin` (a batch-1
// loop hands it over in well under a microsecond) and then sleeps on a futex
// (std::atomic::wait) until it is woken.  The caller polls the same way
// while the workers finish their starts.
//
// Header-only and free of CUDA: test/unit/shard_workers_test.cpp runs it on
// the CPU.  One run at a time (an index is not searched from two threads at
// once, include/udf/runtime.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "cuda/cpu_relax.h"

namespace udf::rt {

class ShardWorkers {
 public:
  using Task = std::function<void(uint32_t)>;

  /// `n` workers, for shards 1 .. n; each polls for `spin` after its last task.
  explicit ShardWorkers(uint32_t n, std::chrono::microseconds spin = std::chrono::microseconds(200))
      : spin_(spin), errors_(n + 1) {
    threads_.reserve(n);
    try {
      for (uint32_t s = 1; s <= n; ++s) threads_.emplace_back([this, s] { loop(s); });
    } catch (...) {  // (std::system_error: no more threads) the ones started stop first
      stop();
      throw;
    }
  }
  ShardWorkers(const ShardWorkers&) = delete;
  ShardWorkers& operator=(const ShardWorkers&) = delete;
  ~ShardWorkers() { stop(); }

  uint32_t workers() const { return static_cast<uint32_t>(threads_.size()); }

  /// task(s) for s = 1 .. workers() on the workers and task(0) on this
  /// thread; returns when every one has returned.  The first exception, in
  /// shard order, is rethrown (after all have returned).
  void run(const Task& task) {
    const uint32_t n = workers();
    for (auto& e : errors_) e = nullptr;
    task_ = &task;
    pending_.store(n, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    try {
      task(0);
    } catch (...) {
      errors_[0] = std::current_exception();
    }
    for (uint32_t p; (p = pending_.load(std::memory_order_acquire)) != 0;) await_change(pending_, p);
    task_ = nullptr;
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  // Until `a` no longer holds `seen`: polls for spin_, then sleeps on it.
  template <class T> void await_change(const std::atomic<T>& a, T seen) const {
    const auto until = std::chrono::steady_clock::now() + spin_;
    for (uint32_t i = 1;; ++i) {
      if (a.load(std::memory_order_acquire) != seen) return;
      if (i % 64 == 0 && std::chrono::steady_clock::now() >= until) break;
      cpu_relax();
    }
    a.wait(seen, std::memory_order_acquire);
  }

  void stop() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& t : threads_) t.join();
  }

  void loop(uint32_t s) {
    uint64_t seen = 0;
    for (;;) {
      await_change(generation_, seen);
      seen = generation_.load(std::memory_order_acquire);
      if (stop_.load(std::memory_order_relaxed)) return;
      try {
        (*task_)(s);
      } catch (...) {
        errors_[s] = std::current_exception();
      }
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
  }

  const std::chrono::microseconds spin_;
  std::vector<std::exception_ptr> errors_;  // [shard]: written by its thread during a run
  const Task* task_ = nullptr;              // the run's task (published by generation_)
  std::atomic<uint64_t> generation_{0};     // one more for each run, and for the stop
  std::atomic<uint32_t> pending_{0};        // the workers still in the run's task
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;        // last: they start once the rest is set
};

}  // namespace udf::rt

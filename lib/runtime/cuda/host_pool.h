// The runtime's host copy workers: threads that live as long as the runtime
// and take parts of a copy with the thread that asked for it.
//
// A search with host arrays copies its queries into pinned staging and its
// results out of it.  Threads started for each copy cost more than the copy,
// so the runtime keeps its workers, asleep between copies.  Several callers may run at once: each call is a job, the workers
// take parts of the oldest job that has parts left, and the caller takes
// parts of its own job too, so that every job finishes even while the
// workers are busy elsewhere.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "cuda/cpu_relax.h"

namespace udf::rt {

class HostPool {
 public:
  /// `workers` threads (0: none; every part runs on the caller).  A thread
  /// that cannot be started leaves the pool smaller.
  explicit HostPool(unsigned workers);
  ~HostPool();
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  /// Threads that work on one job: the workers and the caller.
  unsigned width() const { return static_cast<unsigned>(threads_.size()) + 1; }

  /// Runs part(i) for every i in [0, n) on the workers and the calling
  /// thread; returns when every part has run.  Parts are grouped `group` at a
  /// time (consecutive indices); group_done(g), when given, runs on the
  /// calling thread for each group in order, as soon as that group's parts
  /// have all run, while later parts run.  part must not throw (it runs on
  /// the workers); when group_done throws, the parts not yet started are
  /// skipped, the call waits for the ones running, and rethrows.
  void run(size_t n, const std::function<void(size_t)>& part, size_t group = 0,
           const std::function<void(size_t)>& group_done = nullptr);

  /// The workers spin instead of sleeping until `d` from now, so that a job
  /// posted before then starts without their wake-up (a sleeping thread's
  /// wake-up can be an interrupt to an idle virtual CPU).  Any thread may call it,
  /// a CUDA host function included: two atomic updates and a futex wake.
  void keep_awake(std::chrono::steady_clock::duration d);
  /// After each run() the workers stay awake this long (0, the default: they
  /// sleep as soon as no job is left).
  void set_linger(std::chrono::steady_clock::duration d) { linger_ = d.count(); }

 private:
  struct Job;
  void work();
  Job* find_job();  // the oldest job with parts left, or null (under m_)
  static int64_t now() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

  void signal();     // wakes the sleeping workers to look again
  void stay_awake(int64_t until);

  // Sleeping is a futex on signal_ (std::atomic::wait), as in
  // shard_workers.h: std::condition_variable::wait is a GLIBCXX_3.4.30
  // symbol in Debian 12's libstdc++, which the manylinux_2_34 wheel may not
  // need (auditwheel refuses it).
  std::mutex m_;                          // jobs_ and every job's users
  std::vector<Job*> jobs_;                // posted, oldest first
  std::atomic<bool> stopping_{false};     // the pool stops: set before the signal that says so
  std::atomic<uint32_t> signal_{0};       // moves when a job is posted, the workers are to stay awake, or the pool stops
  std::atomic<int64_t> awake_until_{0};   // steady_clock ticks: the workers spin until then
  int64_t linger_ = 0;                    // steady_clock ticks
  std::vector<std::thread> threads_;
};

/// The workers for a machine of `cores` hardware threads: one core left to
/// the caller, 7 at most: enough that the upload, not the host copy, is the
/// slower.
unsigned host_pool_workers(unsigned cores);

// ---------------------------------------------------------------------------
struct HostPool::Job {
  size_t n = 0;
  size_t group = 1;
  const std::function<void(size_t)>* part = nullptr;
  std::atomic<size_t> next{0};           // parts claimed (may pass n)
  std::atomic<bool> cancel{false};       // parts claimed from now on are skipped
  std::unique_ptr<std::atomic<uint32_t>[]> done;  // per group: parts finished
  unsigned users = 0;                    // workers inside the job (under HostPool::m_)

  bool has_parts() const { return next.load(std::memory_order_relaxed) < n; }
  // Claims and runs one part, if any is left: whether it did.
  bool step() {
    const size_t i = next.fetch_add(1, std::memory_order_relaxed);
    if (i >= n) return false;
    if (!cancel.load(std::memory_order_relaxed)) (*part)(i);
    done[i / group].fetch_add(1, std::memory_order_release);
    return true;
  }
  // Claims and runs parts until none is left.
  void drain() {
    while (step()) {
    }
  }
  size_t group_size(size_t g) const { return std::min(group, n - g * group); }
};

inline unsigned host_pool_workers(unsigned cores) { return std::min(7u, cores > 1 ? cores - 1 : 0u); }

inline HostPool::HostPool(unsigned workers) {
  try {
    for (unsigned i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  } catch (const std::system_error&) {  // fewer workers: the callers do more
  }
}

inline HostPool::~HostPool() {
  stopping_.store(true, std::memory_order_relaxed);  // seen by a worker that sees the signal below (release / acquire)
  signal();
  for (std::thread& t : threads_) t.join();
}

inline void HostPool::signal() {
  signal_.fetch_add(1, std::memory_order_release);
  signal_.notify_all();
}

// awake_until_ = max(awake_until_, until).
inline void HostPool::stay_awake(int64_t until) {
  int64_t cur = awake_until_.load(std::memory_order_relaxed);
  while (until > cur && !awake_until_.compare_exchange_weak(cur, until, std::memory_order_relaxed)) {
  }
}

inline void HostPool::keep_awake(std::chrono::steady_clock::duration d) {
  stay_awake(now() + d.count());
  signal();
}

inline HostPool::Job* HostPool::find_job() {
  for (Job* j : jobs_)
    if (j->has_parts()) return j;
  return nullptr;
}

inline void HostPool::work() {
  for (;;) {
    // Read before looking: a signal after the look moves it, and the wait
    // below then returns at once (no lost wake-up).
    const uint32_t seen = signal_.load(std::memory_order_acquire);
    {
      if (stopping_.load(std::memory_order_relaxed)) return;
      std::unique_lock<std::mutex> l(m_);
      if (Job* job = find_job()) {
        ++job->users;
        l.unlock();
        job->drain();
        l.lock();
        --job->users;
        continue;
      }
    }
    if (now() < awake_until_.load(std::memory_order_relaxed)) {  // awake: spin until a signal or the time is up
      while (signal_.load(std::memory_order_acquire) == seen && !stopping_.load(std::memory_order_relaxed) &&
             now() < awake_until_.load(std::memory_order_relaxed))
        cpu_relax();
      continue;
    }
    signal_.wait(seen, std::memory_order_acquire);
  }
}

inline void HostPool::run(size_t n, const std::function<void(size_t)>& part, size_t group,
                   const std::function<void(size_t)>& group_done) {
  if (n == 0) return;
  Job job;
  job.n = n;
  job.group = group == 0 ? n : group;
  job.part = &part;
  const size_t groups = (n + job.group - 1) / job.group;
  job.done = std::make_unique<std::atomic<uint32_t>[]>(groups);
  for (size_t g = 0; g < groups; ++g) job.done[g].store(0, std::memory_order_relaxed);
  const bool shared = !threads_.empty() && n > 1;
  if (shared) {
    {
      std::lock_guard<std::mutex> l(m_);
      jobs_.push_back(&job);
    }
    if (linger_ > 0) stay_awake(now() + linger_);  // the workers that finish their parts first stay awake too
    signal();
  }
  // Off the list, and no worker inside, before `job` goes (also on a throw).
  struct Retire {
    HostPool* pool;
    Job& job;
    bool shared;
    ~Retire() {
      if (!shared) return;
      {
        std::lock_guard<std::mutex> l(pool->m_);
        pool->jobs_.erase(std::find(pool->jobs_.begin(), pool->jobs_.end(), &job));
      }
      // The workers inside have claimed their last parts: they leave at once.
      for (;;) {
        {
          std::lock_guard<std::mutex> l(pool->m_);
          if (job.users == 0) break;
        }
        std::this_thread::yield();
      }
      // The workers (awake: they just worked) stay so for the linger time.
      if (pool->linger_ > 0) pool->stay_awake(now() + pool->linger_);
    }
  } retire{this, job, shared};
  try {
    for (size_t g = 0; g < groups; ++g) {
      // The caller works on the job (its own parts first come first) until
      // group g is complete, then hands it on.
      while (job.done[g].load(std::memory_order_acquire) < job.group_size(g))
        if (!job.step()) std::this_thread::yield();
      if (group_done) group_done(g);
    }
  } catch (...) {
    job.cancel.store(true, std::memory_order_relaxed);
    throw;
  }
}

}  // namespace udf::rt

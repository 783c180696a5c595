// The background links of an on-demand module (on_demand.cpp): one job a
// plan entry, linked by up to max_workers threads in the order queued, in
// waves (link_wave, link_session.h): a job starts only once no job of a lower
// wave is queued or running, so that the links a search waits for do not
// share the CPU with those it may never need.  A search claims the entries it
// needs: it takes the jobs no worker has started and links them itself,
// whatever their wave, and waits for the others.  No CUDA here: on_demand.cpp
// loads what the links give.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "udf/link/link.h"
#include "udf/support/error.h"

namespace udf::rt {

class LinkQueue {
 public:
  struct Linked {
    Expected<LinkOutput> out = internal_error("not linked");
    std::vector<std::string> warnings;
    double started_ms = 0, done_ms = 0;  // from the module's creation (UDF_PROFILE_LINK)
  };
  /// Links plan entries; called on the workers' threads and the searches'.
  using LinkFn = std::function<Linked(const std::vector<int>& entries)>;
  enum class State { Queued, Running, Done };
  struct Job {
    int entry = -1;
    State state = State::Queued;
    bool by_search = false;  // a search took it (the result went there), or was told that its link failed
    Linked linked;           // a worker's result, until a search takes it
  };
  /// What a search does about the entries it needs (claim).
  struct Claim {
    std::vector<int> now;        // to link itself: entries with no job, or whose job it took
    std::vector<Job*> taken;     // the jobs it took (finish marks them done)
    std::vector<Job*> awaited;   // the jobs a worker links or has linked (wait)
  };

  /// `wave`: per plan entry, its wave (link_wave).
  LinkQueue(LinkFn link, std::vector<int> wave, unsigned max_workers);
  /// Queued jobs are dropped; running links are waited for.
  ~LinkQueue();
  LinkQueue(const LinkQueue&) = delete;
  LinkQueue& operator=(const LinkQueue&) = delete;

  /// Queues a job for each entry and starts workers for them.
  void queue(const std::vector<int>& entries);
  /// A search's claim on `entries` (none loaded): it takes the queued jobs,
  /// and those an earlier search took or was told had failed, to link them
  /// itself with the entries that have no job; it awaits the others.
  Claim claim(const std::vector<int>& entries);
  /// The search's own link of c.now is over (linked or not): its jobs are done.
  void finish(const Claim& c);
  /// Until every job c.awaited is done.
  void wait(const Claim& c);
  /// A search was told that job j's link failed: the next claim links it again.
  void mark_failed(Job& j);
  /// For entries a search does without (optional_entry; none loaded): their
  /// jobs that are done, to load; jobs are queued for those that have none,
  /// and again for those whose failure was told.
  std::vector<Job*> done_optional(const std::vector<int>& entries);

 private:
  Job* job_of(int entry);
  bool ready_to_take(const Job& j) const;
  void start_workers();
  void work();

  LinkFn link_;
  std::vector<int> wave_;
  unsigned max_workers_;
  std::mutex mutex_;  // guards what follows
  // Moves when a worker's job is done: a search waits on it (std::atomic::wait,
  // as in cuda/host_pool.h: std::condition_variable::wait is a GLIBCXX_3.4.30
  // symbol, which the manylinux_2_34 wheel may not need).
  std::atomic<uint32_t> jobs_done_{0};
  std::deque<Job> jobs_;  // in link order; a deque: a Job stays where it is while others are added
  bool stopping_ = false;
  unsigned running_workers_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace udf::rt

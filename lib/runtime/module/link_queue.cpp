// LinkQueue (link_queue.h): the jobs of an on-demand module's background links.
#include "module/link_queue.h"

#include <algorithm>
#include <system_error>

namespace udf::rt {

LinkQueue::LinkQueue(LinkFn link, std::vector<int> wave, unsigned max_workers)
    : link_(std::move(link)), wave_(std::move(wave)), max_workers_(std::max(1u, max_workers)) {}

LinkQueue::~LinkQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
}

LinkQueue::Job* LinkQueue::job_of(int entry) {
  for (Job& j : jobs_)
    if (j.entry == entry) return &j;
  return nullptr;
}

// With mutex_ held.
bool LinkQueue::ready_to_take(const Job& j) const {
  if (j.state != State::Queued) return false;
  return std::none_of(jobs_.begin(), jobs_.end(), [&](const Job& o) {
    return wave_[o.entry] < wave_[j.entry] && o.state != State::Done;
  });
}

// Workers for the jobs ready to take, up to max_workers_ at once.  With
// mutex_ held.
void LinkQueue::start_workers() {
  const auto ready = static_cast<unsigned>(std::count_if(jobs_.begin(), jobs_.end(), [&](const Job& j) { return ready_to_take(j); }));
  while (!stopping_ && running_workers_ < std::min(max_workers_, ready)) {
    try {
      workers_.emplace_back([this] { work(); });
    } catch (const std::system_error&) {
      break;  // no thread to be had: the searches link what they need themselves
    }
    ++running_workers_;
  }
}

// A worker: links the jobs it may take, first to last, until none is left
// or the queue goes away.
void LinkQueue::work() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    auto next = std::find_if(jobs_.begin(), jobs_.end(), [&](const Job& j) { return ready_to_take(j); });
    if (next == jobs_.end()) break;
    Job& job = *next;  // (a deque's elements stay put; its iterators do not)
    job.state = State::Running;
    lock.unlock();
    Linked r;
    try {  // (nothing may leave a worker's thread)
      r = link_({job.entry});
    } catch (const std::exception& e) {
      r.out = internal_error(std::string("linking: ") + e.what());
    }
    lock.lock();
    job.linked = std::move(r);
    job.state = State::Done;
    jobs_done_.fetch_add(1, std::memory_order_release);
    jobs_done_.notify_all();
    start_workers();  // the next wave's jobs may be ready now
  }
  --running_workers_;
}

void LinkQueue::queue(const std::vector<int>& entries) {
  std::lock_guard lock(mutex_);
  for (int e : entries) jobs_.emplace_back().entry = e;
  start_workers();
}

LinkQueue::Claim LinkQueue::claim(const std::vector<int>& entries) {
  Claim c;
  std::lock_guard lock(mutex_);
  for (int e : entries) {
    Job* j = job_of(e);
    if (j && (j->state == State::Queued || (j->state == State::Done && j->by_search))) {
      j->state = State::Running;
      j->by_search = true;
      c.taken.push_back(j);
    }
    if (!j || j->by_search) c.now.push_back(e);
    else c.awaited.push_back(j);
  }
  return c;
}

void LinkQueue::finish(const Claim& c) {
  std::lock_guard lock(mutex_);
  for (Job* j : c.taken) j->state = State::Done;
  start_workers();  // the next wave's jobs may be ready now
}

void LinkQueue::wait(const Claim& c) {
  for (;;) {
    uint32_t seen = 0;
    {
      std::lock_guard lock(mutex_);
      if (std::all_of(c.awaited.begin(), c.awaited.end(), [](const Job* j) { return j->state == State::Done; })) return;
      seen = jobs_done_.load(std::memory_order_acquire);
    }
    jobs_done_.wait(seen, std::memory_order_acquire);
  }
}

void LinkQueue::mark_failed(Job& j) {
  std::lock_guard lock(mutex_);
  j.by_search = true;
}

std::vector<LinkQueue::Job*> LinkQueue::done_optional(const std::vector<int>& entries) {
  std::vector<Job*> done;
  std::lock_guard lock(mutex_);
  for (int e : entries) {
    Job* j = job_of(e);
    if (!j) {
      jobs_.emplace_back().entry = e;
    } else if (j->state == State::Done && j->by_search) {  // its link failed, and a search was told: again
      j->state = State::Queued;
      j->by_search = false;
    } else if (j->state == State::Done) {
      done.push_back(j);
    }
  }
  start_workers();
  return done;
}

}  // namespace udf::rt

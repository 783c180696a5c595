// udf_module_link_ex's on-demand modules (link_session.h, OnDemandLink): a
// module with no code at first, whose k buckets are linked (lib/link, the
// on-disk cache of entries) and loaded when a search first needs them.  The
// first bucket's entries are linked in the background from the start, one
// link an entry (prefetch_order), so that a search waits for the entries it
// runs and no other: a filtered search for its filtered scan and the merge,
// not for the metric's own scans; a monotone metric's search for its plain
// scan, taking the pruning one once that is linked (optional_entry).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <system_error>

#include "module/module.h"
#include "udf/link/link.h"

namespace udf::rt {
namespace {

using JobState = OnDemandLink::JobState;

// Loads a link's images into the module and marks their entries loaded.
void load_linked(udf_module* m, LinkOutput& out) {
  OnDemandLink& od = *m->on_demand;
  std::vector<ModuleEntry> entries;
  for (std::size_t i = 0; i < out.linked_entries.size(); ++i) {
    entries.push_back(od.session.plan.entries[out.linked_entries[i]]);
    entries.back().image = static_cast<int>(i);
  }
  load_images(m, out.module.images, entries);
  for (int e : out.linked_entries) od.loaded[e] = 1;
}

double since_created(const OnDemandLink& od) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - od.created).count();
}

// UDF_PROFILE_LINK: a link's span (ms from the module's creation), its
// wrappers' compile and each entry's nvJitLink time.
void print_link(const OnDemandLink& od, const char* what, const LinkOutput& out, double started_ms, double done_ms) {
  std::string jobs;
  for (const LinkJobReport& r : out.timing.jobs)
    for (int e : r.job.entries)
      jobs += " " + od.session.plan.entries[e].name + (r.cache_hit ? " (cached)" : " " + std::to_string(static_cast<int>(r.seconds * 1e3)) + " ms");
  std::fprintf(stderr, "udf link: %s +%.0f .. +%.0f ms, wrappers %.0f ms, %u at once:%s\n", what, started_ms, done_ms,
               out.timing.wrappers_s * 1e3, out.timing.threads, jobs.c_str());
}

std::string bucket_text(const udf_module* m, int metric, int filter, uint32_t k) {
  std::string s = "linking metric " + m->manifest.artifacts[metric].symbol;
  if (filter >= 0) s += " with filter " + m->manifest.filters[filter].symbol;
  return s + " for k = " + std::to_string(k) + ": ";
}

OnDemandLink::Job* job_of(OnDemandLink& od, int entry) {
  for (OnDemandLink::Job& j : od.jobs)
    if (j.entry == entry) return &j;
  return nullptr;
}

OnDemandLink::Linked link_now(const OnDemandLink& od, const std::vector<int>& entries) {
  OnDemandLink::Linked r;
  r.started_ms = since_created(od);
  try {  // (a worker's thread: nothing may leave it)
    r.out = link_entries(od.session, entries, r.warnings);
  } catch (const std::exception& e) {
    r.out = internal_error(std::string("linking: ") + e.what());
  }
  r.done_ms = since_created(od);
  return r;
}

// A queued job a worker may take now: an optional entry's (optional_entry)
// waits until no other link is queued or running, so that those a search
// waits for do not share the CPU with it.  Called with od.mutex held.
bool ready_to_take(const OnDemandLink& od, const OnDemandLink::Job& j) {
  if (j.state != JobState::Queued) return false;
  return !od.optional[j.entry] || std::none_of(od.jobs.begin(), od.jobs.end(), [&](const OnDemandLink::Job& o) {
    return !od.optional[o.entry] && o.state != JobState::Done;
  });
}

void start_workers(OnDemandLink& od);

// A worker: links the jobs it may take (ready_to_take), first to last,
// until none is left or the module goes away.
void work(OnDemandLink& od) {
  std::unique_lock lock(od.mutex);
  while (!od.stopping) {
    auto next = std::find_if(od.jobs.begin(), od.jobs.end(), [&](const OnDemandLink::Job& j) { return ready_to_take(od, j); });
    if (next == od.jobs.end()) break;
    OnDemandLink::Job& job = *next;  // (a deque's elements stay put; its iterators do not)
    job.state = JobState::Running;
    lock.unlock();
    OnDemandLink::Linked r = link_now(od, {job.entry});
    lock.lock();
    job.linked = std::move(r);
    job.state = JobState::Done;
    od.jobs_done.fetch_add(1, std::memory_order_release);
    od.jobs_done.notify_all();
    start_workers(od);  // the optional jobs may be ready now
  }
  --od.running_workers;
}

// Workers for the jobs ready to take, up to max_workers at once.  Called
// with od.mutex held.
void start_workers(OnDemandLink& od) {
  const auto ready = static_cast<unsigned>(
      std::count_if(od.jobs.begin(), od.jobs.end(), [&](const OnDemandLink::Job& j) { return ready_to_take(od, j); }));
  while (!od.stopping && od.running_workers < std::min(od.max_workers, ready)) {
    try {
      od.workers.emplace_back([&od] { work(od); });
    } catch (const std::system_error&) {
      break;  // no thread to be had: the searches link what they need themselves
    }
    ++od.running_workers;
  }
}

// Queues `entries` and starts workers for them.  Called with od.mutex held.
void queue_jobs(OnDemandLink& od, const std::vector<int>& entries) {
  for (int e : entries) od.jobs.emplace_back().entry = e;
  start_workers(od);
}

// Loads a worker's link for `j` (a search's thread), or fails the search
// with its error (and the next search that needs the entry links it again).
void load_job(udf_module* m, OnDemandLink::Job& j, const std::string& what) {
  OnDemandLink& od = *m->on_demand;
  if (od.loaded[j.entry] || j.by_search) return;
  if (!j.linked.out) {
    const std::string why = link_error_text(j.linked.out.error());
    {
      std::lock_guard lock(od.mutex);
      j.by_search = true;
    }
    fail(UDF_ERROR_MISMATCH, what + why);
  }
  if (od.profile) print_link(od, "background link", *j.linked.out, j.linked.started_ms, j.linked.done_ms);
  load_linked(m, *j.linked.out);
  j.linked = OnDemandLink::Linked{};  // the images are the module's now
}

}  // namespace

OnDemandLink::~OnDemandLink() {
  {
    std::lock_guard lock(mutex);
    stopping = true;
  }
  for (std::thread& t : workers)
    if (t.joinable()) t.join();
}

void ensure_linked(udf_module* m, int metric, int filter, uint32_t k, bool rows) {
  if (!m->on_demand) return;
  OnDemandLink& od = *m->on_demand;
  std::vector<int> required, optional;
  for (int e : bucket_entries_for(od.session, metric, filter, k, rows))
    if (e >= 0 && !od.loaded[e]) (od.optional[e] ? optional : required).push_back(e);
  if (required.empty() && optional.empty()) return;
  const std::string what = bucket_text(m, metric, filter, k);

  // What no worker has started, this search links now, all of it at once
  // (the queued jobs it takes, and those an earlier search took and did not
  // load); then it waits for what the workers link.
  std::vector<int> now;
  std::vector<OnDemandLink::Job*> taken, running;
  {
    std::lock_guard lock(od.mutex);
    for (int e : required) {
      OnDemandLink::Job* j = job_of(od, e);
      if (j && (j->state == JobState::Queued || (j->state == JobState::Done && j->by_search))) {
        j->state = JobState::Running;
        j->by_search = true;
        taken.push_back(j);
      }
      if (!j || j->by_search) now.push_back(e);
      else running.push_back(j);
    }
  }
  if (!now.empty()) {
    OnDemandLink::Linked r = link_now(od, now);
    {
      std::lock_guard lock(od.mutex);
      for (OnDemandLink::Job* j : taken) j->state = JobState::Done;
      start_workers(od);  // the optional jobs may be ready now
    }
    if (!r.out) fail(UDF_ERROR_MISMATCH, what + link_error_text(r.out.error()));
    if (od.profile) print_link(od, "a search's link", *r.out, r.started_ms, r.done_ms);
    load_linked(m, *r.out);
  }
  if (!running.empty()) {
    const double waited_from = od.profile ? since_created(od) : 0;
    for (;;) {
      uint32_t seen = 0;
      {
        std::lock_guard lock(od.mutex);
        if (std::all_of(running.begin(), running.end(), [](const OnDemandLink::Job* j) { return j->state == JobState::Done; }))
          break;
        seen = od.jobs_done.load(std::memory_order_acquire);
      }
      od.jobs_done.wait(seen, std::memory_order_acquire);
    }
    if (od.profile)
      std::fprintf(stderr, "udf link: a search waited from +%.0f to +%.0f ms for a background link\n", waited_from,
                   since_created(od));
    for (OnDemandLink::Job* j : running) load_job(m, *j, what);
  }

  // The optional entries: those linked by now are taken; the others are
  // linked in the background (queued now if they were not) for a later search.
  std::vector<OnDemandLink::Job*> ready;
  {
    std::lock_guard lock(od.mutex);
    std::vector<int> queue;
    for (int e : optional) {
      OnDemandLink::Job* j = job_of(od, e);
      if (!j) {
        queue.push_back(e);
      } else if (j->state == JobState::Done && j->by_search) {  // its link failed, and a search said so: again
        j->state = JobState::Queued;
        j->by_search = false;
      } else if (j->state == JobState::Done) {
        ready.push_back(j);
      }
    }
    queue_jobs(od, queue);
  }
  for (OnDemandLink::Job* j : ready) load_job(m, *j, what);
}

std::unique_ptr<udf_module> new_on_demand_module(udf_runtime* rt, LinkSession session, const std::string& name,
                                                 uint32_t prefetch_k) {
  auto od = std::make_unique<OnDemandLink>();
  od->session = std::move(session);
  od->profile = std::getenv("UDF_PROFILE_LINK") != nullptr;
  od->loaded.assign(od->session.plan.entries.size(), 0);
  for (std::size_t e = 0; e < od->session.plan.entries.size(); ++e)
    od->optional.push_back(optional_entry(od->session, static_cast<int>(e)));
  od->max_workers = std::max(1u, od->session.opt.threads ? od->session.opt.threads : link_threads_default());
  const LinkSession& s = od->session;
  auto m = new_module(rt, name, module_manifest(s.arts, s.pack, s.plan, {}, EmitKind::Module, s.cache_key),
                      s.plan.entries);
  m->on_demand = std::move(od);
  // The first bucket, in the background (prefetch_order).
  OnDemandLink& d = *m->on_demand;
  const std::vector<int> first = prefetch_order(d.session, m->metrics.size(), m->filters.size(), prefetch_k);
  if (!first.empty()) {
    std::lock_guard lock(d.mutex);
    queue_jobs(d, first);
  }
  return m;
}

}  // namespace udf::rt

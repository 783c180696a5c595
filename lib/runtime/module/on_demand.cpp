// udf_module_link_ex's on-demand modules (link_session.h, OnDemandLink): a
// module with no code at first, whose k buckets are linked (lib/link, the
// on-disk cache of entries) and loaded when a search first needs them.  The
// first bucket's entries are linked in the background from the start, one
// link an entry (prefetch_order), in waves (link_wave: first the merges and
// the direct twins that a first search of a few queries runs, with no other
// link slowing them down), so that a search waits for the entries it runs
// and no other: a filtered search for its filtered scan and the merge,
// not for the metric's own scans; a monotone metric's search for its plain
// scan, taking the pruning one once that is linked (optional_entry).  The
// jobs and their workers are link_queue.h's; here, what a search does with
// them and the loading of what they link.
#include <cstdio>
#include <cstdlib>

#include "module/launch.h"
#include "module/module.h"
#include "udf/link/link.h"

namespace udf::rt {
namespace {

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

LinkQueue::Linked link_now(const OnDemandLink& od, const std::vector<int>& entries) {
  LinkQueue::Linked r;
  r.started_ms = since_created(od);
  r.out = link_entries(od.session, entries, r.warnings);
  r.done_ms = since_created(od);
  return r;
}

// Loads a worker's link for `j` (a search's thread), or fails the search
// with its error (and the next search that needs the entry links it again).
void load_job(udf_module* m, LinkQueue::Job& j, const std::string& what) {
  OnDemandLink& od = *m->on_demand;
  if (od.loaded[j.entry] || j.by_search) return;
  if (!j.linked.out) {
    const std::string why = link_error_text(j.linked.out.error());
    od.links->mark_failed(j);
    fail(UDF_ERROR_MISMATCH, what + why);
  }
  if (od.profile) print_link(od, "background link", *j.linked.out, j.linked.started_ms, j.linked.done_ms);
  load_linked(m, *j.linked.out);
  j.linked = LinkQueue::Linked{};  // the images are the module's now
}

}  // namespace

void ensure_linked(udf_module* m, int metric, int filter, uint32_t k, bool rows, const DirectFor& direct) {
  if (!m->on_demand) return;
  OnDemandLink& od = *m->on_demand;
  LinkQueue& links = *od.links;
  std::vector<int> required, optional;
  for (int e : bucket_entries_for(od.session, metric, filter, k, rows)) {
    if (e < 0 || od.loaded[e]) continue;
    if (od.optional[e]) {
      optional.push_back(e);
      continue;
    }
    // A direct schedule runs the scan's direct twin until the scan is
    // loaded: the twin's link is the shorter (the scan's goes on).
    const int twin = direct ? direct_twin(od.session, e) : -1;
    const ModuleEntry& me = od.session.plan.entries[e];
    if (twin >= 0 && direct(recommended_queries_per_item(me), static_cast<int>(launch_value(me, "k_max")))) {
      if (!od.loaded[twin]) required.push_back(twin);
    } else {
      required.push_back(e);
    }
  }
  if (required.empty() && optional.empty()) return;
  const std::string what = bucket_text(m, metric, filter, k);

  // What no worker has started, this search links now, all of it at once;
  // then it waits for what the workers link.
  const LinkQueue::Claim claim = links.claim(required);
  if (!claim.now.empty()) {
    LinkQueue::Linked r;
    try {
      r = link_now(od, claim.now);
    } catch (...) {
      links.finish(claim);  // (the jobs it took must not stay running: later searches await them)
      throw;
    }
    links.finish(claim);
    if (!r.out) fail(UDF_ERROR_MISMATCH, what + link_error_text(r.out.error()));
    if (od.profile) print_link(od, "a search's link", *r.out, r.started_ms, r.done_ms);
    load_linked(m, *r.out);
  }
  if (!claim.awaited.empty()) {
    const double waited_from = od.profile ? since_created(od) : 0;
    links.wait(claim);
    if (od.profile)
      std::fprintf(stderr, "udf link: a search waited from +%.0f to +%.0f ms for a background link\n", waited_from,
                   since_created(od));
    for (LinkQueue::Job* j : claim.awaited) load_job(m, *j, what);
  }
  // The optional entries: those linked by now are loaded; the others link
  // in the background for a later search.
  for (LinkQueue::Job* j : links.done_optional(optional)) load_job(m, *j, what);
}

std::unique_ptr<udf_module> new_on_demand_module(udf_runtime* rt, LinkSession session, const std::string& name,
                                                 uint32_t prefetch_k) {
  auto od = std::make_unique<OnDemandLink>();
  od->session = std::move(session);
  od->profile = std::getenv("UDF_PROFILE_LINK") != nullptr;
  const LinkSession& s = od->session;
  od->loaded.assign(s.plan.entries.size(), 0);
  std::vector<int> wave;
  for (std::size_t e = 0; e < s.plan.entries.size(); ++e) {
    od->optional.push_back(optional_entry(s, static_cast<int>(e)));
    wave.push_back(link_wave(s, static_cast<int>(e)));
  }
  OnDemandLink* d = od.get();
  od->links = std::make_unique<LinkQueue>([d](const std::vector<int>& entries) { return link_now(*d, entries); },
                                          std::move(wave), s.opt.threads ? s.opt.threads : link_threads_default());
  auto m = new_module(rt, name, module_manifest(s.arts, s.pack, s.plan, {}, EmitKind::Module, s.cache_key),
                      s.plan.entries);
  m->on_demand = std::move(od);
  // The first bucket, in the background (prefetch_order).
  m->on_demand->links->queue(prefetch_order(m->on_demand->session, m->metrics.size(), m->filters.size(), prefetch_k));
  return m;
}

}  // namespace udf::rt

// udf_module_link_ex's on-demand modules (link_session.h, OnDemandLink): a
// module with no code at first, whose k buckets are linked (lib/link, the
// on-disk cache of entries) and loaded when a search first needs them, the
// first bucket in the background from the start: the metrics' scans on one
// thread, the filtered scans of their pairs on another, so that a first
// filtered search waits for the two side by side, not one after the other.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>

#include "module/module.h"

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

}  // namespace

void ensure_linked(udf_module* m, int metric, int filter, uint32_t k, bool rows) {
  if (!m->on_demand) return;
  OnDemandLink& od = *m->on_demand;
  auto missing = [&] {
    std::vector<int> out;
    for (int e : bucket_entries_for(od.session, metric, filter, k, rows))
      if (e >= 0 && !od.loaded[e]) out.push_back(e);
    return out;
  };
  std::vector<int> want = missing();
  if (want.empty()) return;
  // What the background links have (or will have): take those first.
  for (OnDemandLink::Background& b : od.background) {
    if (!b.done.valid()) continue;
    const bool covers = std::any_of(want.begin(), want.end(), [&](int e) {
      return std::find(b.entries.begin(), b.entries.end(), e) != b.entries.end();
    });
    if (!covers) continue;
    const double waited_from = od.profile ? since_created(od) : 0;
    OnDemandLink::Linked done = b.done.get();
    b.entries.clear();
    if (od.profile)
      std::fprintf(stderr, "udf link: a search waited from +%.0f to +%.0f ms for a background link\n", waited_from,
                   since_created(od));
    if (!done.out) fail(UDF_ERROR_MISMATCH, bucket_text(m, metric, filter, k) + link_error_text(done.out.error()));
    if (od.profile) print_link(od, "background link", *done.out, done.started_ms, done.done_ms);
    load_linked(m, *done.out);
    want = missing();
  }
  if (want.empty()) return;
  std::vector<std::string> warnings;
  const double started_ms = od.profile ? since_created(od) : 0;
  auto out = link_entries(od.session, want, warnings);
  if (!out) fail(UDF_ERROR_MISMATCH, bucket_text(m, metric, filter, k) + link_error_text(out.error()));
  if (od.profile) print_link(od, "a search's link", *out, started_ms, since_created(od));
  load_linked(m, *out);
}

std::unique_ptr<udf_module> new_on_demand_module(udf_runtime* rt, LinkSession session, const std::string& name,
                                                 uint32_t prefetch_k) {
  auto od = std::make_unique<OnDemandLink>();
  od->session = std::move(session);
  od->profile = std::getenv("UDF_PROFILE_LINK") != nullptr;
  od->loaded.assign(od->session.plan.entries.size(), 0);
  const LinkSession& s = od->session;
  auto m = new_module(rt, name, module_manifest(s.arts, s.pack, s.plan, {}, EmitKind::Module, s.cache_key),
                      s.plan.entries);
  m->on_demand = std::move(od);
  // The first bucket, in the background (prefetch_sets).
  OnDemandLink& d = *m->on_demand;
  for (std::vector<int>& entries : prefetch_sets(d.session, m->metrics.size(), m->filters.size(), prefetch_k)) {
    OnDemandLink::Background& b = d.background.emplace_back();
    b.entries = std::move(entries);
    b.done = std::async(std::launch::async, [&d, entries = b.entries] {
      OnDemandLink::Linked r;
      r.started_ms = since_created(d);
      r.out = link_entries(d.session, entries, r.warnings);
      r.done_ms = since_created(d);
      return r;
    });
  }
  return m;
}

}  // namespace udf::rt

// udf_module_link_ex's on-demand modules (link_session.h, OnDemandLink): a
// module with no code at first, whose k buckets are linked (lib/link, the
// on-disk cache of entries) and loaded when a search first needs them, the
// first bucket in the background from the start: the metrics' scans on one
// thread, the filtered scans of their pairs on another, so that a first
// filtered search waits for the two side by side, not one after the other.
#include <algorithm>
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
    OnDemandLink::Linked done = b.done.get();
    b.entries.clear();
    if (!done.out) fail(UDF_ERROR_MISMATCH, bucket_text(m, metric, filter, k) + link_error_text(done.out.error()));
    load_linked(m, *done.out);
    want = missing();
  }
  if (want.empty()) return;
  std::vector<std::string> warnings;
  auto out = link_entries(od.session, want, warnings);
  if (!out) fail(UDF_ERROR_MISMATCH, bucket_text(m, metric, filter, k) + link_error_text(out.error()));
  load_linked(m, *out);
}

std::unique_ptr<udf_module> new_on_demand_module(udf_runtime* rt, LinkSession session, const std::string& name,
                                                 uint32_t prefetch_k) {
  auto od = std::make_unique<OnDemandLink>();
  od->session = std::move(session);
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
    b.done = std::async(std::launch::async, [&s = d.session, entries = b.entries] {
      OnDemandLink::Linked r;
      r.out = link_entries(s, entries, r.warnings);
      return r;
    });
  }
  return m;
}

}  // namespace udf::rt

// The scan choice (index/search_schedule.cpp): a monotone metric's searches
// may take the pruning scan or the plain one (the same results, bit for
// bit).  Which is faster depends on the data: on well-separated clusters the
// pruning scan drops most vectors early; where neighbourhoods overlap it
// drops too few to pay for its checks.  So the runtime measures: per index and
// per kind of search (k bucket, filter, probes, batch size class), a blocking search
// times its scan (two events) while either scan is unmeasured, and now and
// then again (after 64 searches, then twice as many each time the faster one
// stays the faster, up to 4096: timing the slower one costs, on clustered
// data where pruning halves the scan, a whole scan); the others take the one
// with the lower time per (query, probe).
// Header-only and free of CUDA, so that the rule is tested on the CPU
// (test/unit/scan_choice_test.cpp).
#pragma once

#include <bit>
#include <cstdint>

namespace udf::rt {

struct ScanChoice {
  static constexpr int kPrune = 0, kPlain = 1;
  // Each scan is timed again kRefresh searches of this kind after the
  // first measurements, then at twice the interval each time, up to
  // kMaxRefresh; back to kRefresh when the other scan became the faster:
  // data whose answer changes (another query distribution) is followed.
  static constexpr std::uint32_t kRefresh = 64, kMaxRefresh = 4096;

  // Each scan's first measurement is not kept: it may include the lazy load
  // of its kernel (the GPU idles between the events while the host loads it).
  static constexpr std::uint8_t kWarmUp = 1;

  float ms_per_pair[2] = {-1.0f, -1.0f};  // the last kept measurement of each scan (< 0: none yet)
  std::uint8_t measured[2] = {0, 0};      // measurements of each scan, the warm-up one included
  std::uint64_t uses = 0;
  std::uint32_t interval = kRefresh;  // searches between the refreshes
  std::uint64_t refresh_at = 0;       // from this use on, the next searches that can be timed time both scans again; 0: not set
  bool refresh_plain = false;         // a refresh has timed the pruning scan: the plain one is next
  int last_best = kPrune;

  // The key of a kind of search: the scan's k bucket, its filter (the
  // module's filter index, -1: none; a filter changes what a bound
  // prunes), the probes and the batch's size class (queries of the chunk,
  // by powers of two).
  static std::uint64_t key(int k_max, int filter, std::uint32_t probes, std::uint32_t queries) {
    const std::uint64_t k = static_cast<std::uint16_t>(k_max);
    const std::uint64_t f = static_cast<std::uint16_t>(filter + 1);
    const std::uint64_t p = probes < (1u << 24) ? probes : (1u << 24) - 1;
    return (k << 48) | (f << 32) | (p << 8) | std::bit_width(queries);
  }

  struct Pick {
    int scan = kPrune;
    bool measure = false;  // time this search's scan and record() it
  };

  // The scan for the next search of this kind; `can_measure`: the search
  // waits for its end (a blocking one), so its scan time can be read.
  Pick next(bool can_measure) {
    const std::uint64_t n = uses++;
    const int b = best();
    if (b != last_best) {  // the other scan became the faster: look again soon (a refresh under way ends here)
      last_best = b;
      interval = kRefresh;
      refresh_at = n + kRefresh;
      refresh_plain = false;
    }
    if (!can_measure) return {b, false};
    if (ms_per_pair[kPrune] < 0) return {kPrune, true};  // prune first: what a monotone declaration asks for
    if (ms_per_pair[kPlain] < 0) return {kPlain, true};
    if (refresh_at == 0) refresh_at = n + interval;
    if (n < refresh_at) return {b, false};
    // Due (searches that could not be timed may have passed the mark): the
    // pruning scan, then at the next search that can be timed the plain one.
    if (!refresh_plain) {
      refresh_plain = true;
      return {kPrune, true};
    }
    refresh_plain = false;
    interval = interval < kMaxRefresh / 2 ? 2 * interval : kMaxRefresh;
    refresh_at = n + interval;
    return {kPlain, true};
  }

  // The measured scan: `ms` for `pairs` (query, probe) pairs.
  void record(int scan, float ms, double pairs) {
    if (!(pairs > 0 && ms >= 0)) return;
    if (measured[scan] < 255) ++measured[scan];
    if (measured[scan] > kWarmUp) ms_per_pair[scan] = static_cast<float>(ms / pairs);
  }

  // The faster of the two where both are measured; the pruning scan until
  // then (what a monotone declaration asks for).
  int best() const {
    if (ms_per_pair[kPrune] < 0 || ms_per_pair[kPlain] < 0) return kPrune;
    return ms_per_pair[kPlain] < ms_per_pair[kPrune] ? kPlain : kPrune;
  }
};

}  // namespace udf::rt

// The balanced assignment of rows to lists (host code, header-only so that
// balance_test checks it without a GPU): the build's assignment pass and
// each k-means iteration; the k-means update's grouping of rows by list;
// and the two-level k-means' share of the lists.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <utility>
#include <vector>

namespace udf::rt {

/// At most this many parts of the rows count their labels apart (group_by_label).
inline constexpr size_t kGroupParts = 64;

namespace balance_detail {

// Rows a part of the passes over every row (the first round's labels and
// counts, the rows it leaves pending), pending rows a part of a round's
// grouping, and lists a part of a round's settling.
inline constexpr size_t kRowsAPart = size_t(1) << 16;
inline constexpr size_t kPendingAPart = size_t(1) << 13;
inline constexpr size_t kListsAPart = 64;

/// parallel(n, part) on the calling thread alone.
inline void serially(size_t n, const std::function<void(size_t)>& part) {
  for (size_t i = 0; i < n; ++i) part(i);
}

// group_by_label, placing items[i] for row i (i itself when items is null),
// in parts of at least rows_a_part rows.
template <class Parallel>
void group_items(const uint32_t* label, const uint32_t* items, size_t n, uint32_t n_labels, uint32_t* order,
                 std::vector<uint32_t>& counts, std::vector<uint32_t>& starts, Parallel&& parallel, size_t rows_a_part) {
  const size_t parts = std::clamp<size_t>((n + rows_a_part - 1) / rows_a_part, 1, kGroupParts);
  auto rows_of = [&](size_t part) { return std::pair(part * n / parts, (part + 1) * n / parts); };
  std::vector<uint32_t> at(parts * n_labels, 0);  // [part][label]: the part's count, then its first place
  parallel(parts, [&](size_t part) {
    uint32_t* a = at.data() + part * n_labels;
    const auto [b, e] = rows_of(part);
    for (size_t i = b; i < e; ++i) ++a[label[i]];
  });
  counts.assign(n_labels, 0);
  starts.assign(size_t(n_labels) + 1, 0);
  uint32_t place = 0;
  for (uint32_t l = 0; l < n_labels; ++l) {
    starts[l] = place;
    for (size_t part = 0; part < parts; ++part) {
      const uint32_t c = at[part * n_labels + l];
      at[part * n_labels + l] = place;
      place += c;
    }
    counts[l] = place - starts[l];
  }
  starts[n_labels] = place;
  parallel(parts, [&](size_t part) {
    uint32_t* a = at.data() + part * n_labels;
    const auto [b, e] = rows_of(part);
    for (size_t i = b; i < e; ++i) order[a[label[i]]++] = items ? items[i] : static_cast<uint32_t>(i);
  });
}

}  // namespace balance_detail

/// The rows grouped by label, each group in row order (a stable counting
/// sort of label[0 .. n), every label < n_labels, n < 2^32):
/// order[starts[l] .. starts[l + 1]) are the rows labelled l, ascending, and
/// counts[l] their number.  At most kGroupParts parts of consecutive rows
/// (of at least kRowsAPart) are counted apart, then each places its rows
/// from its own start in every group; `parallel` as for balanced_assign.
/// The order does not depend on the parts.
template <class Parallel = decltype(&balance_detail::serially)>
void group_by_label(const uint32_t* label, size_t n, uint32_t n_labels, uint32_t* order, std::vector<uint32_t>& counts,
                    std::vector<uint32_t>& starts, Parallel&& parallel = &balance_detail::serially) {
  balance_detail::group_items(label, nullptr, n, n_labels, order, counts, starts, parallel, balance_detail::kRowsAPart);
}

namespace balance_detail {

// One round over `pending` rows, each wanting its candidate rank[i]: rows
// grouped by that list in pending order; a list with room for its group
// takes all of it, an over-full one its nearest rows (key, then row) and
// sends the others to their next candidate (into `next`, list by list,
// nearest first); rows out of candidates go to the emptiest list (the
// first of the emptiest), in pending order.  The grouping and the lists'
// settling run by parts: `parallel(n, part)` runs part(0 .. n-1) in any
// order, on any threads.
template <class Parallel>
void settle_round(const uint32_t* cand, const float* keys, uint32_t c, std::vector<uint64_t>& counts, uint64_t cap,
                  const std::vector<uint32_t>& pending, std::vector<uint16_t>& rank, std::vector<uint32_t>& label,
                  std::vector<uint32_t>& next, Parallel&& parallel) {
  const size_t n_lists = counts.size(), n_pending = pending.size();
  const size_t parts = (n_pending + kPendingAPart - 1) / kPendingAPart;
  auto pending_of = [&](size_t part) { return std::pair(part * kPendingAPart, std::min(n_pending, (part + 1) * kPendingAPart)); };
  // Each pending row's list (n_lists: out of candidates), then the rows
  // grouped by it in pending order: by_list[l] rows from want[start[l]].
  std::vector<uint32_t> wanted(n_pending), want(n_pending), by_list, start;
  parallel(parts, [&](size_t part) {
    const auto [b, e] = pending_of(part);
    for (size_t k = b; k < e; ++k) {
      const uint32_t i = pending[k];
      wanted[k] = rank[i] < c ? cand[size_t(i) * c + rank[i]] : static_cast<uint32_t>(n_lists);
    }
  });
  group_items(wanted.data(), pending.data(), n_pending, static_cast<uint32_t>(n_lists + 1), want.data(), by_list, start,
              parallel, kPendingAPart);
  // Each list keeps its nearest `room` rows (its own rows, counts and
  // labels only).  An over-full list sorts (key, row) pairs, each row's key
  // read once, rather than rows through their keys.  Its other rows go on
  // to their next candidate, at the list's place in `next` (the rows each
  // list sent on, list by list).
  std::vector<size_t> kept(n_lists, 0), sent(n_lists + 1, 0);
  const size_t list_parts = (n_lists + kListsAPart - 1) / kListsAPart;
  auto lists_of = [&](size_t part) { return std::pair(part * kListsAPart, std::min(n_lists, (part + 1) * kListsAPart)); };
  parallel(list_parts, [&](size_t part) {
    std::vector<std::pair<float, uint32_t>> by_key;
    const auto [b, e] = lists_of(part);
    for (size_t l = b; l < e; ++l) {
      uint32_t* w = want.data() + start[l];
      const size_t m = by_list[l];
      const uint64_t room = counts[l] >= cap ? 0 : cap - counts[l];
      if (m > room) {
        by_key.resize(m);
        for (size_t j = 0; j < m; ++j) by_key[j] = {keys[size_t(w[j]) * c + rank[w[j]]], w[j]};
        std::sort(by_key.begin(), by_key.end());  // key, then row
        for (size_t j = 0; j < m; ++j) w[j] = by_key[j].second;
      }
      kept[l] = std::min<size_t>(m, room);
      for (size_t j = 0; j < kept[l]; ++j) label[w[j]] = static_cast<uint32_t>(l);
      counts[l] += kept[l];
    }
  });
  for (size_t l = 0; l < n_lists; ++l) sent[l + 1] = sent[l] + (by_list[l] - kept[l]);
  next.resize(sent[n_lists]);
  parallel(list_parts, [&](size_t part) {  // the others try their next candidate
    const auto [b, e] = lists_of(part);
    for (size_t l = b; l < e; ++l)
      for (size_t j = start[l] + kept[l], to = sent[l]; j < start[l + 1]; ++j, ++to) {
        ++rank[want[j]];
        next[to] = want[j];
      }
  });
  // Out of candidates: the emptiest list, the first of them (a heap of
  // (count, list), each taken list back with its new count).
  if (by_list[n_lists] == 0) return;
  std::vector<std::pair<uint64_t, uint32_t>> heap(n_lists);
  for (size_t l = 0; l < n_lists; ++l) heap[l] = {counts[l], static_cast<uint32_t>(l)};
  const auto later = std::greater<std::pair<uint64_t, uint32_t>>();
  std::make_heap(heap.begin(), heap.end(), later);
  for (size_t j = start[n_lists]; j < start[n_lists + 1]; ++j) {
    std::pop_heap(heap.begin(), heap.end(), later);
    auto& [count, l] = heap.back();
    label[want[j]] = l;
    count = ++counts[l];
    std::push_heap(heap.begin(), heap.end(), later);
  }
}

}  // namespace balance_detail

/// Balanced assignment.  cand/keys: [n][c] candidate lists, nearest first,
/// and their keys (smaller is nearer); c <= 65535.  counts: the lists'
/// current sizes (updated).  Each row takes its nearest candidate whose list
/// has room under `cap` (0: no cap, the nearest); an over-full list keeps its
/// nearest rows (key, then row) and pushes the others to their next
/// candidate, round after round; rows out of candidates go to the emptiest
/// list.
///
/// The first round is the one every row takes part in: each list counts the
/// rows that name it first (parts of the rows counted apart, then added),
/// and only the rows of lists without room for all of them are grouped and
/// sorted.  The rounds after it take the rows those lists sent on.  The
/// labels are those of running every round over every pending row.
/// `parallel(n, part)` runs part(0 .. n-1), in any order on any threads
/// (the runtime's host pool); the labels do not depend on it.
template <class Parallel = decltype(&balance_detail::serially)>
std::vector<uint32_t> balanced_assign(const uint32_t* cand, const float* keys, size_t n, uint32_t c,
                                      std::vector<uint64_t>& counts, uint64_t cap,
                                      Parallel&& parallel = &balance_detail::serially) {
  using balance_detail::kRowsAPart;
  const size_t n_lists = counts.size();
  const size_t parts = (n + kRowsAPart - 1) / kRowsAPart;
  auto rows_of = [&](size_t part) { return std::pair(part * kRowsAPart, std::min(n, (part + 1) * kRowsAPart)); };
  std::vector<uint32_t> label(n);
  // Each part's first candidates and its count of them a list.
  std::vector<std::vector<uint32_t>> part_first(parts);
  parallel(parts, [&](size_t part) {
    std::vector<uint32_t>& f = part_first[part];
    f.assign(n_lists, 0);
    const auto [b, e] = rows_of(part);
    for (size_t i = b; i < e; ++i) ++f[label[i] = cand[i * c]];
  });
  std::vector<uint64_t> first(n_lists, 0);
  for (const std::vector<uint32_t>& f : part_first)
    for (size_t l = 0; l < n_lists; ++l) first[l] += f[l];
  std::vector<std::uint8_t> over(n_lists, 0);
  bool any_over = false;
  for (size_t l = 0; l < n_lists; ++l) {
    const uint64_t room = cap == 0 ? first[l] : counts[l] >= cap ? 0 : cap - counts[l];
    if (first[l] > room) {
      over[l] = 1;
      any_over = true;
    } else {
      counts[l] += first[l];
    }
  }
  if (!any_over) return label;
  // The first round over the rows of the over-full lists in row order (the
  // others have their lists, counted above), then the rounds after it.
  std::vector<std::vector<uint32_t>> part_pending(parts);
  parallel(parts, [&](size_t part) {
    const auto [b, e] = rows_of(part);
    for (size_t i = b; i < e; ++i)
      if (over[label[i]]) part_pending[part].push_back(static_cast<uint32_t>(i));
  });
  std::vector<uint32_t> pending, next;
  for (const std::vector<uint32_t>& p : part_pending) pending.insert(pending.end(), p.begin(), p.end());
  std::vector<uint16_t> rank(n, 0);
  while (!pending.empty()) {
    balance_detail::settle_round(cand, keys, c, counts, cap, pending, rank, label, next, parallel);
    pending.swap(next);
  }
  return label;
}

/// The two-level k-means' lists for each group of rows (sizes: the rows of
/// each mesocluster), n_lists in all, in proportion to the rows: at least
/// one a non-empty group, none an empty one, at most a group's rows
/// (n_lists <= the rows in all, and no more non-empty groups than n_lists);
/// the rest by largest remainder, ties to the earlier group.
inline std::vector<uint32_t> share_centers(const std::vector<uint64_t>& sizes, uint32_t n_lists) {
  const uint64_t total = std::accumulate(sizes.begin(), sizes.end(), uint64_t(0));
  const size_t g = sizes.size();
  std::vector<uint32_t> k(g, 0);
  std::vector<double> rem(g, 0);
  uint64_t given = 0;
  for (size_t i = 0; i < g; ++i) {
    if (sizes[i] == 0) continue;
    const double want = double(n_lists) * double(sizes[i]) / double(total);
    k[i] = static_cast<uint32_t>(std::clamp<uint64_t>(static_cast<uint64_t>(want), 1, sizes[i]));
    rem[i] = want - k[i];
    given += k[i];
  }
  std::vector<size_t> by(g);
  std::iota(by.begin(), by.end(), size_t(0));
  std::stable_sort(by.begin(), by.end(), [&](size_t a, size_t b) { return rem[a] > rem[b]; });
  while (given < n_lists)  // the rest, largest remainders first (a group with room)
    for (size_t i : by)
      if (given < n_lists && sizes[i] > k[i]) ++k[i], ++given;
  while (given > n_lists)  // the ones at least one gave past the share, smallest remainders first
    for (auto it = by.rbegin(); it != by.rend(); ++it)
      if (given > n_lists && k[*it] > 1) --k[*it], --given;
  return k;
}

}  // namespace udf::rt

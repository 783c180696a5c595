#include "index/index_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "udf/kernels/ivf_index_v1.h"
#include "udf/support/hash.h"

namespace udf::rt {
namespace {

Error bad_format(std::string message) { return diagnosed(DiagCode::BadDataFile, std::move(message)); }

// Reads fields in order; the first read past the end is the error.
struct Reader {
  std::span<const std::uint8_t> b;  // the file without its checksum
  std::size_t pos = 0;
  const std::string& path;
  std::optional<Error> error;

  bool need(std::size_t n) {
    if (error) return false;
    if (n <= b.size() - pos) return true;
    error = bad_format(path + ": truncated index file (needs " + std::to_string(n) + " more bytes at offset " +
                       std::to_string(pos) + ")");
    return false;
  }
  template <class T> T get() {
    T v{};
    if (!need(sizeof(T))) return v;
    std::memcpy(&v, b.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  void raw(void* p, std::size_t n) {
    if (!need(n)) return;
    if (n) std::memcpy(p, b.data() + pos, n);
    pos += n;
  }
  std::string str(std::size_t max) {
    const std::uint32_t n = get<std::uint32_t>();
    if (error) return {};
    if (n > max) {
      error = bad_format(path + ": bad string length " + std::to_string(n));
      return {};
    }
    if (!need(n)) return {};
    std::string s(n, '\0');
    raw(s.data(), n);
    return s;
  }
};

}  // namespace

Expected<IndexFileHeader> parse_index_file_header(std::span<const std::uint8_t> file, const std::string& path) {
  if (file.size() < 8 + kIndexFileTrailer || std::memcmp(file.data(), kIndexFileMagic, 8) != 0)
    return bad_format(path + ": not a udf IVF index file (bad magic or too short)");
  const auto body = file.first(file.size() - kIndexFileTrailer);
  Reader r{body, 8, path, {}};
  IndexFileHeader h;
  h.major = r.get<std::uint32_t>();
  h.minor = r.get<std::uint32_t>();
  if (r.error) return std::move(*r.error);
  if (h.major != kIndexFileMajor)
    return bad_format(path + ": index file version " + std::to_string(h.major) + "." + std::to_string(h.minor) +
                      " is not supported (this runtime reads " + std::to_string(kIndexFileMajor) + ".x)");
  const Sha256 sum = sha256(body);
  if (std::memcmp(sum.data(), file.data() + body.size(), kIndexFileTrailer) != 0)
    return bad_format(path + ": checksum mismatch (the index file is corrupt or truncated)");
  h.elem = r.get<std::uint32_t>();
  h.dim = r.get<std::uint32_t>();
  h.n_lists = r.get<std::uint32_t>();
  h.coarse = r.get<std::uint32_t>();
  h.size = r.get<std::int64_t>();
  h.next_id = r.get<std::int64_t>();
  h.balance = r.get<double>();
  h.symbol = r.str(4096);
  h.cache_key = r.str(4096);
  if (r.error) return std::move(*r.error);
  if (h.elem > 3 || h.dim == 0 || h.dim > kMaxDim || h.n_lists == 0 || h.n_lists > kMaxLists || h.size < 0)
    return bad_format(path + ": bad header field (elem/dim/n_lists/size)");
  if ((h.coarse & ~(0xFFu | kCoarseNormalized | kCoarseWeights)) != 0 || (h.coarse & 0xFF) > UDF_IVF_INDEX_V1_IP ||
      ((h.coarse & kCoarseNormalized) && (h.coarse & kCoarseWeights)))
    return bad_format(path + ": bad header field (coarse " + std::to_string(h.coarse) + ")");
  if (h.coarse & kCoarseWeights) {
    if (!r.need(std::size_t(h.dim) * 4)) return std::move(*r.error);
    h.coarse_weights.resize(h.dim);
    r.raw(h.coarse_weights.data(), std::size_t(h.dim) * 4);
    bool any = false;
    for (float w : h.coarse_weights) {
      if (!std::isfinite(w) || w < 0) return bad_format(path + ": bad coarse weight " + std::to_string(w));
      any = any || w > 0;
    }
    if (!any) return bad_format(path + ": the coarse weights are all 0");
  }
  // What udf_index_build accepts; anything else would reach the balanced
  // assignment of udf_index_add (a cast of ceil(inf) to an integer).
  if (!std::isfinite(h.balance) || !(h.balance == 0 || h.balance >= 1.0))
    return bad_format(path + ": bad header field (balance " + std::to_string(h.balance) +
                      "; must be 0 or >= 1)");
  h.lists_offset = r.pos;
  return h;
}

Expected<IndexFileLists> parse_index_file_lists(std::span<const std::uint8_t> file, const IndexFileHeader& h,
                                                const std::string& path) {
  Reader r{file.first(file.size() - kIndexFileTrailer), h.lists_offset, path, {}};
  IndexFileLists out;
  const std::size_t esize = h.elem_size();
  // The centroids are checked against the bytes left before they are
  // allocated: n_lists * dim * 4 reaches 4 GiB.
  const std::size_t n_centroids = std::size_t(h.n_lists) * h.dim;
  if (!r.need(n_centroids * 4)) return std::move(*r.error);
  out.centroids.resize(n_centroids);
  r.raw(out.centroids.data(), n_centroids * 4);
  std::vector<std::uint64_t> sizes(h.n_lists);
  std::uint64_t total = 0;
  for (auto& s : sizes) {
    s = r.get<std::uint64_t>();
    if (r.error) return std::move(*r.error);
    if (s > r.b.size()) return bad_format(path + ": bad list size");
    total += s;
  }
  if (total != static_cast<std::uint64_t>(h.size))
    return bad_format(path + ": list sizes do not add up to the index size");
  out.ids.resize(h.n_lists);
  out.vecs.resize(h.n_lists);
  for (std::uint32_t l = 0; l < h.n_lists; ++l) {
    if (!r.need(sizes[l] * (8 + std::size_t(h.dim) * esize))) return std::move(*r.error);
    out.ids[l].resize(sizes[l]);
    r.raw(out.ids[l].data(), sizes[l] * 8);
    out.vecs[l].resize(sizes[l] * h.dim * esize);
    r.raw(out.vecs[l].data(), out.vecs[l].size());
  }
  if (r.error) return std::move(*r.error);
  if (r.pos != r.b.size()) return bad_format(path + ": trailing bytes after the lists");
  return out;
}

std::vector<std::uint8_t> index_file_bytes(const IndexFileHeader& h, const std::vector<float>& centroids,
                                           const std::vector<std::vector<std::int64_t>>& ids,
                                           const std::vector<std::vector<std::uint8_t>>& vecs) {
  std::vector<std::uint8_t> b(kIndexFileMagic, kIndexFileMagic + 8);
  auto raw = [&](const void* p, std::size_t n) {
    if (n == 0) return;
    const std::size_t at = b.size();
    b.resize(at + n);
    std::memcpy(b.data() + at, p, n);
  };
  auto put = [&](const auto& v) { raw(&v, sizeof v); };
  auto str = [&](const std::string& s) {
    put(std::uint32_t(s.size()));
    raw(s.data(), s.size());
  };
  put(kIndexFileMajor);
  put(h.coarse_weights.empty() ? kIndexFileMinor : kIndexFileMinorWeights);
  put(h.elem);
  put(h.dim);
  put(h.n_lists);
  put(h.coarse);
  put(h.size);
  put(h.next_id);
  put(h.balance);
  str(h.symbol);
  str(h.cache_key);
  raw(h.coarse_weights.data(), h.coarse_weights.size() * 4);
  raw(centroids.data(), centroids.size() * 4);
  for (const auto& l : ids) put(std::uint64_t(l.size()));
  for (std::size_t l = 0; l < ids.size(); ++l) {
    raw(ids[l].data(), ids[l].size() * 8);
    raw(vecs[l].data(), vecs[l].size());
  }
  const Sha256 sum = sha256(b);
  raw(sum.data(), sum.size());
  return b;
}

std::int64_t next_id_after(const std::vector<std::vector<std::int64_t>>& ids) {
  std::int64_t max_id = -1;
  for (const auto& l : ids)
    for (std::int64_t id : l) max_id = std::max(max_id, id);
  return max_id == std::numeric_limits<std::int64_t>::max() ? max_id : max_id + 1;
}

}  // namespace udf::rt

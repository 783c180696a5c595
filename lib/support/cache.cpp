#include "udf/support/cache.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "udf/support/hash.h"

// On-disk layout (docs/cache.md):
//   <dir>/v1/<k0k1>/<key>          entries: 88-byte header + value
//   <dir>/v1/<k0k1>/.tmp.<key>.*   a put in progress (or a killed writer's leftover)
//   <dir>/v1/lock                  flock()ed by eviction only
//   <dir>/v1/size                  total entry bytes at the last eviction pass (text)
//   <dir>/v1/journal               8-byte little-endian entry sizes appended by puts since then
//
// Entry header, little-endian:
//   0  magic "UDFCACHE"       8
//   8  format version (1)     4
//  12  flags (0)              4
//  16  value length           8
//  24  key (binary)          32
//  56  SHA-256 of the value  32

namespace udf {

namespace {

constexpr char kMagic[8] = {'U', 'D', 'F', 'C', 'A', 'C', 'H', 'E'};
constexpr std::uint32_t kFormatVersion = 1;
constexpr const char* kLayout = "v1";
constexpr const char* kTempPrefix = ".tmp.";
// Puts between two full passes over the folder, which re-measure the total.
constexpr std::uint64_t kFoldEvery = 256;

std::function<void(const std::string&)>& before_rename_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

std::string errno_text(int e) { return std::strerror(e); }

void put_le(std::uint8_t* p, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint64_t get_le(const std::uint8_t* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

Sha256 key_bytes(std::string_view key) {
  Sha256 out{};
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::uint8_t>(hex_digit(key[2 * i]) << 4 | hex_digit(key[2 * i + 1]));
  return out;
}

Error bad_key(std::string_view key) {
  std::string shown(key.substr(0, 80));
  if (key.size() > 80) shown += "...";
  return internal_error("invalid cache key '" + shown + "': expected 64 lowercase hex digits (a SHA-256), got " +
                        std::to_string(key.size()) + " characters");
}

std::string random_hex() {
  std::uint8_t r[8];
  if (::getrandom(r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r)) {
    // No entropy source: time and address bits still differ between writers
    // with the same pid (which cannot run at the same time anyway).
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    put_le(r, static_cast<std::uint64_t>(ts.tv_nsec) ^ (static_cast<std::uint64_t>(ts.tv_sec) << 30) ^
                  reinterpret_cast<std::uintptr_t>(&ts),
           8);
  }
  return to_hex(r);
}

Expected<void> write_all(int fd, const std::uint8_t* p, std::size_t n, const std::string& path, const char* what) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return diagnosed(DiagCode::CacheIo, "cannot write cache " + std::string(what) + " '" + path + "': " + errno_text(errno));
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return {};
}

// Reads up to n bytes; fewer only at end of file.
Expected<std::size_t> read_full(int fd, std::uint8_t* p, std::size_t n, const std::string& path) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return diagnosed(DiagCode::CacheIo, "cannot read cache entry '" + path + "': " + errno_text(errno));
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

// mkdir that treats "already there" as success.
Expected<void> make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0777) == 0 || errno == EEXIST) return {};
  return diagnosed(DiagCode::CacheUnavailable, "cannot create cache folder '" + path + "': " + errno_text(errno));
}

Expected<void> make_dirs(const std::string& path) {
  if (path.empty()) return {};
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {};
    return diagnosed(DiagCode::CacheUnavailable, "cannot create cache folder '" + path + "': a file of that name is in the way");
  }
  std::size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) UDF_TRY_VOID(make_dirs(path.substr(0, slash)));
  return make_dir(path);
}

Expected<std::uint64_t> parse_max_bytes(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return usage_error(DiagCode::Environment, "invalid UDF_CACHE_MAX_BYTES '" + text + "': " + why +
                       " (expected a positive integer with an optional K, M, G or T suffix)");
  };
  std::size_t i = 0;
  std::uint64_t v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return bad("too large");
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return bad("no number");
  std::string suffix = text.substr(i);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (!suffix.empty()) {
    const std::string units = "KMGT";
    auto u = units.find(suffix[0]);
    if (u == std::string::npos) {
      if (suffix != "B") return bad("unknown suffix '" + text.substr(i) + "'");
    } else {
      shift = 10 * static_cast<int>(u + 1);
      std::string rest = suffix.substr(1);
      if (!rest.empty() && rest != "B" && rest != "IB") return bad("unknown suffix '" + text.substr(i) + "'");
    }
  }
  if (shift && v > (UINT64_MAX >> shift)) return bad("too large");
  v <<= shift;
  if (v == 0) return bad("must be positive");
  return v;
}

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

std::string getenv_str(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// Writes a small bookkeeping file by temp + rename, without fsync: losing it
// in a crash only makes the size estimate stale until the next pass.
Expected<void> write_small(const std::string& vdir, const std::string& name, const std::string& text) {
  std::string path = vdir + "/" + name;
  std::string tmp = vdir + "/" + kTempPrefix + name + "." + std::to_string(::getpid()) + "." + random_hex();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return diagnosed(DiagCode::CacheIo, "cannot write cache file '" + tmp + "': " + errno_text(errno));
  auto w = write_all(fd, reinterpret_cast<const std::uint8_t*>(text.data()), text.size(), tmp, "file");
  ::close(fd);
  if (!w) {
    ::unlink(tmp.c_str());
    return std::move(w.error());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return diagnosed(DiagCode::CacheIo, "cannot write cache file '" + path + "': rename: " + errno_text(e));
  }
  return {};
}

struct ScannedEntry {
  std::string path;
  std::uint64_t size;
  std::int64_t mtime;
  dev_t dev;
  ino_t ino;
};

// Checks an entry's 88-byte header against the key it is read for and the
// entry's size (header + value); the reason it is corrupt, or none.
std::optional<std::string> entry_header_problem(const std::uint8_t* h, std::string_view key_hex, std::uint64_t entry_size) {
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) return "bad magic (not a udf cache entry)";
  std::uint32_t version = static_cast<std::uint32_t>(get_le(h + 8, 4));
  if (version != kFormatVersion) return "unsupported entry format version " + std::to_string(version);
  std::uint64_t len = get_le(h + 16, 8);
  Sha256 key = key_bytes(key_hex);
  if (std::memcmp(h + 24, key.data(), key.size()) != 0) return "entry holds the value of another key";
  if (len != entry_size - Cache::kHeaderSize)
    return "size mismatch: header says " + std::to_string(len) + " value bytes, file holds " +
           std::to_string(entry_size - Cache::kHeaderSize);
  return std::nullopt;
}

bool is_shard_name(const char* n) {
  return hex_digit(n[0]) >= 0 && hex_digit(n[1]) >= 0 && n[2] == '\0';
}

}  // namespace

namespace cache_testing {
void set_before_rename_hook(std::function<void(const std::string&)> hook) { before_rename_hook() = std::move(hook); }
}  // namespace cache_testing

bool Cache::is_valid_key(std::string_view key) {
  if (key.size() != 64) return false;
  return std::all_of(key.begin(), key.end(), [](char c) { return hex_digit(c) >= 0; });
}

Expected<std::string> Cache::default_dir() {
  if (std::string d = getenv_str("UDF_CACHE_DIR"); !d.empty()) return d;
  // The XDG base directory spec says to ignore relative paths.
  if (std::string x = getenv_str("XDG_CACHE_HOME"); !x.empty() && x[0] == '/') return x + "/udf";
  if (std::string h = getenv_str("HOME"); !h.empty()) return h + "/.cache/udf";
  return diagnosed(DiagCode::CacheUnavailable, "cannot locate the cache folder: none of UDF_CACHE_DIR, XDG_CACHE_HOME or HOME is set");
}

Expected<Cache> Cache::open(std::optional<std::string> dir) {
  std::string d;
  if (dir) {
    d = *dir;
    if (d.empty()) return diagnosed(DiagCode::CacheUnavailable, "cannot open cache: empty folder name");
  } else {
    UDF_TRY(found, default_dir());
    d = found;
  }
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  std::uint64_t max_bytes = kDefaultMaxBytes;
  if (std::string m = getenv_str("UDF_CACHE_MAX_BYTES"); !m.empty()) {
    UDF_TRY(parsed, parse_max_bytes(m));
    max_bytes = parsed;
  }
  std::string vdir = d + "/" + kLayout;
  UDF_TRY_VOID(make_dirs(vdir));
  Cache c;
  c.enabled_ = true;
  c.dir_ = std::move(d);
  c.vdir_ = std::move(vdir);
  c.max_bytes_ = max_bytes;
  return c;
}

Cache Cache::disabled() { return Cache(); }

Cache Cache::memo(const std::optional<std::string>& dir) {
  std::string d;
  if (dir) {
    d = *dir;
  } else if (auto found = default_dir()) {
    d = *found;
  }
  if (d.empty()) return disabled();
  auto c = open(d + "/memo");
  return c ? c.take() : disabled();
}

std::string Cache::entry_path(std::string_view key_hex) const {
  std::string p = vdir_;
  p += '/';
  p.append(key_hex.substr(0, 2));
  p += '/';
  p.append(key_hex);
  return p;
}

Expected<std::optional<Bytes>> Cache::get(std::string_view key_hex, CacheCorruption* corruption) {
  if (!is_valid_key(key_hex)) return bad_key(key_hex);
  if (!enabled_) {
    ++stats_.misses;
    return std::optional<Bytes>();
  }
  std::string path = entry_path(key_hex);
  // O_NONBLOCK: a FIFO in the way must not block (it reads as corrupt below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno != ELOOP) {
    if (errno == ENOENT || errno == ENOTDIR) {
      ++stats_.misses;
      return std::optional<Bytes>();
    }
    return diagnosed(DiagCode::CacheIo, "cannot read cache entry '" + path + "': " + errno_text(errno));
  }

  struct stat st{};
  // A corrupt entry: remove it (unless a writer has meanwhile renamed a new
  // one into place) and miss.
  auto corrupt = [&](std::string reason) -> Expected<std::optional<Bytes>> {
    struct stat now{};
    bool same = ::lstat(path.c_str(), &now) == 0 &&
                (fd < 0 ? S_ISLNK(now.st_mode) : now.st_dev == st.st_dev && now.st_ino == st.st_ino);
    if (same) ::unlink(path.c_str());
    if (fd >= 0) ::close(fd);
    ++stats_.corrupt;
    ++stats_.misses;
    if (corruption) *corruption = CacheCorruption{path, std::move(reason)};
    return std::optional<Bytes>();
  };
  if (fd < 0) return corrupt("entry is a symbolic link");
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return diagnosed(DiagCode::CacheIo, "cannot read cache entry '" + path + "': " + errno_text(e));
  }
  if (!S_ISREG(st.st_mode)) return corrupt("entry is not a regular file");
  std::uint64_t file_size = static_cast<std::uint64_t>(st.st_size);
  if (file_size < kHeaderSize)
    return corrupt("truncated: " + std::to_string(file_size) + " bytes, shorter than the header");

  std::uint8_t h[kHeaderSize];
  auto got = read_full(fd, h, kHeaderSize, path);
  if (!got) {
    ::close(fd);
    return std::move(got.error());
  }
  if (*got != kHeaderSize) return corrupt("truncated while reading the header");
  if (auto problem = entry_header_problem(h, key_hex, file_size)) return corrupt(std::move(*problem));
  std::uint64_t len = file_size - kHeaderSize;

  Bytes value(len);
  got = read_full(fd, value.data(), len, path);
  if (!got) {
    ::close(fd);
    return std::move(got.error());
  }
  if (*got != len) return corrupt("truncated while reading the value");
  std::uint8_t extra;
  got = read_full(fd, &extra, 1, path);
  if (!got) {
    ::close(fd);
    return std::move(got.error());
  }
  if (*got != 0) return corrupt("trailing bytes after the value");
  if (std::memcmp(h + 56, sha256(value).data(), 32) != 0) return corrupt("checksum mismatch");

  // Recently used: eviction goes by mtime.  A read-only cache cannot record
  // this, which only makes eviction less precise.
  timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  (void)::futimens(fd, times);
  ::close(fd);
  ++stats_.hits;
  return std::optional<Bytes>(std::move(value));
}

Expected<Bytes> Cache::parse_entry(std::span<const std::uint8_t> entry, std::string_view key_hex) {
  if (!is_valid_key(key_hex)) return bad_key(key_hex);
  auto corrupt = [](std::string reason) { return diagnosed(DiagCode::CacheIo, std::move(reason)); };
  if (entry.size() < kHeaderSize)
    return corrupt("truncated: " + std::to_string(entry.size()) + " bytes, shorter than the header");
  if (auto problem = entry_header_problem(entry.data(), key_hex, entry.size())) return corrupt(std::move(*problem));
  auto value = entry.subspan(kHeaderSize);
  if (std::memcmp(entry.data() + 56, sha256(value).data(), 32) != 0) return corrupt("checksum mismatch");
  return Bytes(value.begin(), value.end());
}

Expected<void> Cache::put(std::string_view key_hex, std::span<const std::uint8_t> value) {
  if (!is_valid_key(key_hex)) return bad_key(key_hex);
  if (!enabled_) return {};
  std::uint64_t entry_bytes = kHeaderSize + value.size();
  if (entry_bytes > max_bytes_) {
    ++stats_.skipped_puts;
    return {};
  }

  std::string path = entry_path(key_hex);
  std::string shard = vdir_ + "/" + std::string(key_hex.substr(0, 2));
  if (::mkdir(shard.c_str(), 0777) != 0 && errno != EEXIST) {
    if (errno != ENOENT) return diagnosed(DiagCode::CacheIo, "cannot create cache folder '" + shard + "': " + errno_text(errno));
    UDF_TRY_VOID(make_dirs(shard));  // the cache folder itself was removed
  }

  std::string tmp = shard + "/" + kTempPrefix + std::string(key_hex) + "." + std::to_string(::getpid()) + "." +
                    random_hex();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return diagnosed(DiagCode::CacheIo, "cannot write cache entry '" + tmp + "': " + errno_text(errno));
  auto fail = [&](Error e) -> Expected<void> {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  };

  std::uint8_t h[kHeaderSize] = {};
  std::memcpy(h, kMagic, sizeof kMagic);
  put_le(h + 8, kFormatVersion, 4);
  put_le(h + 12, 0, 4);
  put_le(h + 16, value.size(), 8);
  Sha256 key = key_bytes(key_hex);
  std::memcpy(h + 24, key.data(), key.size());
  Sha256 sum = sha256(value);
  std::memcpy(h + 56, sum.data(), sum.size());

  if (auto w = write_all(fd, h, kHeaderSize, tmp, "entry"); !w) return fail(std::move(w.error()));
  if (auto w = write_all(fd, value.data(), value.size(), tmp, "entry"); !w) return fail(std::move(w.error()));
  if (::fsync(fd) != 0) return fail(diagnosed(DiagCode::CacheIo, "cannot write cache entry '" + tmp + "': fsync: " + errno_text(errno)));
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) return fail(diagnosed(DiagCode::CacheIo, "cannot write cache entry '" + tmp + "': close: " + errno_text(errno)));
  if (auto& hook = before_rename_hook()) hook(tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return fail(diagnosed(DiagCode::CacheIo, "cannot write cache entry '" + path + "': rename: " + errno_text(errno)));

  ++stats_.puts;
  stats_.put_bytes += value.size();
  return after_put(entry_bytes);
}

// Keeps the total near the bound without scanning the folder on every put:
// each put appends its size to the journal; the estimate is the total at the
// last pass plus the journal.  A full pass (which re-measures, evicts if
// needed and empties the journal) runs when the estimate exceeds the bound or
// every kFoldEvery puts.
Expected<void> Cache::after_put(std::uint64_t entry_bytes) {
  std::string journal = vdir_ + "/journal";
  int fd = ::open(journal.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return diagnosed(DiagCode::CacheIo, "cannot write cache file '" + journal + "': " + errno_text(errno));
  std::uint8_t rec[8];
  put_le(rec, entry_bytes, 8);
  auto w = write_all(fd, rec, sizeof rec, journal, "file");
  if (!w) {
    ::close(fd);
    return std::move(w.error());
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return diagnosed(DiagCode::CacheIo, "cannot read cache file '" + journal + "': " + errno_text(e));
  }
  std::uint64_t records = static_cast<std::uint64_t>(st.st_size) / 8;
  bool need_pass = records >= kFoldEvery;
  if (!need_pass) {
    std::uint64_t total = 0;
    auto base = read_file(vdir_ + "/size");
    if (!base) {
      need_pass = true;  // never measured (or the file was lost)
    } else {
      std::string text(base->begin(), base->end());
      total = std::strtoull(text.c_str(), nullptr, 10);
      std::vector<std::uint8_t> buf(records * 8);
      ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
      for (ssize_t i = 0; i + 8 <= n; i += 8) total += get_le(buf.data() + i, 8);
      need_pass = total > max_bytes_;
    }
  }
  ::close(fd);
  if (!need_pass) return {};
  auto ev = run_eviction(false);
  if (!ev) return std::move(ev.error().context("cache eviction"));
  return {};
}

Expected<EvictStats> Cache::evict() {
  if (!enabled_) return EvictStats{};
  return run_eviction(true);
}

Expected<EvictStats> Cache::run_eviction(bool wait) {
  EvictStats out;
  std::string lock_path = vdir_ + "/lock";
  int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (lock < 0) return diagnosed(DiagCode::CacheUnavailable, "cannot open cache lock '" + lock_path + "': " + errno_text(errno));
  while (::flock(lock, wait ? LOCK_EX : LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    int e = errno;
    ::close(lock);
    if (e == EWOULDBLOCK) return out;  // another process is evicting
    return diagnosed(DiagCode::CacheUnavailable, "cannot lock cache lock '" + lock_path + "': " + errno_text(e));
  }
  struct LockGuard {
    int fd;
    ~LockGuard() { ::close(fd); }  // releases the flock
  } guard{lock};

  // Empty the journal first: puts that finish after this point are either
  // seen by the scan below or recorded in the new journal (or both, which
  // only overestimates).
  UDF_TRY_VOID(write_small(vdir_, "journal", ""));

  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  std::int64_t stale_before = (static_cast<std::int64_t>(now.tv_sec) - kStaleTempSeconds) * 1'000'000'000;

  auto remove_stale_temps_and_collect = [&](const std::string& folder, std::vector<ScannedEntry>* entries,
                                            std::vector<std::string>* shards) -> Expected<void> {
    DIR* d = ::opendir(folder.c_str());
    if (!d) {
      if (errno == ENOENT) return {};
      return diagnosed(DiagCode::CacheIo, "cannot read cache folder '" + folder + "': " + errno_text(errno));
    }
    int dfd = ::dirfd(d);
    while (dirent* de = ::readdir(d)) {
      const char* n = de->d_name;
      struct stat st{};
      if (shards && is_shard_name(n)) {
        if (::fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) shards->push_back(folder + "/" + n);
      } else if (std::strncmp(n, kTempPrefix, std::strlen(kTempPrefix)) == 0) {
        if (::fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && mtime_ns(st) < stale_before &&
            ::unlinkat(dfd, n, 0) == 0)
          ++out.temp_files_removed;
      } else if (entries && is_valid_key(n)) {
        if (::fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
          entries->push_back({folder + "/" + n, static_cast<std::uint64_t>(st.st_size), mtime_ns(st), st.st_dev,
                              st.st_ino});
      }
    }
    ::closedir(d);
    return {};
  };

  std::vector<std::string> shards;
  std::vector<ScannedEntry> entries;
  UDF_TRY_VOID(remove_stale_temps_and_collect(vdir_, nullptr, &shards));
  for (const auto& s : shards) UDF_TRY_VOID(remove_stale_temps_and_collect(s, &entries, nullptr));
  // The memos (Cache::memo, <dir>/memo) are this cache's too: a killed
  // writer's memo temporaries go with its own (the memo entries themselves
  // are neither counted nor evicted here: the memo cache has its own passes).
  std::vector<std::string> memo_shards;
  UDF_TRY_VOID(remove_stale_temps_and_collect(dir_ + "/memo/v1", nullptr, &memo_shards));
  for (const auto& s : memo_shards) UDF_TRY_VOID(remove_stale_temps_and_collect(s, nullptr, nullptr));

  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.size;
  out.ran = true;
  out.entries_before = entries.size();
  out.bytes_before = total;

  if (total > max_bytes_) {
    std::uint64_t target = max_bytes_ / 100 * kEvictTargetPercent + max_bytes_ % 100 * kEvictTargetPercent / 100;
    std::sort(entries.begin(), entries.end(), [](const ScannedEntry& a, const ScannedEntry& b) {
      return a.mtime != b.mtime ? a.mtime < b.mtime : a.path < b.path;
    });
    for (const auto& e : entries) {
      if (total <= target) break;
      // Skip an entry that a get used or a put replaced since the scan.
      struct stat st{};
      if (::lstat(e.path.c_str(), &st) != 0) {
        total -= e.size;  // removed by someone else (a corrupt entry, or a racing eviction)
        continue;
      }
      if (st.st_dev != e.dev || st.st_ino != e.ino || mtime_ns(st) != e.mtime) continue;
      if (::unlink(e.path.c_str()) != 0) {
        if (errno == ENOENT) {
          total -= e.size;
          continue;
        }
        return diagnosed(DiagCode::CacheIo, "cannot remove cache entry '" + e.path + "': " + errno_text(errno));
      }
      total -= e.size;
      ++out.entries_removed;
      out.bytes_removed += e.size;
    }
  }
  out.bytes_after = total;
  UDF_TRY_VOID(write_small(vdir_, "size", std::to_string(total) + "\n"));

  ++stats_.evictions;
  stats_.evicted_entries += out.entries_removed;
  stats_.evicted_bytes += out.bytes_removed;
  return out;
}

std::string remembered(Cache& cache, std::string_view what, const std::string& identity,
                       const std::function<std::string(bool& keep)>& compute, std::size_t size) {
  bool keep = true;
  if (identity.empty() || !cache.enabled()) return compute(keep);
  const std::string key = Sha256Builder().part(what).part(identity).finish_hex();
  if (auto hit = cache.get(key); hit && *hit && !(*hit)->empty() && (size == 0 || (*hit)->size() == size))
    return std::string(reinterpret_cast<const char*>((*hit)->data()), (*hit)->size());
  std::string value = compute(keep);
  if (keep) (void)cache.put(key, value);  // not stored: the next process computes it again
  return value;
}

}  // namespace udf

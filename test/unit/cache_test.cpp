// Unit tests of the on-disk cache (include/udf/support/cache.h), including
// multi-process stress and killed-writer tests (fork, not threads).
#include "udf/support/cache.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "udf/support/cuda_libs.h"
#include "udf/support/hash.h"

namespace fs = std::filesystem;
using udf::Bytes;
using udf::Cache;
using udf::CudaLibrary;
using udf::cuda_library_file_identity;
using udf::remembered_library_version;

namespace {

std::string key(int i) { return udf::Sha256Builder().part("cache-test-key").part(std::to_string(i)).finish_hex(); }

// get() that must not fail; the value or nullopt on a miss.
std::optional<Bytes> get_ok(Cache& c, const std::string& k) {
  auto g = c.get(k);
  EXPECT_TRUE(g) << (g ? "" : g.error().message());
  return g ? *g : std::nullopt;
}

Bytes bytes_of(std::string_view s) { return Bytes(s.begin(), s.end()); }

Bytes pattern(std::size_t n, std::uint32_t seed) {
  Bytes b(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& c : b) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<std::uint8_t>(x >> 24);
  }
  return b;
}

Bytes read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void write_raw(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

void set_mtime(const std::string& path, std::int64_t seconds_ago) {
  timespec t[2];
  ::clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= seconds_ago;
  t[1] = t[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0) << path;
}

std::vector<std::string> temp_files(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir + "/v1"))
    if (e.path().filename().string().rfind(".tmp.", 0) == 0) out.push_back(e.path().string());
  return out;
}

// Sets or unsets environment variables for one scope.
class EnvGuard {
 public:
  void set(const char* name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvGuard() {
    for (auto& [name, v] : saved_) {
      if (v)
        ::setenv(name.c_str(), v->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/udf-cache-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/cache";
    env_.set("UDF_CACHE_MAX_BYTES", nullptr);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  Cache open_cache() {
    auto c = Cache::open(dir_);
    EXPECT_TRUE(c) << (c ? "" : c.error().message());
    return c.take();
  }

  std::string root_, dir_;
  EnvGuard env_;
};

TEST_F(CacheTest, PutGetRoundTrip) {
  Cache c = open_cache();
  EXPECT_TRUE(fs::is_directory(dir_ + "/v1"));
  Bytes v = pattern(5000, 1);
  ASSERT_TRUE(c.put(key(1), v));
  auto got = c.get(key(1));
  ASSERT_TRUE(got);
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, v);

  std::string path = dir_ + "/v1/" + key(1).substr(0, 2) + "/" + key(1);
  EXPECT_EQ(c.entry_path(key(1)), path);
  EXPECT_EQ(fs::file_size(path), Cache::kHeaderSize + v.size());

  // Empty values and overwrites.
  ASSERT_TRUE(c.put(key(2), std::string_view()));
  ASSERT_TRUE(c.put(key(1), "second"));
  EXPECT_EQ(get_ok(c, key(2)), Bytes());
  EXPECT_EQ(get_ok(c, key(1)), bytes_of("second"));

  // Another Cache object (another process, in real use) sees the same entries.
  Cache c2 = open_cache();
  EXPECT_EQ(get_ok(c2, key(1)), bytes_of("second"));

  EXPECT_EQ(c.stats().hits, 3u);
  EXPECT_EQ(c.stats().puts, 3u);
  EXPECT_EQ(c.stats().corrupt, 0u);
  EXPECT_TRUE(temp_files(dir_).empty());
}

TEST_F(CacheTest, Miss) {
  Cache c = open_cache();
  auto got = c.get(key(7));
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(c.stats().misses, 1u);
  EXPECT_EQ(c.stats().corrupt, 0u);
}

TEST_F(CacheTest, KeyValidation) {
  Cache c = open_cache();
  std::string upper = key(1);
  for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (std::string bad : {std::string(), std::string("abc"), key(1) + "0", key(1).substr(0, 63) + "g", upper,
                          std::string("../../etc/passwd") + std::string(48, '0')}) {
    EXPECT_FALSE(Cache::is_valid_key(bad)) << bad;
    auto g = c.get(bad);
    ASSERT_FALSE(g) << bad;
    EXPECT_NE(g.error().message().find("invalid cache key '" + bad + "'"), std::string::npos) << g.error().message();
    auto p = c.put(bad, "x");
    ASSERT_FALSE(p) << bad;
    EXPECT_NE(p.error().message().find(bad), std::string::npos) << p.error().message();
    auto d = Cache::disabled().get(bad);
    EXPECT_FALSE(d);
  }
  EXPECT_TRUE(Cache::is_valid_key(key(1)));
}

// Each way of damaging an entry file must read as a miss that removes the file.
TEST_F(CacheTest, CorruptEntriesAreDetectedAndRemoved) {
  Cache c = open_cache();
  const Bytes v = pattern(3000, 9);
  struct Damage {
    const char* name;
    std::function<void(Bytes&)> apply;
    const char* reason;
  };
  std::vector<Damage> damages = {
      {"flip value byte", [](Bytes& b) { b[Cache::kHeaderSize + 1234] ^= 0x10; }, "checksum mismatch"},
      {"flip last byte", [](Bytes& b) { b.back() ^= 1; }, "checksum mismatch"},
      {"flip checksum", [](Bytes& b) { b[60] ^= 0x80; }, "checksum mismatch"},
      {"flip magic", [](Bytes& b) { b[0] ^= 1; }, "bad magic"},
      {"flip version", [](Bytes& b) { b[8] ^= 2; }, "version"},
      {"flip length", [](Bytes& b) { b[17] ^= 1; }, "size mismatch"},
      {"flip key", [](Bytes& b) { b[30] ^= 4; }, "another key"},
      {"truncate value", [](Bytes& b) { b.resize(b.size() - 1); }, "size mismatch"},
      {"truncate half", [](Bytes& b) { b.resize(b.size() / 2); }, "size mismatch"},
      {"truncate header", [](Bytes& b) { b.resize(40); }, "truncated"},
      {"empty file", [](Bytes& b) { b.clear(); }, "truncated"},
      {"trailing garbage", [](Bytes& b) { b.push_back(0); }, "size mismatch"},
      {"garbage", [](Bytes& b) { b = pattern(b.size(), 77); }, "bad magic"},
      {"short garbage", [](Bytes& b) { b = pattern(500, 78); }, "bad magic"},
  };
  for (auto& d : damages) {
    SCOPED_TRACE(d.name);
    ASSERT_TRUE(c.put(key(3), v));
    std::string path = c.entry_path(key(3));
    Bytes raw = read_raw(path);
    d.apply(raw);
    write_raw(path, raw);

    auto before = c.stats().corrupt;
    udf::CacheCorruption why;
    auto got = c.get(key(3), &why);
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_FALSE(got->has_value());
    EXPECT_EQ(c.stats().corrupt, before + 1);
    EXPECT_EQ(why.path, path);
    EXPECT_NE(why.reason.find(d.reason), std::string::npos) << why.reason;
    EXPECT_FALSE(fs::exists(path));
    // Callers rebuild and re-put; the cache works again.
    ASSERT_TRUE(c.put(key(3), v));
    EXPECT_EQ(get_ok(c, key(3)), v);
  }
}

TEST_F(CacheTest, EntryOfAnotherKeyIsCorrupt) {
  Cache c = open_cache();
  ASSERT_TRUE(c.put(key(1), "one"));
  fs::create_directories(fs::path(c.entry_path(key(2))).parent_path());
  fs::copy_file(c.entry_path(key(1)), c.entry_path(key(2)));
  udf::CacheCorruption why;
  auto got = c.get(key(2), &why);
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->has_value());
  EXPECT_NE(why.reason.find("another key"), std::string::npos);
  EXPECT_EQ(get_ok(c, key(1)), bytes_of("one"));
}

TEST_F(CacheTest, NonRegularEntriesAreCorrupt) {
  Cache c = open_cache();
  ASSERT_TRUE(c.put(key(1), "one"));
  std::string path = c.entry_path(key(1));
  std::string elsewhere = root_ + "/elsewhere";
  fs::rename(path, elsewhere);
  fs::create_symlink(elsewhere, path);
  udf::CacheCorruption why;
  EXPECT_FALSE(get_ok(c, key(1)).has_value());
  ASSERT_TRUE(c.get(key(1), &why));  // already removed: a plain miss
  EXPECT_TRUE(why.reason.empty());
  EXPECT_FALSE(fs::is_symlink(path));
  EXPECT_TRUE(fs::exists(elsewhere));

  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  auto got = c.get(key(1), &why);  // must not block
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->has_value());
  EXPECT_NE(why.reason.find("not a regular file"), std::string::npos) << why.reason;
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(c.stats().corrupt, 2u);
}

TEST_F(CacheTest, LeftoverTempFilesAreIgnoredThenRemovedWhenStale) {
  Cache c = open_cache();
  std::string shard = dir_ + "/v1/" + key(4).substr(0, 2);
  fs::create_directories(shard);
  std::string tmp = shard + "/.tmp." + key(4) + ".12345.00deadbeef00";
  write_raw(tmp, pattern(700, 3));

  auto got = c.get(key(4));
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(c.stats().corrupt, 0u);

  ASSERT_TRUE(c.put(key(4), "value"));
  EXPECT_EQ(get_ok(c, key(4)), bytes_of("value"));
  EXPECT_TRUE(fs::exists(tmp));  // not ours to rename

  // A fresh temp file may be a put in progress: eviction keeps it.
  auto ev = c.evict();
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->temp_files_removed, 0u);
  EXPECT_TRUE(fs::exists(tmp));

  set_mtime(tmp, 2 * Cache::kStaleTempSeconds);
  ev = c.evict();
  ASSERT_TRUE(ev);
  EXPECT_TRUE(ev->ran);
  EXPECT_EQ(ev->temp_files_removed, 1u);
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_EQ(get_ok(c, key(4)), bytes_of("value"));
}

TEST_F(CacheTest, EvictionRespectsBoundAndEvictsLeastRecentlyUsed) {
  Cache c = open_cache();
  const std::size_t entry = Cache::kHeaderSize + 1000;
  c.set_max_bytes(10 * entry);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(c.put(key(i), pattern(1000, i)));
  EXPECT_EQ(c.stats().evicted_entries, 0u);
  // Oldest first: key 0 was used 100 s ago, key 9 91 s ago.
  for (int i = 0; i < 10; ++i) set_mtime(c.entry_path(key(i)), 100 - i);
  // Using keys 0 and 1 makes them the most recent.
  ASSERT_TRUE(get_ok(c, key(0)).has_value());
  ASSERT_TRUE(get_ok(c, key(1)).has_value());

  // The 11th put goes over the bound: down to 80% (8 entries), the three
  // least recently used (2, 3, 4) go.
  ASSERT_TRUE(c.put(key(10), pattern(1000, 10)));
  EXPECT_EQ(c.stats().evicted_entries, 3u);
  for (int i : {2, 3, 4}) EXPECT_FALSE(fs::exists(c.entry_path(key(i)))) << i;
  for (int i : {0, 1, 5, 6, 7, 8, 9, 10}) {
    auto got = c.get(key(i));
    ASSERT_TRUE(got);
    ASSERT_TRUE(got->has_value()) << i;
    EXPECT_EQ(**got, pattern(1000, i));
  }

  // An explicit pass with a smaller bound.
  c.set_max_bytes(4 * entry);
  auto ev = c.evict();
  ASSERT_TRUE(ev);
  EXPECT_TRUE(ev->ran);
  EXPECT_EQ(ev->bytes_before, 8 * entry);
  EXPECT_LE(ev->bytes_after, 4 * entry * Cache::kEvictTargetPercent / 100);
  EXPECT_EQ(ev->bytes_before - ev->bytes_removed, ev->bytes_after);

  // Under the bound: nothing to do.
  ev = c.evict();
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->entries_removed, 0u);
}

TEST_F(CacheTest, BoundHoldsOverManyPutsWithoutExplicitEviction) {
  Cache c = open_cache();
  const std::uint64_t bound = 64 * 1024;
  c.set_max_bytes(bound);
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(c.put(key(i), pattern(100 + (i * 37) % 900, i)));
    // Lost bookkeeping only makes the estimate stale.
    if (i == 200) fs::remove(dir_ + "/v1/size");
  }
  std::uint64_t total = 0;
  for (auto& e : fs::recursive_directory_iterator(dir_ + "/v1"))
    if (e.is_regular_file() && Cache::is_valid_key(e.path().filename().string())) total += e.file_size();
  EXPECT_LE(total, bound);
  EXPECT_GT(c.stats().evictions, 0u);
  EXPECT_GT(c.stats().evicted_entries, 0u);
  // The newest entries are there.
  for (int i = 395; i < 400; ++i) EXPECT_TRUE(get_ok(c, key(i)).has_value()) << i;
}

TEST_F(CacheTest, ValueLargerThanBoundIsNotStored) {
  Cache c = open_cache();
  c.set_max_bytes(1000);
  ASSERT_TRUE(c.put(key(1), pattern(2000, 1)));
  EXPECT_EQ(c.stats().skipped_puts, 1u);
  EXPECT_FALSE(get_ok(c, key(1)).has_value());
}

TEST_F(CacheTest, DisabledCacheMissesAndNeverWrites) {
  Cache c = Cache::disabled();
  EXPECT_FALSE(c.enabled());
  EXPECT_TRUE(c.dir().empty());
  ASSERT_TRUE(c.put(key(1), "x"));
  auto got = c.get(key(1));
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->has_value());
  auto ev = c.evict();
  ASSERT_TRUE(ev);
  EXPECT_FALSE(ev->ran);
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(CacheTest, LocationFromEnvironment) {
  env_.set("UDF_CACHE_DIR", (root_ + "/from-udf").c_str());
  env_.set("XDG_CACHE_HOME", (root_ + "/xdg").c_str());
  env_.set("HOME", (root_ + "/home").c_str());
  auto d = Cache::default_dir();
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, root_ + "/from-udf");
  auto c = Cache::open();
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->dir(), root_ + "/from-udf");
  EXPECT_TRUE(fs::is_directory(root_ + "/from-udf/v1"));

  // An explicit folder wins over the environment.
  c = Cache::open(root_ + "/explicit/");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->dir(), root_ + "/explicit");

  env_.set("UDF_CACHE_DIR", "");  // empty is unset
  EXPECT_EQ(*Cache::default_dir(), root_ + "/xdg/udf");
  c = Cache::open();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->dir(), root_ + "/xdg/udf");

  env_.set("XDG_CACHE_HOME", "relative/xdg");  // ignored, as the XDG spec says
  EXPECT_EQ(*Cache::default_dir(), root_ + "/home/.cache/udf");
  env_.set("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(*Cache::default_dir(), root_ + "/home/.cache/udf");

  env_.set("HOME", nullptr);
  auto none = Cache::default_dir();
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message().find("UDF_CACHE_DIR"), std::string::npos);
  EXPECT_FALSE(Cache::open());
}

TEST_F(CacheTest, MaxBytesFromEnvironment) {
  struct Case {
    const char* text;
    std::uint64_t bytes;  // 0: invalid
  } cases[] = {{"512", 512},       {"10K", 10240},       {"10k", 10240}, {"3M", 3u << 20},
               {"2GiB", 2ull << 30}, {"1T", 1ull << 40}, {"7B", 7},      {"0", 0},
               {"abc", 0},          {"10Q", 0},          {"-5", 0},      {"1.5G", 0},
               {"99999999999999999999", 0},              {"99999999999T", 0}};
  for (auto& t : cases) {
    SCOPED_TRACE(t.text);
    env_.set("UDF_CACHE_MAX_BYTES", t.text);
    auto c = Cache::open(dir_);
    if (t.bytes) {
      ASSERT_TRUE(c) << c.error().message();
      EXPECT_EQ(c->max_bytes(), t.bytes);
    } else {
      ASSERT_FALSE(c);
      EXPECT_NE(c.error().message().find("UDF_CACHE_MAX_BYTES"), std::string::npos) << c.error().message();
      EXPECT_NE(c.error().message().find(t.text), std::string::npos) << c.error().message();
    }
  }
  env_.set("UDF_CACHE_MAX_BYTES", nullptr);
  EXPECT_EQ(open_cache().max_bytes(), Cache::kDefaultMaxBytes);
}

TEST_F(CacheTest, IoErrorsNameThePath) {
  // A file where the cache folder should be.
  write_raw(root_ + "/blocked", bytes_of("x"));
  auto bad = Cache::open(root_ + "/blocked/cache");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find(root_ + "/blocked"), std::string::npos) << bad.error().message();

  // A file where a shard folder should be: puts fail with the path, gets miss.
  Cache c = open_cache();
  std::string shard = dir_ + "/v1/" + key(1).substr(0, 2);
  write_raw(shard, bytes_of("x"));
  auto p = c.put(key(1), "v");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message().find(shard), std::string::npos) << p.error().message();
  auto g = c.get(key(1));
  ASSERT_TRUE(g);
  EXPECT_FALSE(g->has_value());

  // An unreadable entry is an error, not a miss (root reads anything).
  if (::geteuid() != 0) {
    ASSERT_TRUE(c.put(key(2), "v"));
    ::chmod(c.entry_path(key(2)).c_str(), 0);
    auto u = c.get(key(2));
    ASSERT_FALSE(u);
    EXPECT_NE(u.error().message().find(c.entry_path(key(2))), std::string::npos);
  }
}

// --- Processes ---------------------------------------------------------------

// The value a writer stores: it names its key, writer and sequence number and
// derives every body byte from them, so a torn or mixed read cannot pass check_value.
Bytes make_value(const std::string& k, int writer, int seq, std::size_t len) {
  std::string head = "K=" + k + "|W=" + std::to_string(writer) + "|S=" + std::to_string(seq) + "|L=" +
                     std::to_string(len) + "|";
  Bytes v(head.begin(), head.end());
  Bytes body = pattern(len, static_cast<std::uint32_t>(std::hash<std::string>()(head)));
  v.insert(v.end(), body.begin(), body.end());
  return v;
}

bool check_value(const std::string& k, const Bytes& v) {
  std::string s(v.begin(), v.end());
  if (s.rfind("K=" + k + "|W=", 0) != 0) return false;
  std::size_t w = s.find("|W="), sq = s.find("|S=", w + 1), l = s.find("|L=", sq + 1), end = s.find('|', l + 1);
  if (w == std::string::npos || sq == std::string::npos || l == std::string::npos || end == std::string::npos)
    return false;
  int writer = std::atoi(s.substr(w + 3, sq - w - 3).c_str());
  int seq = std::atoi(s.substr(sq + 3, l - sq - 3).c_str());
  std::size_t len = std::strtoull(s.substr(l + 3, end - l - 3).c_str(), nullptr, 10);
  return make_value(k, writer, seq, len) == v;
}

struct ChildReport {
  std::uint64_t ops = 0, hits = 0, misses = 0, bad = 0, errors = 0, corrupt = 0, evictions = 0, evicted = 0;
};

TEST_F(CacheTest, SixteenProcessesWithConcurrentEviction) {
  constexpr int kProcs = 16, kOps = 500, kKeys = 48;
  constexpr std::uint64_t kBound = 40 * 1024;  // about a third of what the keys need: eviction runs often
  ASSERT_TRUE(Cache::open(dir_));
  std::vector<std::pair<pid_t, int>> kids;
  for (int p = 0; p < kProcs; ++p) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      ChildReport r;
      auto opened = Cache::open(dir_);
      if (!opened) _exit(3);
      Cache c = opened.take();
      c.set_max_bytes(kBound);
      std::mt19937 rng(1000 + p);
      for (int i = 0; i < kOps; ++i) {
        std::string k = key(static_cast<int>(rng() % kKeys));
        ++r.ops;
        if (rng() % 2) {
          auto g = c.get(k);
          if (!g) {
            ++r.errors;
            std::fprintf(stderr, "child %d: get: %s\n", p, g.error().message().c_str());
          } else if (!g->has_value()) {
            ++r.misses;
          } else if (!check_value(k, **g)) {
            ++r.bad;
          } else {
            ++r.hits;
          }
        } else {
          auto put = c.put(k, make_value(k, p, i, 200 + rng() % 3000));
          if (!put) {
            ++r.errors;
            std::fprintf(stderr, "child %d: put: %s\n", p, put.error().message().c_str());
          }
        }
      }
      r.corrupt = c.stats().corrupt;
      r.evictions = c.stats().evictions;
      r.evicted = c.stats().evicted_entries;
      (void)!::write(fds[1], &r, sizeof r);
      _exit(0);
    }
    ::close(fds[1]);
    kids.emplace_back(pid, fds[0]);
  }

  ChildReport sum;
  for (auto [pid, fd] : kids) {
    ChildReport r;
    ssize_t n = ::read(fd, &r, sizeof r);
    ::close(fd);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    ASSERT_EQ(n, static_cast<ssize_t>(sizeof r));
    sum.ops += r.ops;
    sum.hits += r.hits;
    sum.misses += r.misses;
    sum.bad += r.bad;
    sum.errors += r.errors;
    sum.corrupt += r.corrupt;
    sum.evictions += r.evictions;
    sum.evicted += r.evicted;
  }
  EXPECT_EQ(sum.ops, std::uint64_t{kProcs} * kOps);
  EXPECT_EQ(sum.bad, 0u) << "a get returned bytes that are not a whole value of its key";
  EXPECT_EQ(sum.errors, 0u);
  EXPECT_EQ(sum.corrupt, 0u) << "a reader saw a corrupt entry";
  EXPECT_GT(sum.hits, 0u);
  EXPECT_GT(sum.evictions, 0u);
  EXPECT_GT(sum.evicted, 0u);

  // Afterwards: every entry is intact, nothing is left half-written, and a
  // pass brings the folder under the bound.
  Cache c = open_cache();
  c.set_max_bytes(kBound);
  EXPECT_TRUE(temp_files(dir_).empty());
  for (int i = 0; i < kKeys; ++i) {
    auto g = c.get(key(i));
    ASSERT_TRUE(g);
    if (g->has_value()) {
      EXPECT_TRUE(check_value(key(i), **g)) << i;
    }
  }
  EXPECT_EQ(c.stats().corrupt, 0u);
  auto ev = c.evict();
  ASSERT_TRUE(ev);
  EXPECT_LE(ev->bytes_after, kBound);
  std::printf("16 processes: %llu gets hit, %llu missed; %llu eviction passes removed %llu entries\n",
              (unsigned long long)sum.hits, (unsigned long long)sum.misses, (unsigned long long)sum.evictions,
              (unsigned long long)sum.evicted);
}

// A writer killed between writing its temp file and renaming it leaves only
// the temp file: the old value (or a miss) stays, and the cache goes on working.
TEST_F(CacheTest, WriterKilledBeforeRename) {
  Cache c = open_cache();
  ASSERT_TRUE(c.put(key(1), "old value"));
  for (int k : {1, 2}) {
    SCOPED_TRACE(k);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      udf::cache_testing::set_before_rename_hook([](const std::string&) { ::raise(SIGSTOP); });
      auto child = Cache::open(dir_);
      if (child) (void)child->put(key(k), "new value");
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, WUNTRACED), pid);
    ASSERT_TRUE(WIFSTOPPED(status));
    EXPECT_EQ(temp_files(dir_).size(), static_cast<std::size_t>(k));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status));
  }
  EXPECT_EQ(get_ok(c, key(1)), bytes_of("old value"));
  EXPECT_FALSE(get_ok(c, key(2)).has_value());
  EXPECT_EQ(c.stats().corrupt, 0u);

  ASSERT_TRUE(c.put(key(2), "rebuilt"));
  EXPECT_EQ(get_ok(c, key(2)), bytes_of("rebuilt"));

  auto temps = temp_files(dir_);
  ASSERT_EQ(temps.size(), 2u);
  for (auto& t : temps) set_mtime(t, Cache::kStaleTempSeconds + 60);
  auto ev = c.evict();
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->temp_files_removed, 2u);
  EXPECT_TRUE(temp_files(dir_).empty());
}

// A writer of a large value killed at some point of its put: the key then
// reads as a miss or as the whole value, never as part of it.
TEST_F(CacheTest, WriterKilledMidPut) {
  const std::size_t kLen = 32u << 20;
  for (int delay_ms : {1, 15, 60, 200}) {
    SCOPED_TRACE(delay_ms);
    const std::string k = key(100 + delay_ms);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto child = Cache::open(dir_);
      if (child) (void)child->put(k, pattern(kLen, static_cast<std::uint32_t>(delay_ms)));
      _exit(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);

    Cache c = open_cache();
    auto got = c.get(k);
    ASSERT_TRUE(got) << got.error().message();
    if (got->has_value()) {
      EXPECT_TRUE(**got == pattern(kLen, static_cast<std::uint32_t>(delay_ms)));
    }
    EXPECT_EQ(c.stats().corrupt, 0u);
    std::printf("killed after %d ms: %s, %zu temp file(s) left\n", delay_ms, got->has_value() ? "stored" : "miss",
                temp_files(dir_).size());
    ASSERT_TRUE(c.put(k, "small"));
    EXPECT_EQ(get_ok(c, k), bytes_of("small"));
  }
}

}  // namespace

// remembered_library_version: the first process asks the library and
// remembers the answer under the library file's identity; the next ones read
// it (no load); a disabled cache asks every time; an "unknown" answer is not
// remembered.  NVRTC is the library (the toolkit's, found as every tool finds it).
TEST_F(CacheTest, LibraryVersionsAreRememberedByFileIdentity) {
  if (cuda_library_file_identity(CudaLibrary::Nvrtc).empty())
    GTEST_SKIP() << "NVRTC is found by soname only here: nothing to remember it by";
  int asked = 0;
  auto query = [&] {
    ++asked;
    return std::string("nvrtc 99.1 (test)");
  };
  {
    Cache c = open_cache();
    EXPECT_EQ(remembered_library_version(CudaLibrary::Nvrtc, c, query), "nvrtc 99.1 (test)");
    EXPECT_EQ(asked, 1);
    EXPECT_EQ(c.stats().puts, 1u);
  }
  {
    Cache c = open_cache();  // another process
    EXPECT_EQ(remembered_library_version(CudaLibrary::Nvrtc, c, query), "nvrtc 99.1 (test)");
    EXPECT_EQ(asked, 1) << "the remembered answer is read, the library not asked";
  }
  Cache off = Cache::disabled();
  EXPECT_EQ(remembered_library_version(CudaLibrary::Nvrtc, off, query), "nvrtc 99.1 (test)");
  EXPECT_EQ(asked, 2);
  // Another cache: an unknown answer is returned but not remembered.
  dir_ = root_ + "/other";
  Cache other = open_cache();
  EXPECT_EQ(remembered_library_version(CudaLibrary::Nvrtc, other, [] { return std::string("nvrtc unknown"); }),
            "nvrtc unknown");
  EXPECT_EQ(other.stats().puts, 0u);
}

// remembered: computed once per identity, then read from the cache (so an
// answer for bytes that no longer match their identity is not computed again:
// the caller checks the identity around its read); no identity or no cache:
// computed; an answer of the wrong size is not taken.
TEST_F(CacheTest, AnswersAreRememberedByIdentity) {
  const std::string a = "the manifest's bytes", b = "other bytes";
  auto hash_of = [](const std::string& s) { return [s](bool&) { return udf::sha256_hex(s); }; };
  auto remember = [](Cache& c, const std::string& id, const std::function<std::string(bool&)>& f) {
    return udf::remembered(c, "test sha256", id, f, 64);
  };
  Cache c = open_cache();
  EXPECT_EQ(remember(c, "/x/pack.json 20 1.5", hash_of(a)), udf::sha256_hex(a));
  EXPECT_EQ(c.stats().puts, 1u);
  Cache again = open_cache();
  EXPECT_EQ(remember(again, "/x/pack.json 20 1.5", hash_of(b)), udf::sha256_hex(a)) << "read, not computed";
  EXPECT_EQ(remember(again, "/x/pack.json 20 1.6", hash_of(b)), udf::sha256_hex(b)) << "another identity";
  EXPECT_EQ(remember(again, "", hash_of(b)), udf::sha256_hex(b));
  Cache off = Cache::disabled();
  EXPECT_EQ(remember(off, "/x/pack.json 20 1.5", hash_of(b)), udf::sha256_hex(b));
  EXPECT_EQ(udf::remembered(again, "test sha256", "/x/pack.json 20 1.5", hash_of(b), 63), udf::sha256_hex(b))
      << "a remembered answer of another size is not taken";
}

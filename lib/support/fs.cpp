#include "udf/support/fs.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

namespace udf {

static std::string errno_text() { return std::strerror(errno); }

namespace {

// The descriptor of a file opened for reading ("-": standard input), closed
// with the object unless it is standard input.
class ReadFd {
 public:
  explicit ReadFd(const std::string& path)
      : fd_(path == "-" ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~ReadFd() {
    if (fd_ >= 0 && fd_ != STDIN_FILENO) ::close(fd_);
  }
  ReadFd(const ReadFd&) = delete;
  ReadFd& operator=(const ReadFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens `path` and checks that it is no folder; its stat in `st`.
Expected<void> open_for_reading(const std::string& path, const ReadFd& fd, struct stat& st) {
  if (fd.get() < 0) return diagnosed(DiagCode::ReadFailed, "cannot open '" + path + "': " + errno_text());
  if (::fstat(fd.get(), &st) != 0) return diagnosed(DiagCode::ReadFailed, "cannot read '" + path + "': " + errno_text());
  if (S_ISDIR(st.st_mode)) return diagnosed(DiagCode::ReadFailed, "cannot read '" + path + "': is a directory");
  return {};
}

// Reads into `buf` until it is full or the file ends; the bytes read, or -1 (errno set).
ssize_t read_fully(int fd, std::uint8_t* buf, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, buf + got, size - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

}  // namespace

Expected<Bytes> read_file(const std::string& path, const FileLimit& limit) {
  ReadFd fd(path);
  struct stat st {};
  UDF_TRY_VOID(open_for_reading(path, fd, st));
  auto read_error = [&] { return diagnosed(DiagCode::ReadFailed, "cannot read '" + path + "': " + errno_text()); };
  // A regular file is checked against the limit by its size, and read
  // straight into a buffer of that size.
  Bytes out;
  if (S_ISREG(st.st_mode)) {
    UDF_TRY_VOID(check_file_size(path, static_cast<std::uint64_t>(st.st_size), limit));
    out.resize(static_cast<std::size_t>(st.st_size));
    ssize_t n = read_fully(fd.get(), out.data(), out.size());
    if (n < 0) return read_error();
    out.resize(static_cast<std::size_t>(n));
  }
  // Then what has no size (standard input, a pipe) or was appended since:
  // in pieces, refused once past the limit.
  std::uint8_t buf[1 << 16];
  for (;;) {
    ssize_t n = read_fully(fd.get(), buf, sizeof buf);
    if (n < 0) return read_error();
    if (n == 0) break;
    if (out.size() + static_cast<std::uint64_t>(n) > limit.max_bytes) {
      std::string name = path == "-" ? std::string("standard input") : "'" + path + "'";
      return diagnosed(DiagCode::FileTooLarge, name + " is too large: more than the " + format_size(limit.max_bytes) +
                                                   " limit for " + limit.what);
    }
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

Expected<Bytes> read_file_head(const std::string& path, std::size_t max_bytes) {
  ReadFd fd(path);
  struct stat st {};
  UDF_TRY_VOID(open_for_reading(path, fd, st));
  Bytes out(max_bytes);
  ssize_t n = read_fully(fd.get(), out.data(), out.size());
  if (n < 0) return diagnosed(DiagCode::ReadFailed, "cannot read '" + path + "': " + errno_text());
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const auto ns = [](const timespec& t) { return static_cast<long long>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; };
  const long long latest = std::max(ns(st.st_mtim), ns(st.st_ctim));
  if (ns(now) - latest < kSettleSeconds * 1'000'000'000LL) return {};
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
         std::to_string(ns(st.st_mtim)) + " " + std::to_string(ns(st.st_ctim));
}

void remove_stale_temps(const std::string& dir, const std::string& prefix) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it(dir.empty() ? "." : dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const std::size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos || rest.find_first_not_of("0123456789") != dot) continue;
    const long pid = std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    std::error_code rm;
    fs::remove_all(it->path(), rm);
  }
}

namespace {

std::string temp_prefix(const std::string& target_name) { return "." + target_name + ".tmp."; }

// The permissions write_and_flush gives a new file.
mode_t data_file_mode() {
  mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

// Writes all of `data` to `fd` and flushes it with the permissions of a
// plain data file (rw-r--r-- modified by the umask, as `cp` would).
Expected<void> write_and_flush(int fd, const std::string& path, std::span<const std::uint8_t> data) {
  auto fail = [&](const std::string& what) { return diagnosed(DiagCode::WriteFailed, "cannot write '" + path + "': " + what + ": " + errno_text()); };
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write");
    }
    off += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, data_file_mode()) != 0) return fail("chmod");
  if (::fsync(fd) != 0) return fail("fsync");
  return {};
}

// A new named temporary beside `path`: `.NAME.tmp.PID.XXXXXX` (its fd in `fd`).
Expected<std::string> make_named_temp(const std::string& path, int& fd) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl =
      (dir / (temp_prefix(target.filename().string()) + std::to_string(::getpid()) + ".XXXXXX")).string();
  fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) return diagnosed(DiagCode::WriteFailed, "cannot write '" + path + "': " + errno_text());
  return tmpl;
}

// Gives the unnamed temporary `fd` the name `.NAME.tmp.PID.XXXXXX` beside `path`.
Expected<std::string> name_unnamed_temp(const std::string& path, int fd) {
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  for (int attempt = 0; attempt < 100; ++attempt) {
    int probe = -1;
    UDF_TRY(name, make_named_temp(path, probe));  // reserve a unique name, then link over it
    ::close(probe);
    ::unlink(name.c_str());
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return name;
    if (errno != EEXIST) return diagnosed(DiagCode::WriteFailed, "cannot write '" + path + "': link: " + errno_text());
  }
  return diagnosed(DiagCode::WriteFailed, "cannot write '" + path + "': no free temporary name");
}

// A descriptor of `path` when it is already exactly what writing `data` would
// make of it: a regular file (no symbolic link), of one name only, ours, with
// a new file's permissions, holding `data`.  -1 otherwise.
int open_if_identical(const std::string& path, std::span<const std::uint8_t> data) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st {};
  bool same = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_uid == ::geteuid() &&
              (st.st_mode & 07777) == data_file_mode() && static_cast<std::uint64_t>(st.st_size) == data.size();
  std::uint8_t buf[1 << 16];
  for (std::size_t off = 0; same && off < data.size();) {
    ssize_t n = read_fully(fd, buf, std::min(sizeof buf, data.size() - off));
    same = n > 0 && std::memcmp(buf, data.data() + off, static_cast<std::size_t>(n)) == 0;
    off += n > 0 ? static_cast<std::size_t>(n) : 0;
  }
  std::uint8_t extra;
  if (same && read_fully(fd, &extra, 1) == 0) return fd;  // and nothing beyond (appended meanwhile)
  ::close(fd);
  return -1;
}

}  // namespace

OutputFiles::~OutputFiles() {
  for (const auto& s : staged_) {
    if (s.fd >= 0) ::close(s.fd);  // an unnamed temporary vanishes with its descriptor
    if (!s.tmp.empty()) ::unlink(s.tmp.c_str());
  }
}

Expected<void> OutputFiles::stage(const std::string& path, std::span<const std::uint8_t> data) {
  namespace fs = std::filesystem;
  // Already there, byte for byte (a cache hit writing what the last run
  // wrote): nothing to write, flush and rename over it, which costs more than
  // the rest of a hit on some disks (ext4 with discard makes a rename and an
  // fsync slow).  commit() only marks it modified now, as
  // a rewrite would, for the build tools that compare times.
  // Either way a killed writer's temporaries of this target go first.
  fs::path target(path);
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : std::string(".");
  remove_stale_temps(dir, temp_prefix(target.filename().string()));
  if (int same = open_if_identical(path, data); same >= 0) {
    staged_.push_back(Staged{path, "", same, true});
    return {};
  }
  Staged s{path, "", ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600)};
  if (s.fd < 0) {  // no O_TMPFILE here (some filesystems): a named temporary from the start
    int fd = -1;
    UDF_TRY(tmp, make_named_temp(path, fd));
    s.tmp = std::move(tmp);
    s.fd = fd;
  }
  staged_.push_back(s);
  Staged& st = staged_.back();
  auto written = write_and_flush(st.fd, path, data);
  if (!written) return written.error();
  if (!st.tmp.empty()) {  // named: close now (an unnamed one stays open until commit)
    int rc = ::close(st.fd);
    st.fd = -1;
    if (rc != 0) return diagnosed(DiagCode::WriteFailed, "cannot write '" + path + "': close: " + errno_text());
  }
  return {};
}

Expected<void> OutputFiles::commit() {
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    Staged& s = staged_[i];
    if (s.unchanged) {
      const bool touched = ::futimens(s.fd, nullptr) == 0;
      std::string msg = touched ? std::string() : "cannot write '" + s.path + "': set its time: " + errno_text();
      ::close(s.fd);
      s.fd = -1;
      if (!touched) {
        staged_.erase(staged_.begin(), staged_.begin() + static_cast<std::ptrdiff_t>(i));  // those are in place
        return diagnosed(DiagCode::WriteFailed, msg);
      }
      continue;
    }
    if (s.tmp.empty()) {
      UDF_TRY(name, name_unnamed_temp(s.path, s.fd));
      s.tmp = std::move(name);
      ::close(s.fd);
      s.fd = -1;
    }
    if (::rename(s.tmp.c_str(), s.path.c_str()) != 0) {
      std::string msg = "cannot write '" + s.path + "': rename: " + errno_text();
      staged_.erase(staged_.begin(), staged_.begin() + static_cast<std::ptrdiff_t>(i));  // those are in place
      return diagnosed(DiagCode::WriteFailed, msg);
    }
    s.tmp.clear();
  }
  staged_.clear();
  return {};
}

Expected<void> write_file_atomic(const std::string& path, std::span<const std::uint8_t> data) {
  OutputFiles out;
  UDF_TRY_VOID(out.stage(path, data));
  return out.commit();
}

}  // namespace udf

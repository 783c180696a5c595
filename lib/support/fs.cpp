#include "udf/support/fs.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace udf {

static std::string errno_text() { return std::strerror(errno); }

Expected<Bytes> read_file(const std::string& path) {
  int fd = path == "-" ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return diagnosed(DiagCode::ReadFailed, "cannot open '" + path + "': " + errno_text());
  if (path != "-") {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      ::close(fd);
      return diagnosed(DiagCode::ReadFailed, "cannot read '" + path + "': is a directory");
    }
  }
  Bytes out;
  std::uint8_t buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string msg = "cannot read '" + path + "': " + errno_text();
      if (fd != STDIN_FILENO) ::close(fd);
      return diagnosed(DiagCode::ReadFailed, msg);
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  if (fd != STDIN_FILENO) ::close(fd);
  return out;
}

namespace {

// Writes `data` to a new temporary file beside `path`, flushed to disk; the
// temporary's name on success.
Expected<std::string> write_temp_beside(const std::string& path, std::span<const std::uint8_t> data) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return diagnosed(DiagCode::WriteFailed, "cannot write '" + path + "': " + errno_text());
  auto fail = [&](const std::string& what) -> Error {
    std::string msg = "cannot write '" + path + "': " + what + ": " + errno_text();
    ::close(fd);
    ::unlink(tmpl.c_str());
    return diagnosed(DiagCode::WriteFailed, msg);
  };
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write");
    }
    off += static_cast<std::size_t>(n);
  }
  // Outputs are plain data files: rw-r--r-- modified by the umask, as `cp` would.
  mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) return fail("chmod");
  if (::fsync(fd) != 0) return fail("fsync");
  if (::close(fd) != 0) {
    std::string msg = "cannot write '" + path + "': close: " + errno_text();
    ::unlink(tmpl.c_str());
    return diagnosed(DiagCode::WriteFailed, msg);
  }
  return tmpl;
}

}  // namespace

OutputFiles::~OutputFiles() {
  for (const auto& s : staged_) ::unlink(s.tmp.c_str());
}

Expected<void> OutputFiles::stage(const std::string& path, std::span<const std::uint8_t> data) {
  UDF_TRY(tmp, write_temp_beside(path, data));
  staged_.push_back(Staged{path, std::move(tmp)});
  return {};
}

Expected<void> OutputFiles::commit() {
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    if (::rename(staged_[i].tmp.c_str(), staged_[i].path.c_str()) != 0) {
      std::string msg = "cannot write '" + staged_[i].path + "': rename: " + errno_text();
      staged_.erase(staged_.begin(), staged_.begin() + static_cast<std::ptrdiff_t>(i));  // those are in place
      return diagnosed(DiagCode::WriteFailed, msg);
    }
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

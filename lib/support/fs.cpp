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
  if (fd < 0) return diagnosed("cannot open '" + path + "': " + errno_text());
  if (path != "-") {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      ::close(fd);
      return diagnosed("cannot read '" + path + "': is a directory");
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
      return diagnosed(msg);
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  if (fd != STDIN_FILENO) ::close(fd);
  return out;
}

Expected<void> write_file_atomic(const std::string& path, std::span<const std::uint8_t> data) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return diagnosed("cannot write '" + path + "': " + errno_text());
  auto fail = [&](const std::string& what) -> Error {
    std::string msg = "cannot write '" + path + "': " + what + ": " + errno_text();
    ::close(fd);
    ::unlink(tmpl.c_str());
    return diagnosed(msg);
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
  // Artifacts are plain data files: rw-r--r-- modified by the umask, as `cp` would.
  mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) return fail("chmod");
  if (::fsync(fd) != 0) return fail("fsync");
  if (::close(fd) != 0) {
    fd = -1;
    std::string msg = "cannot write '" + path + "': close: " + errno_text();
    ::unlink(tmpl.c_str());
    return diagnosed(msg);
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    std::string msg = "cannot write '" + path + "': rename: " + errno_text();
    ::unlink(tmpl.c_str());
    return diagnosed(msg);
  }
  return {};
}

}  // namespace udf

#include "udf/link/fatbin.h"

#include "udf/cudalibs/nvfatbin.h"
#include "udf/support/watchdog.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace udf {
namespace {

std::string find_fatbinary() {
  std::vector<std::string> dirs;
  if (const char* p = std::getenv("PATH")) {
    std::string s = p;
    size_t pos = 0;
    while (pos <= s.size()) {
      size_t c = s.find(':', pos);
      if (c == std::string::npos) c = s.size();
      dirs.push_back(s.substr(pos, c - pos));
      pos = c + 1;
    }
  }
  dirs.push_back("/usr/local/cuda/bin");
  for (const auto& d : dirs) {
    auto p = std::filesystem::path(d) / "fatbinary";
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return {};
}

Expected<Bytes> fatbinary_tool(const std::string& tool, const std::vector<FatbinImage>& images) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "udf-fatbin.XXXXXX").string();
  if (!::mkdtemp(tmpl.data()))
    return diagnosed(DiagCode::WriteFailed, fmt::format("cannot create a temporary folder for fatbinary in {}: {}",
                                                     fs::temp_directory_path().string(), std::strerror(errno)));
  fs::path dir(tmpl);
  struct Cleanup {
    fs::path d;
    ~Cleanup() { std::error_code ec; fs::remove_all(d, ec); }
  } cleanup{dir};
  TempPathGuard registered(dir.string());  // removed also when a watchdog ends the process
  std::vector<std::string> args = {tool, "--64", "--create=" + (dir / "out.fatbin").string()};
  for (const auto& im : images) {
    auto p = dir / fmt::format("{}.cubin", im.arch);
    UDF_TRY_VOID(write_file_atomic(p.string(), im.cubin));
    args.push_back(fmt::format("--image3=kind=elf,sm={},file={}", im.arch, p.string()));
  }
  pid_t pid = ::fork();
  if (pid < 0) return internal_error("fork failed");
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(tool.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return diagnosed(DiagCode::Fatbin, fmt::format("{} failed (exit status {})", tool, WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  return read_file((dir / "out.fatbin").string(), limits::kModule);
}

}  // namespace

Expected<FatbinResult> make_fatbin(const std::vector<FatbinImage>& images, bool allow_fatbinary_fallback) {
  if (images.empty()) return internal_error("make_fatbin: no images");
  FatbinResult out;
  if (const std::string& why_not = nvfatbin_why_not(); !why_not.empty()) {
    // UDF_NO_FATBINARY_FALLBACK=1 turns the fallback off (for tests, and for
    // builds that must use nvFatbin).
    const char* no_fallback = std::getenv("UDF_NO_FATBINARY_FALLBACK");
    if (no_fallback && *no_fallback && std::string(no_fallback) != "0") allow_fatbinary_fallback = false;
    std::string tool = allow_fatbinary_fallback ? find_fatbinary() : std::string();
    if (tool.empty())
      return diagnosed(DiagCode::LibraryMissing, why_not + (allow_fatbinary_fallback ? "; no fatbinary tool found in PATH or /usr/local/cuda/bin either"
                                                           : "; the fatbinary fallback is off (UDF_NO_FATBINARY_FALLBACK)"));
    out.warnings.push_back(why_not + "; falling back to " + tool);
    UDF_TRY(bytes, fatbinary_tool(tool, images));
    out.fatbin = std::move(bytes);
    out.tool = "fatbinary (" + tool + ")";
    return out;
  }
  const NvFatbinApi& a = nvfatbin().fn;
  nvFatbinHandle h = nullptr;
  if (auto r = a.nvFatbinCreate(&h, nullptr, 0); r != 0) return nvfatbin_failure(r, "nvFatbinCreate");
  struct Guard {
    const NvFatbinApi& a;
    nvFatbinHandle& h;
    ~Guard() { if (h) a.nvFatbinDestroy(&h); }
  } guard{a, h};
  for (const auto& im : images) {
    std::string arch = std::to_string(im.arch);
    // After an error the handle is unusable: stop at the first one.
    if (auto r = a.nvFatbinAddCubin(h, im.cubin.data(), im.cubin.size(), arch.c_str(), im.identifier.c_str()); r != 0)
      return nvfatbin_failure(r, fmt::format("nvFatbinAddCubin({})", arch_name(im.arch)));
  }
  size_t n = 0;
  if (auto r = a.nvFatbinSize(h, &n); r != 0) return nvfatbin_failure(r, "nvFatbinSize");
  if (n == 0) return library_failure("nvFatbin reported success but an empty fatbin");
  out.fatbin.resize(n);
  if (auto r = a.nvFatbinGet(h, out.fatbin.data()); r != 0) return nvfatbin_failure(r, "nvFatbinGet");
  out.tool = nvfatbin_info().version + " (" + nvfatbin().library->path() + ")";
  return out;
}

}  // namespace udf

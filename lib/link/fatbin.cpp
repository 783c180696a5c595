#include "udf/link/fatbin.h"

#include "udf/support/cuda_libs.h"
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

// The nvFatbin C API (nvFatbin.h, CUDA 12.4+), declared here so that the
// library is needed only when it is used.
using nvFatbinHandle = struct _nvFatbinHandle*;
using nvFatbinResult = int;
struct Api {
  const DynamicLibrary* lib = nullptr;
  std::string why_not;
  nvFatbinResult (*create)(nvFatbinHandle*, const char**, size_t) = nullptr;
  nvFatbinResult (*add_cubin)(nvFatbinHandle, const void*, size_t, const char*, const char*) = nullptr;
  nvFatbinResult (*size)(nvFatbinHandle, size_t*) = nullptr;
  nvFatbinResult (*get)(nvFatbinHandle, void*) = nullptr;
  nvFatbinResult (*destroy)(nvFatbinHandle*) = nullptr;
  const char* (*error_string)(nvFatbinResult) = nullptr;
  nvFatbinResult (*version)(unsigned*, unsigned*) = nullptr;
  bool ready() const { return lib->loaded() && why_not.empty(); }
};

// Found as udf/support/cuda_libs.h says ($UDF_NVFATBIN_LIBRARY alone when
// set; the Python environment's nvidia-nvfatbin wheel, the toolkit, the
// loader path).
const Api& api() {
  static const Api a = [] {
    Api r;
    r.lib = &cuda_library(CudaLibrary::NvFatbin);
    if (!r.lib->loaded()) {
      r.why_not = r.lib->error();
      return r;
    }
    r.create = r.lib->function<decltype(r.create)>("nvFatbinCreate");
    r.add_cubin = r.lib->function<decltype(r.add_cubin)>("nvFatbinAddCubin");
    r.size = r.lib->function<decltype(r.size)>("nvFatbinSize");
    r.get = r.lib->function<decltype(r.get)>("nvFatbinGet");
    r.destroy = r.lib->function<decltype(r.destroy)>("nvFatbinDestroy");
    r.error_string = r.lib->function<decltype(r.error_string)>("nvFatbinGetErrorString");
    r.version = r.lib->function<decltype(r.version)>("nvFatbinVersion");
    if (!r.create || !r.add_cubin || !r.size || !r.get || !r.destroy || !r.error_string || !r.version)
      r.why_not = "nvFatbin at " + r.lib->path() + " lacks part of the nvFatbin API (need CUDA 12.4 or newer)";
    return r;
  }();
  return a;
}

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

NvFatbinInfo nvfatbin_info() {
  const Api& a = api();
  NvFatbinInfo i;
  i.available = a.ready();
  i.path = a.lib->path();
  i.why_not = a.why_not;
  if (i.available) {
    unsigned major = 0, minor = 0;
    i.version = a.version(&major, &minor) == 0 ? fmt::format("nvfatbin {}.{}", major, minor) : "nvfatbin unknown";
  }
  return i;
}

std::string nvfatbin_version(Cache* memo) {
  auto ask = [] {
    NvFatbinInfo i = nvfatbin_info();
    return i.available ? i.version : std::string();
  };
  return memo ? remembered_library_version(CudaLibrary::NvFatbin, *memo, ask) : ask();
}

LibraryStatus nvfatbin_library_status() {
  NvFatbinInfo i = nvfatbin_info();
  LibraryStatus s = cuda_library_status(CudaLibrary::NvFatbin);
  s.loaded = i.available;
  s.error = i.why_not;
  s.version = i.version.rfind("nvfatbin ", 0) == 0 ? i.version.substr(9) : i.version;
  return s;
}

Expected<FatbinResult> make_fatbin(const std::vector<FatbinImage>& images, bool allow_fatbinary_fallback) {
  if (images.empty()) return internal_error("make_fatbin: no images");
  const Api& a = api();
  FatbinResult out;
  if (!a.ready()) {
    // UDF_NO_FATBINARY_FALLBACK=1 turns the fallback off (for tests, and for
    // builds that must use nvFatbin).
    const char* no_fallback = std::getenv("UDF_NO_FATBINARY_FALLBACK");
    if (no_fallback && *no_fallback && std::string(no_fallback) != "0") allow_fatbinary_fallback = false;
    std::string tool = allow_fatbinary_fallback ? find_fatbinary() : std::string();
    if (tool.empty())
      return diagnosed(DiagCode::LibraryMissing, a.why_not + (allow_fatbinary_fallback ? "; no fatbinary tool found in PATH or /usr/local/cuda/bin either"
                                                             : "; the fatbinary fallback is off (UDF_NO_FATBINARY_FALLBACK)"));
    out.warnings.push_back(a.why_not + "; falling back to " + tool);
    UDF_TRY(bytes, fatbinary_tool(tool, images));
    out.fatbin = std::move(bytes);
    out.tool = "fatbinary (" + tool + ")";
    return out;
  }
  auto fail = [&](nvFatbinResult r, const std::string& what) {
    return library_failure(fmt::format("nvFatbin {} failed: {} ({})", what, a.error_string(r), r));
  };
  nvFatbinHandle h = nullptr;
  if (auto r = a.create(&h, nullptr, 0); r != 0) return fail(r, "nvFatbinCreate");
  struct Guard {
    const Api& a;
    nvFatbinHandle& h;
    ~Guard() { if (h) a.destroy(&h); }
  } guard{a, h};
  for (const auto& im : images) {
    std::string arch = std::to_string(im.arch);
    // After an error the handle is unusable: stop at the first one.
    if (auto r = a.add_cubin(h, im.cubin.data(), im.cubin.size(), arch.c_str(), im.identifier.c_str()); r != 0)
      return fail(r, fmt::format("nvFatbinAddCubin({})", arch_name(im.arch)));
  }
  size_t n = 0;
  if (auto r = a.size(h, &n); r != 0) return fail(r, "nvFatbinSize");
  if (n == 0) return library_failure("nvFatbin reported success but an empty fatbin");
  out.fatbin.resize(n);
  if (auto r = a.get(h, out.fatbin.data()); r != 0) return fail(r, "nvFatbinGet");
  out.tool = nvfatbin_info().version + " (" + a.lib->path() + ")";
  return out;
}

}  // namespace udf

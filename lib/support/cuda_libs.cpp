#include "udf/support/cuda_libs.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "udf/support/cache.h"
#include "udf/support/install_layout.h"

// What CMake found at configure time (cmake/UdfDependencies.cmake): the
// toolkit's copies, searched after the Python environment's.
#ifndef UDF_TOOLKIT_NVRTC
#define UDF_TOOLKIT_NVRTC ""
#endif
#ifndef UDF_TOOLKIT_NVJITLINK
#define UDF_TOOLKIT_NVJITLINK ""
#endif
#ifndef UDF_TOOLKIT_NVVM
#define UDF_TOOLKIT_NVVM ""
#endif
#ifndef UDF_TOOLKIT_NVFATBIN
#define UDF_TOOLKIT_NVFATBIN ""
#endif
#ifndef UDF_TOOLKIT_INCLUDE_DIR
#define UDF_TOOLKIT_INCLUDE_DIR ""
#endif
#ifndef UDF_TOOLKIT_LIBDEVICE
#define UDF_TOOLKIT_LIBDEVICE ""
#endif

namespace udf {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPythonEnv = "python env";
constexpr const char* kBuildTime = "found at build time";
constexpr const char* kToolkit = "CUDA toolkit";
constexpr const char* kLoaderPath = "loader path";

struct Info {
  const char* name;
  const char* soname;
  const char* wheel;
  const char* env_var;
  const char* configured;
};

const Info& info(CudaLibrary lib) {
  static const std::array<Info, 4> table = {{
      {"NVRTC", "libnvrtc.so.13", "nvidia-cuda-nvrtc", "UDF_NVRTC_LIBRARY", UDF_TOOLKIT_NVRTC},
      {"nvJitLink", "libnvJitLink.so.13", "nvidia-nvjitlink", "UDF_NVJITLINK_LIBRARY", UDF_TOOLKIT_NVJITLINK},
      {"libNVVM", "libnvvm.so.4", "nvidia-nvvm", "UDF_NVVM_LIBRARY", UDF_TOOLKIT_NVVM},
      {"nvFatbin", "libnvfatbin.so.13", "nvidia-nvfatbin", "UDF_NVFATBIN_LIBRARY", UDF_TOOLKIT_NVFATBIN},
  }};
  return table[static_cast<std::size_t>(lib)];
}

bool is_file(const std::string& p) {
  struct stat st{};
  return !p.empty() && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string normal(const fs::path& p) {
  std::string s = p.lexically_normal().string();
  if (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (s.empty()) return;
  for (const auto& o : v)
    if (o == s) return;
  v.push_back(s);
}

// The toolkit roots to try after the configured files: $CUDA_HOME,
// $CUDA_PATH, /usr/local/cuda.
std::vector<std::string> toolkit_roots() {
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v == '/') add_unique(roots, normal(v));
  add_unique(roots, "/usr/local/cuda");
  return roots;
}

}  // namespace

std::vector<std::string> cuda_wheel_dirs() {
  // This binary is in the udf Python package when the folder above its own
  // (site-packages/udf above site-packages/udf/bin or .../lib) has the
  // package's __init__.py; NVIDIA's wheels are then site-packages/nvidia/cu13.
  std::vector<std::string> homes;
  add_unique(homes, executable_dir());
  add_unique(homes, shared_object_dir(reinterpret_cast<const void*>(&cuda_wheel_dirs)));
  std::vector<std::string> out;
  for (const auto& h : homes) {
    fs::path pkg = fs::path(h).parent_path();
    if (pkg.filename() != "udf" || !is_file((pkg / "__init__.py").string())) continue;
    std::error_code ec;
    fs::path cu13 = pkg.parent_path() / "nvidia" / "cu13";
    if (fs::is_directory(cu13, ec)) add_unique(out, normal(cu13));
  }
  // Where the Python that runs udf sees them elsewhere on its path
  // (_udf_console.py sets this): colon-separated nvidia/cu13 folders.
  if (const char* env = std::getenv("UDF_CUDA_WHEEL_DIRS"); env && *env) {
    std::string s = env;
    for (std::size_t pos = 0; pos <= s.size();) {
      std::size_t c = s.find(':', pos);
      if (c == std::string::npos) c = s.size();
      std::string d = s.substr(pos, c - pos);
      std::error_code ec;
      if (!d.empty() && d[0] == '/' && fs::is_directory(d, ec)) add_unique(out, normal(d));
      pos = c + 1;
    }
  }
  return out;
}

namespace {

std::vector<CudaLibraryCandidate> find_candidates(CudaLibrary lib) {
  const Info& i = info(lib);
  std::vector<CudaLibraryCandidate> out;
  if (const char* env = std::getenv(i.env_var); env && *env) {
    out.push_back({env, std::string("$") + i.env_var});
    return out;
  }
  std::vector<std::string> seen;
  auto add = [&](const std::string& path, const char* origin) {
    if (!is_file(path)) return;
    for (const auto& s : seen)
      if (s == path) return;
    seen.push_back(path);
    out.push_back({path, origin});
  };
  for (const auto& d : cuda_wheel_dirs()) add(d + "/lib/" + i.soname, kPythonEnv);
  // The configured file is often the -dev symlink (libnvrtc.so); its folder's
  // soname file is what a program built against it loads.
  if (*i.configured) {
    add(normal(fs::path(i.configured).parent_path() / i.soname), kBuildTime);
    add(i.configured, kBuildTime);
  }
  for (const auto& root : toolkit_roots()) {
    add(root + "/lib64/" + i.soname, kToolkit);
    if (lib == CudaLibrary::Nvvm) add(root + "/nvvm/lib64/" + i.soname, kToolkit);
  }
  out.push_back({i.soname, kLoaderPath});
  return out;
}

}  // namespace

// Once per process: the link cache keys ask for every job, the loader once.
const std::vector<CudaLibraryCandidate>& cuda_library_candidates(CudaLibrary lib) {
  static std::array<std::vector<CudaLibraryCandidate>, 4> found;
  static std::array<std::once_flag, 4> once;
  const auto n = static_cast<std::size_t>(lib);
  std::call_once(once[n], [&] { found[n] = find_candidates(lib); });
  return found[n];
}

namespace {

struct Loaded {
  DynamicLibrary lib;
  std::string origin;
};

// NVRTC loads libnvrtc-builtins.so.MAJOR.MINOR by soname when it first
// compiles.  The 13.0 wheel's libnvrtc has no RPATH $ORIGIN (13.5's has), so
// with no toolkit on the loader path that load fails
// (NVRTC_ERROR_BUILTIN_OPERATION_FAILURE).  Loading the builtins beside the
// NVRTC that loaded, first, makes the soname lookup find them.
void preload_nvrtc_builtins(const DynamicLibrary& nvrtc) {
  if (!nvrtc.loaded() || nvrtc.path().find('/') == std::string::npos) return;
  auto version = nvrtc.function<int (*)(int*, int*)>("nvrtcVersion");
  int major = 0, minor = 0;
  if (!version || version(&major, &minor) != 0) return;
  std::string builtins = normal(fs::path(nvrtc.path()).parent_path() /
                                ("libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor)));
  if (is_file(builtins)) (void)::dlopen(builtins.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept for the process
}

const Loaded& loaded(CudaLibrary which) {
  static std::array<Loaded, 4> libs;
  static std::array<std::once_flag, 4> once;
  const auto n = static_cast<std::size_t>(which);
  std::call_once(once[n], [&] {
    auto cands = cuda_library_candidates(which);
    std::vector<std::string> paths;
    for (const auto& c : cands) paths.push_back(c.path);
    const Info& i = info(which);
    libs[n].lib = DynamicLibrary::open(
        paths, std::string(i.name) + " (" + i.soname + ")",
        std::string("Install NVIDIA's wheel in udf's Python environment (pip install ") + i.wheel +
            "==13.*) or the CUDA 13 toolkit, or set " + i.env_var + " to the library's path");
    for (const auto& c : cands)
      if (c.path == libs[n].lib.path()) libs[n].origin = c.origin;
    if (which == CudaLibrary::Nvrtc) preload_nvrtc_builtins(libs[n].lib);
  });
  return libs[n];
}

}  // namespace

const DynamicLibrary& cuda_library(CudaLibrary lib) { return loaded(lib).lib; }

std::string cuda_library_file_identity(CudaLibrary lib) {
  for (const auto& c : cuda_library_candidates(lib))
    if (auto id = library_file_identity(c.path); !id.empty()) return id;
  return {};
}

std::string remembered_library_version(CudaLibrary lib, Cache& cache, const std::function<std::string()>& query) {
  const std::string id = cuda_library_file_identity(lib);
  return remembered(cache, "udf library version v1", id, [&](bool& keep) {
    std::string version = query();
    const DynamicLibrary& loaded = cuda_library(lib);  // remembered for the file that loaded only
    keep = loaded.loaded() && library_file_identity(loaded.path()) == id && version.find("unknown") == std::string::npos;
    return version;
  });
}

LibraryStatus cuda_library_status(CudaLibrary which) {
  const Loaded& l = loaded(which);
  const Info& i = info(which);
  LibraryStatus s{i.name, l.lib.loaded(), l.lib.path(), {}, l.lib.error(), l.origin};
  return s;
}

std::string cuda_include_dir() {
  // Once per process: each compile asks twice (its cache key and NVRTC's -I).
  static const std::string dir = [] {
    std::vector<std::string> dirs;
    for (const auto& d : cuda_wheel_dirs()) add_unique(dirs, d + "/include");
    add_unique(dirs, UDF_TOOLKIT_INCLUDE_DIR);
    for (const auto& root : toolkit_roots()) add_unique(dirs, root + "/include");
    for (const auto& d : dirs)
      if (is_file(d + "/cuda_fp16.h")) return d;
    return std::string(UDF_TOOLKIT_INCLUDE_DIR);
  }();
  return dir;
}

std::string libdevice_path(bool load) {
  // Beside the libNVVM that loads (or would: its first candidate file).
  std::string nvvm;
  if (load) {
    nvvm = cuda_library(CudaLibrary::Nvvm).path();
  } else {
    for (const auto& c : cuda_library_candidates(CudaLibrary::Nvvm))
      if (is_file(c.path)) {
        nvvm = c.path;
        break;
      }
  }
  if (!nvvm.empty() && nvvm.find('/') != std::string::npos) {
    std::error_code ec;
    fs::path real = fs::canonical(nvvm, ec);
    fs::path dir = (ec ? fs::path(nvvm) : real).parent_path();
    // wheel: cu13/lib -> cu13/nvvm/libdevice; toolkit: lib64 -> nvvm/libdevice
    // or nvvm/lib64 -> nvvm/libdevice.
    for (const char* rel : {"../nvvm/libdevice/libdevice.10.bc", "../libdevice/libdevice.10.bc"}) {
      std::string p = normal(dir / rel);
      if (is_file(p)) return p;
    }
  }
  return UDF_TOOLKIT_LIBDEVICE;
}

}  // namespace udf

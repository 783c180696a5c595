# Every external dependency of the project, found in one place.
# scripts/setup.sh installs all of them on a fresh Debian 12 machine.

# CUDA 13: NVRTC, nvJitLink and libNVVM from the toolkit.  No driver is needed
# to build or to run the tools.
set(UDF_CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA toolkit root")
find_path(UDF_CUDA_INCLUDE_DIR nvrtc.h HINTS ${UDF_CUDA_ROOT}/include REQUIRED)
find_library(UDF_NVRTC_LIBRARY NAMES nvrtc HINTS ${UDF_CUDA_ROOT}/lib64 ${UDF_CUDA_ROOT}/lib REQUIRED)
find_library(UDF_NVJITLINK_LIBRARY NAMES nvJitLink HINTS ${UDF_CUDA_ROOT}/lib64 ${UDF_CUDA_ROOT}/lib REQUIRED)
find_library(UDF_NVVM_LIBRARY NAMES nvvm HINTS ${UDF_CUDA_ROOT}/nvvm/lib64 ${UDF_CUDA_ROOT}/lib64 REQUIRED)
find_path(UDF_NVVM_INCLUDE_DIR nvvm.h HINTS ${UDF_CUDA_ROOT}/nvvm/include ${UDF_CUDA_ROOT}/include REQUIRED)
find_file(UDF_LIBDEVICE libdevice.10.bc HINTS ${UDF_CUDA_ROOT}/nvvm/libdevice REQUIRED)
foreach(lib nvrtc nvJitLink nvvm)
  string(TOUPPER ${lib} LIBU)
  add_library(udf::${lib} UNKNOWN IMPORTED)
  set_target_properties(udf::${lib} PROPERTIES IMPORTED_LOCATION ${UDF_${LIBU}_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES "${UDF_CUDA_INCLUDE_DIR};${UDF_NVVM_INCLUDE_DIR}")
endforeach()
get_filename_component(UDF_CUDA_LIBDIR ${UDF_NVRTC_LIBRARY} DIRECTORY)
get_filename_component(UDF_NVVM_LIBDIR ${UDF_NVVM_LIBRARY} DIRECTORY)
# The toolkit's library folders (often one folder), none empty: an empty
# RUNPATH entry is the current folder, where the loader would look for every
# library first (test/lit/tools/runpath.test; the tools are also built with
# their install RPATH, which CMake does not pad with an empty entry).
set(UDF_TOOL_RPATH ${UDF_CUDA_LIBDIR} ${UDF_NVVM_LIBDIR})
list(REMOVE_ITEM UDF_TOOL_RPATH "")
list(REMOVE_DUPLICATES UDF_TOOL_RPATH)
set(CMAKE_BUILD_RPATH "${UDF_TOOL_RPATH}")
set(CMAKE_INSTALL_RPATH "${UDF_TOOL_RPATH}")

# nvFatbin ships on PyPI (nvidia-nvfatbin); the link tool loads it with dlopen
# so that a missing library is a clear message, not a loader failure.
find_package(Python3 3.9 REQUIRED COMPONENTS Interpreter)
execute_process(COMMAND ${Python3_EXECUTABLE} -c
  "import nvidia, os; print(';'.join(os.path.join(p, 'cu13') for p in nvidia.__path__))"
  OUTPUT_VARIABLE UDF_PY_NVIDIA_DIRS OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(_fatbin_hints ${UDF_CUDA_ROOT})
foreach(d ${UDF_PY_NVIDIA_DIRS})
  list(APPEND _fatbin_hints ${d})
endforeach()
find_path(UDF_NVFATBIN_INCLUDE_DIR nvFatbin.h HINTS ${_fatbin_hints} PATH_SUFFIXES include)
find_library(UDF_NVFATBIN_LIBRARY NAMES nvfatbin libnvfatbin.so.13 HINTS ${_fatbin_hints} PATH_SUFFIXES lib lib64)
if(NOT UDF_NVFATBIN_INCLUDE_DIR OR NOT UDF_NVFATBIN_LIBRARY)
  message(STATUS "nvFatbin not found (pip install nvidia-nvfatbin==13.0.*): udf-link will report it at run time")
else()
  message(STATUS "nvFatbin: ${UDF_NVFATBIN_LIBRARY}")
endif()

# fmt is used header-only (fmt::fmt-header-only) everywhere, so that the
# tools and libudf_runtime.so need no libfmt.so at run time (Ubuntu 24.04,
# where GPUs run, does not ship Debian's libfmt.so.9).
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
# SHA-256 comes from libcrypto, linked statically where libssl-dev ships
# libcrypto.a, so the tools and the runtime run on machines without it.
find_library(UDF_CRYPTO_STATIC NAMES libcrypto.a)
find_package(Threads REQUIRED)
add_library(udf::crypto INTERFACE IMPORTED)
if(UDF_CRYPTO_STATIC)
  set_target_properties(udf::crypto PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${OPENSSL_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${UDF_CRYPTO_STATIC};${CMAKE_DL_LIBS};Threads::Threads")
else()
  message(WARNING "static libcrypto.a not found: the tools and libudf_runtime.so will need libcrypto.so.3")
  set_target_properties(udf::crypto PROPERTIES INTERFACE_LINK_LIBRARIES OpenSSL::Crypto)
endif()

# LLVM/MLIR 22 (Debian's llvm-22-dev, libmlir-22-dev): the IR front ends and
# the test tools (FileCheck, not, split-file).
find_package(LLVM REQUIRED CONFIG PATHS /usr/lib/llvm-22/lib/cmake/llvm NO_DEFAULT_PATH)
find_package(MLIR REQUIRED CONFIG PATHS /usr/lib/llvm-22/lib/cmake/mlir NO_DEFAULT_PATH)
message(STATUS "LLVM ${LLVM_PACKAGE_VERSION} in ${LLVM_TOOLS_BINARY_DIR}; MLIR in ${MLIR_DIR}")
if(NOT LLVM_VERSION_MAJOR EQUAL 22)
  message(FATAL_ERROR "LLVM 22 is required, found ${LLVM_PACKAGE_VERSION}")
endif()

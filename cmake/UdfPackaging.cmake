# What `cmake --install` installs, the CMake package (find_package(udf)), the
# pkg-config file, and the CPack packages (TGZ, DEB).  The one place that
# decides the install layout:
#
#   bin/                      udfc udf-link udf-run
#   lib/                      libudf_runtime.so, libudf_frontend_ir.so (udfc's IR plugin)
#   lib/cmake/udf/            udfConfig.cmake, udfConfigVersion.cmake, udfTargets*.cmake, udfFunctions.cmake
#   lib/pkgconfig/            udf-runtime.pc
#   include/udf/              runtime.h runtime.hpp runtime_interop.h abi/metric_v1.h abi/metric_v2.h abi/filter_v1.h kernels/ivf_flat_v1.h
#   share/udf/kernels/        the IVF-Flat kernel pack (LTO-IR + manifest)
#   share/udf/metrics/        the built-in metric artifacts (l2, inner_product, cosine)
#   share/udf/filters/        the built-in filter artifacts (bitmap)
#   share/udf/schemas/        the JSON schemas of manifests and diagnostics
#
# The tools find the plugin and share/udf relative to themselves, and the
# package's paths are relative to its own folder: the tree can be moved.
include(CMakePackageConfigHelpers)

set(UDF_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/udf)
set(UDF_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/udf)

# Targets.  The runtime is exported as udf::runtime; its headers come from
# the install tree's include/.
# SOVERSION is the C API's major version, UDF_RUNTIME_API_VERSION in
# include/udf/runtime.h (read from there: one place says it).
# A wheel (scikit-build-core sets SKBUILD) cannot hold symbolic links, so each
# link of libudf_runtime.so -> .so.N -> .so.N.0.0 would be another copy: there
# the library is the one file libudf_runtime.so.N (its SONAME), without the
# development link, and the pkg-config file (which links -ludf_runtime) is left out.
file(STRINGS ${PROJECT_SOURCE_DIR}/include/udf/runtime.h _udf_api_line REGEX "^#define UDF_RUNTIME_API_VERSION [0-9]+$")
string(REGEX REPLACE "^#define UDF_RUNTIME_API_VERSION ([0-9]+)$" "\\1" UDF_RUNTIME_SOVERSION "${_udf_api_line}")
if(NOT UDF_RUNTIME_SOVERSION MATCHES "^[0-9]+$")
  message(FATAL_ERROR "include/udf/runtime.h: no '#define UDF_RUNTIME_API_VERSION N' line")
endif()
if(SKBUILD)
  set_target_properties(udf_runtime PROPERTIES EXPORT_NAME runtime VERSION ${UDF_RUNTIME_SOVERSION}
                                               SOVERSION ${UDF_RUNTIME_SOVERSION})
  set(_udf_namelink NAMELINK_SKIP)
else()
  set_target_properties(udf_runtime PROPERTIES EXPORT_NAME runtime VERSION ${UDF_RUNTIME_SOVERSION}.0.0
                                               SOVERSION ${UDF_RUNTIME_SOVERSION})
  set(_udf_namelink)
endif()
install(TARGETS udfc udf-link udf-run EXPORT udfTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS udf_runtime EXPORT udfTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} ${_udf_namelink}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS udf_frontend_ir LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# Public headers: the runtime's C API, its C++ wrapper and interop, the UDF
# ABI, and the scan kernels' entry ABI (for --emit fatbin/cubin users).
install(FILES ${PROJECT_SOURCE_DIR}/include/udf/runtime.h ${PROJECT_SOURCE_DIR}/include/udf/runtime.hpp
              ${PROJECT_SOURCE_DIR}/include/udf/runtime_interop.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/udf)
install(FILES ${PROJECT_SOURCE_DIR}/include/udf/abi/metric_v1.h ${PROJECT_SOURCE_DIR}/include/udf/abi/metric_v2.h
              ${PROJECT_SOURCE_DIR}/include/udf/abi/filter_v1.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/udf/abi)
install(FILES ${PROJECT_SOURCE_DIR}/include/udf/kernels/ivf_flat_v1.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/udf/kernels)

# Data: the kernel pack, the built-in metrics and filters, the schemas.
install(DIRECTORY ${CMAKE_BINARY_DIR}/share/udf/kernels/ DESTINATION ${UDF_INSTALL_DATADIR}/kernels
        FILES_MATCHING PATTERN "*.ltoir" PATTERN "*.json")
install(DIRECTORY ${CMAKE_BINARY_DIR}/share/udf/metrics/ DESTINATION ${UDF_INSTALL_DATADIR}/metrics
        FILES_MATCHING PATTERN "*.udfa")
install(DIRECTORY ${CMAKE_BINARY_DIR}/share/udf/filters/ DESTINATION ${UDF_INSTALL_DATADIR}/filters
        FILES_MATCHING PATTERN "*.udfa")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/schemas/ DESTINATION ${UDF_INSTALL_DATADIR}/schemas
        FILES_MATCHING PATTERN "*.schema.json" PATTERN "tests" EXCLUDE)

# The CMake package.
install(EXPORT udfTargets NAMESPACE udf:: DESTINATION ${UDF_INSTALL_CMAKEDIR} FILE udfTargets.cmake)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/udfConfig.cmake.in ${CMAKE_BINARY_DIR}/cmake/udfConfig.cmake
  INSTALL_DESTINATION ${UDF_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR UDF_INSTALL_DATADIR)
# 0.x: a new minor version may break compatibility.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/udfConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/udfConfig.cmake ${CMAKE_BINARY_DIR}/cmake/udfConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/udfFunctions.cmake
        DESTINATION ${UDF_INSTALL_CMAKEDIR})

# pkg-config, relative to its own folder.
file(RELATIVE_PATH UDF_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" UDF_PC_TO_PREFIX "${UDF_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/udf-runtime.pc.in ${CMAKE_BINARY_DIR}/cmake/udf-runtime.pc @ONLY)
if(NOT SKBUILD)
  install(FILES ${CMAKE_BINARY_DIR}/cmake/udf-runtime.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

# Packages: `cpack -G TGZ` (a relocatable tree) and `cpack -G DEB` (installs
# into /usr).  The DEB's Depends come from dpkg-shlibdeps (libc6, libstdc++6,
# libgcc-s1, and libllvm22 + libmlir-22 for the IR plugin).  The CUDA 13
# libraries (NVRTC, nvJitLink, libNVVM; nvFatbin from PyPI or the toolkit)
# are loaded at run time and come from NVIDIA's packages, not Debian's: they
# are suggested, and `udfc --version` says which are missing.
set(CPACK_PACKAGE_NAME udf)
set(CPACK_PACKAGE_VENDOR "udf")
set(CPACK_PACKAGE_CONTACT "udf maintainers <udf@udf.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "ahead-of-time compiled GPU user-defined functions for IVF-Flat search")
set(CPACK_PACKAGE_DESCRIPTION "udfc compiles UDFs written in CUDA C++, MLIR or LLVM IR (or LTO-IR from Python front ends) into artifacts; udf-link links them with prebuilt IVF-Flat scan kernels into GPU modules; libudf_runtime loads them and searches on the GPU.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_FILE_NAME "udf-${PROJECT_VERSION}-${CMAKE_SYSTEM_NAME}-${CMAKE_SYSTEM_PROCESSOR}")
set(CPACK_GENERATOR "TGZ;DEB")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# dpkg-shlibdeps (1.21) hands every path it finds for a library to one
# dpkg-query call and files each answer under the path's real file as well.
# libLLVM.so.22.1 is found both as libllvm22's file and as llvm-22-dev's
# symlink to it (in LLVM's folder, which the plugin's RUNPATH needs for
# libMLIR); which answer wins follows Perl's randomised hash order, so about
# half the builds lost the libllvm22 dependency.  A debian/shlibs.local,
# which dpkg-shlibdeps reads before any package's shlibs, names the runtime
# packages of libLLVM and libMLIR, taken from dpkg's own shlibs entries here.
set(UDF_DEB_SHLIBS_LOCAL "")
find_program(UDF_DPKG_QUERY dpkg-query)
if(UDF_DPKG_QUERY)
  foreach(_lib IN ITEMS LLVM MLIR)
    file(REAL_PATH "${LLVM_LIBRARY_DIR}/lib${_lib}.so" _real)
    execute_process(COMMAND ${UDF_DPKG_QUERY} --search -- "${_real}" OUTPUT_VARIABLE _owner
                    RESULT_VARIABLE _rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_rc EQUAL 0 AND _owner MATCHES "^([^:, ]+)")
      execute_process(COMMAND ${UDF_DPKG_QUERY} --control-show "${CMAKE_MATCH_1}" shlibs
                      OUTPUT_VARIABLE _shlibs RESULT_VARIABLE _rc ERROR_QUIET)
      if(_rc EQUAL 0 AND _shlibs MATCHES "(^|\n)(lib${_lib} [^\n]+)")
        string(APPEND UDF_DEB_SHLIBS_LOCAL "${CMAKE_MATCH_2}\n")
      endif()
    endif()
  endforeach()
endif()
if(UDF_DEB_SHLIBS_LOCAL)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/udf-deb-shlibs.cmake.in ${CMAKE_BINARY_DIR}/cmake/udf-deb-shlibs.cmake @ONLY)
  set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_BINARY_DIR}/cmake/udf-deb-shlibs.cmake)
endif()
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libdlpack-dev, pkgconf | pkg-config, cmake (>= 3.20)")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "cuda-toolkit-13-0")
include(CPack)

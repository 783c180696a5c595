# ASan builds (the asan and fuzz presets): the executables udf builds run at
# build time too (udfc compiles the built-in metrics, udf-link the kernel
# pack's modules), outside ctest's environment.  NVIDIA's closed libraries and
# LLVM/MLIR's process-lifetime singletons keep memory until exit, which
# LeakSanitizer reports.  So the tools carry test/sanitizers/lsan.supp as
# their built-in LeakSanitizer suppressions (__lsan_default_suppressions in
# tools/common/tool_main.h); LSAN_OPTIONS=suppressions=... adds to them.  The
# file stays the one list: this turns it into a C string literal.
if(NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize=[^ ]*address")
  return()
endif()
set(_udf_lsan_supp ${PROJECT_SOURCE_DIR}/test/sanitizers/lsan.supp)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_udf_lsan_supp})
file(STRINGS ${_udf_lsan_supp} _udf_lsan_lines REGEX "^[a-z_]+:")
set(_udf_lsan_literal "")
foreach(line IN LISTS _udf_lsan_lines)
  string(REPLACE "\\" "\\\\" line "${line}")
  string(REPLACE "\"" "\\\"" line "${line}")
  string(APPEND _udf_lsan_literal "\"${line}\\n\"\n")
endforeach()
set(_udf_lsan_inc ${PROJECT_BINARY_DIR}/generated/udf_lsan_suppressions.inc)
file(CONFIGURE OUTPUT ${_udf_lsan_inc} CONTENT "// Generated from test/sanitizers/lsan.supp by cmake/UdfSanitizers.cmake.\n${_udf_lsan_literal}")
add_compile_definitions(UDF_LSAN_SUPPRESSIONS_INC="${_udf_lsan_inc}")

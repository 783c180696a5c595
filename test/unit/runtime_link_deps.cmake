# libudf_runtime.so may need only the C/C++ runtime: no libcuda (dlopen), no
# fmt, LLVM, MLIR, CLI11, libcrypto (static).
execute_process(COMMAND readelf -d ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${LIB} failed")
endif()
string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${out}")
foreach(n ${needed})
  string(REGEX REPLACE "Shared library: \\[([^]]+)\\]" "\\1" lib "${n}")
  if(NOT lib MATCHES "^(libc|libm|libstdc\\+\\+|libgcc_s|ld-linux-x86-64)\\.so")
    message(FATAL_ERROR "libudf_runtime.so needs ${lib}: only libc, libm, libstdc++, libgcc_s and ld-linux are allowed")
  endif()
  message(STATUS "NEEDED ${lib}: ok")
endforeach()

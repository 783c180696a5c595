# udf_add_artifact(TARGET <name> SOURCE <file.cu> OUTPUT <file.udfa> ARCHS <sm_XX>...
#                  [FLAGS <udfc flags>...] [FLAGS_FROM_FIRST_LINE])
# Compiles a UDF with udfc at build time.  FLAGS_FROM_FIRST_LINE reads the
# flags from the source's first line, a comment "// udfc: FLAGS" (CUDA, MLIR)
# or "; udfc: FLAGS" (LLVM IR text).
function(udf_add_artifact)
  cmake_parse_arguments(A "FLAGS_FROM_FIRST_LINE" "TARGET;SOURCE;OUTPUT" "ARCHS;FLAGS" ${ARGN})
  set(flags ${A_FLAGS})
  if(A_FLAGS_FROM_FIRST_LINE)
    file(STRINGS ${A_SOURCE} first LIMIT_COUNT 1)
    # Any comment leader ("//" or ";"; a ";" cannot be spelled in a CMake regex).
    if(first MATCHES "^[^A-Za-z0-9_]* udfc:(.*)$")
      separate_arguments(line UNIX_COMMAND "${CMAKE_MATCH_1}")
      list(APPEND flags ${line})
    endif()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${A_SOURCE})
  endif()
  list(JOIN A_ARCHS "," archs)
  get_filename_component(dir ${A_OUTPUT} DIRECTORY)
  add_custom_command(
    OUTPUT ${A_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND $<TARGET_FILE:udfc> ${A_SOURCE} ${flags} --arch ${archs} --no-cache -o ${A_OUTPUT}
    DEPENDS udfc ${A_SOURCE}
    COMMENT "udfc ${A_SOURCE}"
    VERBATIM)
  if(A_TARGET)
    add_custom_target(${A_TARGET} DEPENDS ${A_OUTPUT})
  endif()
endfunction()

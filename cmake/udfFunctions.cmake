# udf_add_artifact() and udf_link_module(): compile UDFs with udfc and link
# them with udf-link at build time.  Installed with the CMake package
# (find_package(udf) includes it) and used by udf's own build, so both run the
# same code.  They call the tools through the targets udf::udfc and
# udf::udf-link.
#
#   udf_add_artifact(<target> SOURCE <file> ARCHS <sm_XX>... [FLAGS <udfc flags>...]
#                    [FLAGS_FROM_FIRST_LINE] [OUTPUT <file.udfa>] [NO_CACHE] [DEPENDS <file-or-target>...])
#   udf_link_module(<target> ARTIFACTS <target-or-file>... ARCHS <sm_XX>...
#                   [EMIT module|fatbin|cubin] [OUTPUT <file>] [KERNEL_PACK <dir>] [NO_CACHE]
#                   [CACHE_DIR <dir>] [MAX_K <k>] [DEPENDS <file-or-target>...] [PAIRS <metric:filter>...])
#
# ARTIFACTS may mix metrics and filters (udfc --kind filter); PAIRS limits the
# filtered scans to those metric:filter symbol pairs (udf-link --pair); MAX_K
# links only the scans for searches up to that k (udf-link --max-k).
# CACHE_DIR gives the link a cache folder of its own (UDF_CACHE_DIR), for
# example one in the build tree: modules that share metrics, filters or the
# merge kernels then link each entry once.
#
# Each makes a custom command built on add_custom_command(... DEPFILE ...):
# the tools write a depfile (-MD) naming every file they read (the source and
# every header it includes, the IR plugin's libdevice, the artifacts, the
# kernel pack), so Ninja and Makefiles rebuild exactly when one of those, a
# flag (kept in a stamp file rewritten only when it changes) or the tool
# itself changes, and a second build runs nothing.  <target> is a custom
# target (in ALL) that builds the file; its UDF_ARTIFACT_FILE /
# UDF_MODULE_FILE property holds the output's path.  Relative SOURCE and
# ARTIFACTS files are relative to the current source folder; a relative
# OUTPUT to the current binary folder (default: <target>.udfa / <target>.udfm
# there).  FLAGS_FROM_FIRST_LINE has udfc read the flags the source names in
# its first line (`// udfc: FLAGS` or `; udfc: FLAGS`).

if(CMAKE_VERSION VERSION_LESS 3.20)
  message(FATAL_ERROR "udf_add_artifact/udf_link_module need CMake 3.20 or newer (DEPFILE with every generator)")
endif()

# The policies the functions run with are those in force where they are
# defined: CMP0116 makes Ninja read the depfiles' paths as CMake wrote them.
cmake_policy(PUSH)
cmake_policy(SET CMP0116 NEW)

# ARCHS as a list, each element possibly comma-separated: "sm_80;sm_90,sm_100" -> sm_80,sm_90,sm_100.
function(_udf_join_archs out)
  set(all)
  foreach(a ${ARGN})
    string(REPLACE "," ";" parts "${a}")
    list(APPEND all ${parts})
  endforeach()
  list(REMOVE_DUPLICATES all)
  list(JOIN all "," joined)
  set(${out} "${joined}" PARENT_SCOPE)
endfunction()

# Writes <stamp> when its content changes, so that only a real change of a
# tool's flags makes the command run again (Makefiles do not track commands).
function(_udf_flags_stamp stamp)
  string(REPLACE ";" "\n" text "${ARGN}")
  file(CONFIGURE OUTPUT "${stamp}" CONTENT "${text}\n" @ONLY)
endfunction()

# <file-or-target> items of DEPENDS: targets become target-level dependencies,
# everything else a file (relative to the current source folder).
function(_udf_split_depends files_out targets_out)
  set(files)
  set(targets)
  foreach(d ${ARGN})
    if(TARGET "${d}")
      list(APPEND targets "${d}")
    else()
      get_filename_component(p "${d}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      list(APPEND files "${p}")
    endif()
  endforeach()
  set(${files_out} "${files}" PARENT_SCOPE)
  set(${targets_out} "${targets}" PARENT_SCOPE)
endfunction()

function(udf_add_artifact target)
  cmake_parse_arguments(PARSE_ARGV 1 A "FLAGS_FROM_FIRST_LINE;NO_CACHE" "SOURCE;OUTPUT" "ARCHS;FLAGS;DEPENDS")
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "udf_add_artifact(${target}): unknown arguments: ${A_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT A_SOURCE)
    message(FATAL_ERROR "udf_add_artifact(${target}): SOURCE <file> is required")
  endif()
  if(NOT A_ARCHS)
    message(FATAL_ERROR "udf_add_artifact(${target}): ARCHS <sm_XX>... is required (for example ARCHS sm_80 sm_90)")
  endif()
  if(TARGET "${target}")
    message(FATAL_ERROR "udf_add_artifact(${target}): a target of that name already exists")
  endif()
  get_filename_component(source "${A_SOURCE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${source}")
    message(FATAL_ERROR "udf_add_artifact(${target}): SOURCE ${source} does not exist")
  endif()
  if(NOT A_OUTPUT)
    set(A_OUTPUT "${target}.udfa")
  endif()
  get_filename_component(output "${A_OUTPUT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  get_filename_component(output_dir "${output}" DIRECTORY)
  _udf_join_archs(archs ${A_ARCHS})
  set(args "${source}" ${A_FLAGS} --arch "${archs}")
  if(A_FLAGS_FROM_FIRST_LINE)
    list(APPEND args --flags-from-first-line)
  endif()
  if(A_NO_CACHE)
    list(APPEND args --no-cache)
  endif()
  set(stamp "${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/udf/${target}.udfc-flags")
  _udf_flags_stamp("${stamp}" ${args})
  _udf_split_depends(dep_files dep_targets ${A_DEPENDS})
  add_custom_command(
    OUTPUT "${output}"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${output_dir}"
    COMMAND udf::udfc ${args} -o "${output}" -MD -MF "${output}.d"
    DEPENDS "$<TARGET_FILE:udf::udfc>" "${source}" "${stamp}" ${dep_files} ${dep_targets}
    DEPFILE "${output}.d"
    COMMENT "udfc ${A_SOURCE} -> ${target}"
    VERBATIM)
  add_custom_target(${target} ALL DEPENDS "${output}")
  set_target_properties(${target} PROPERTIES UDF_ARTIFACT_FILE "${output}" UDF_ARCHS "${archs}")
endfunction()

function(udf_link_module target)
  cmake_parse_arguments(PARSE_ARGV 1 A "NO_CACHE" "OUTPUT;EMIT;KERNEL_PACK;CACHE_DIR;MAX_K" "ARTIFACTS;ARCHS;DEPENDS;PAIRS")
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "udf_link_module(${target}): unknown arguments: ${A_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT A_ARTIFACTS)
    message(FATAL_ERROR "udf_link_module(${target}): ARTIFACTS <target-or-file>... is required")
  endif()
  if(NOT A_ARCHS)
    message(FATAL_ERROR "udf_link_module(${target}): ARCHS <sm_XX>... is required (for example ARCHS sm_80 sm_90)")
  endif()
  if(NOT A_EMIT)
    set(A_EMIT module)
  endif()
  if(NOT A_EMIT MATCHES "^(module|fatbin|cubin)$")
    message(FATAL_ERROR "udf_link_module(${target}): EMIT must be module, fatbin or cubin, not '${A_EMIT}'")
  endif()
  if(TARGET "${target}")
    message(FATAL_ERROR "udf_link_module(${target}): a target of that name already exists")
  endif()
  set(files)
  set(art_targets)
  foreach(a ${A_ARTIFACTS})
    if(TARGET "${a}")
      get_target_property(f "${a}" UDF_ARTIFACT_FILE)
      if(NOT f)
        message(FATAL_ERROR "udf_link_module(${target}): target ${a} is not a udf_add_artifact() target")
      endif()
      list(APPEND files "${f}")
      list(APPEND art_targets "${a}")
    else()
      get_filename_component(f "${a}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      list(APPEND files "${f}")
    endif()
  endforeach()
  if(NOT A_OUTPUT)
    if(A_EMIT STREQUAL "module")
      set(A_OUTPUT "${target}.udfm")
    else()
      set(A_OUTPUT "${target}.${A_EMIT}")
    endif()
  endif()
  get_filename_component(output "${A_OUTPUT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  get_filename_component(output_dir "${output}" DIRECTORY)
  _udf_join_archs(archs ${A_ARCHS})
  set(args ${files} --arch "${archs}" --emit ${A_EMIT})
  if(A_KERNEL_PACK)
    get_filename_component(pack "${A_KERNEL_PACK}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    list(APPEND args --kernel-pack "${pack}")
  endif()
  foreach(p ${A_PAIRS})
    list(APPEND args --pair "${p}")
  endforeach()
  if(A_MAX_K)
    list(APPEND args --max-k "${A_MAX_K}")
  endif()
  if(A_NO_CACHE)
    list(APPEND args --no-cache)
  endif()
  set(env)
  if(A_CACHE_DIR)
    get_filename_component(cache_dir "${A_CACHE_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    set(env "${CMAKE_COMMAND}" -E env "UDF_CACHE_DIR=${cache_dir}")
  endif()
  set(stamp "${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/udf/${target}.udf-link-flags")
  _udf_flags_stamp("${stamp}" ${args})
  _udf_split_depends(dep_files dep_targets ${A_DEPENDS})
  add_custom_command(
    OUTPUT "${output}"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${output_dir}"
    COMMAND ${env} $<TARGET_FILE:udf::udf-link> ${args} -o "${output}" -MD -MF "${output}.d"
    DEPENDS "$<TARGET_FILE:udf::udf-link>" ${files} ${art_targets} "${stamp}" ${dep_files} ${dep_targets}
    DEPFILE "${output}.d"
    COMMENT "udf-link ${target}"
    VERBATIM)
  add_custom_target(${target} ALL DEPENDS "${output}")
  set_target_properties(${target} PROPERTIES UDF_MODULE_FILE "${output}" UDF_ARCHS "${archs}")
endfunction()

cmake_policy(POP)

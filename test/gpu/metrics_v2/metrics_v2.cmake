# The ABI v2 test metrics (README.md): one udfc artifact per (source, element
# type).  Included by test/unit/runtime_gpu.cmake before the modules that use
# them (runtime_gpu_v2_test's and bench/search_bench's bench.udfm).  sm_90
# only: the H100 / H200 the GPU tests and the bench run on.
set(_v2_src ${CMAKE_CURRENT_LIST_DIR})
set(_v2_art_dir ${CMAKE_CURRENT_BINARY_DIR}/runtime_artifacts/v2)

# Element variants: the symbol suffix -> udfc flags and the -D ACC type.
set(_v2_f32 --elem f32 -D ACC=float)
set(_v2_f16 --elem f16 -D ACC=float)
set(_v2_i8 --elem i8 --acc i32 -D ACC=int32_t -D ACC_I32=1)
set(_v2_i8f --elem i8 --acc f32 -D ACC=float)
set(_v2_u8 --elem u8 --acc i32 -D ACC=int32_t -D ACC_I32=1)
set(_v2_u8f --elem u8 --acc f32 -D ACC=float)

# _udf_v2_artifact(NAME SOURCE SHAPE SUFFIX [udfc flags...]): artifact target
# runtime_test_v2_NAME_SUFFIX of symbol NAME_SUFFIX (state: finalize
# NAME_SUFFIX_finalize) from SOURCE built with -D SFX=_SUFFIX.
function(_udf_v2_artifact name source shape sfx)
  set(sym ${name}_${sfx})
  set(flags --shape ${shape} --symbol ${sym} -D SFX=_${sfx} ${_v2_${sfx}} ${ARGN})
  if(shape STREQUAL "state")
    list(APPEND flags --finalize ${sym}_finalize)
  endif()
  udf_add_artifact(runtime_test_v2_${sym} SOURCE ${_v2_src}/${source} OUTPUT ${_v2_art_dir}/${sym}.udfa ARCHS sm_90
                   FLAGS ${flags} NO_CACHE)
endfunction()

# Squared L2 as v2 state and v2 vector, every element type (and the v1 u8 L2
# the u8 ones are compared with).
foreach(sfx f32 f16 i8 u8)
  _udf_v2_artifact(l2_state l2_state.cu state ${sfx})
  _udf_v2_artifact(l2_vector l2_vector.cu vector ${sfx})
endforeach()
udf_add_artifact(runtime_test_v2_l2_v1_u8 SOURCE ${_v2_src}/l2_v1_u8.cu OUTPUT ${_v2_art_dir}/l2_v1_u8.udfa ARCHS sm_90
                 FLAGS_FROM_FIRST_LINE NO_CACHE)
# Pearson (state; i8 and u8 with i32 and f32 accumulators), Pearson similarity
# (--order max), cosine without stored norms (state).
foreach(sfx f32 f16 i8 i8f u8 u8f)
  _udf_v2_artifact(pearson pearson.cu state ${sfx})
endforeach()
_udf_v2_artifact(pearson_sim pearson.cu state f32 -D PEARSON_SIMILARITY=1 --order max --coarse-metric cosine)
foreach(sfx f32 f16 i8 u8 u8f)
  _udf_v2_artifact(cosine cosine.cu state ${sfx})
endforeach()
# 1-D EMD and Jensen-Shannon (vector), nonnegative element types.
foreach(sfx f32 f16 u8 u8f)
  _udf_v2_artifact(emd emd.cu vector ${sfx})
endforeach()
foreach(sfx f32 f16 u8f)
  _udf_v2_artifact(js js.cu vector ${sfx})
endforeach()
# Captures, the context's id and query, max order (flags in their first lines).
foreach(n weighted_cosine weighted_l2_vector l2_ctx l2_ctx_vector dot_vector)
  udf_add_artifact(runtime_test_v2_${n} SOURCE ${_v2_src}/${n}.cu OUTPUT ${_v2_art_dir}/${n}.udfa ARCHS sm_90
                   FLAGS_FROM_FIRST_LINE NO_CACHE)
endforeach()

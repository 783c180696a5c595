# runtime_gpu_test: links only libudf_runtime.so and GoogleTest (static), so it
# runs on a GPU machine without this project's build dependencies.  Its
# modules are linked at build time by udf-link into test/modules/ (next to the
# binary; $UDF_TEST_MODULE_DIR overrides).  Included by test/CMakeLists.txt.
set(_rt_src ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_gpu_test.cpp)
set(_rt_fuzz_src ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_api_fuzz_test.cpp)
set(_rt_more_src ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_stress_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_fault_test.cpp
                 ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_shards_test.cpp ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_exact_test.cpp)
list(REMOVE_ITEM UDF_UNIT_TESTS ${_rt_src} ${_rt_fuzz_src} ${_rt_more_src})
set(_mod_dir ${CMAKE_CURRENT_BINARY_DIR}/modules)
set(_art_dir ${CMAKE_CURRENT_BINARY_DIR}/runtime_artifacts)
# Artifacts and modules with udf_add_artifact() / udf_link_module(), as a
# user's build would make them.
set(_arts)
foreach(src ${PROJECT_SOURCE_DIR}/examples/weighted_l2.cu ${PROJECT_SOURCE_DIR}/examples/linf.cu
            ${PROJECT_SOURCE_DIR}/examples/inner_product.cu ${PROJECT_SOURCE_DIR}/examples/l2_sqrt.cu
            ${PROJECT_SOURCE_DIR}/examples/int8_l2.cu ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_udfs/f16_l2.cu
            ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_udfs/u8_l1.cu ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_udfs/scaled_ip.cu
            ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_udfs/neg_l1.cu)
  get_filename_component(n ${src} NAME_WE)
  udf_add_artifact(runtime_test_art_${n} SOURCE ${src} OUTPUT ${_art_dir}/${n}.udfa ARCHS sm_80 FLAGS_FROM_FIRST_LINE NO_CACHE)
  list(APPEND _arts runtime_test_art_${n})
endforeach()
set(_builtin ${CMAKE_BINARY_DIR}/share/udf/metrics/l2.udfa ${CMAKE_BINARY_DIR}/share/udf/metrics/inner_product.udfa
             ${CMAKE_BINARY_DIR}/share/udf/metrics/cosine.udfa)
# The test modules share one link cache in the build tree (UDF_TEST_LINK_CACHE_DIR;
# scripts/test.sh gives the ASan build the default build's): entries that
# several modules hold (the merges, the built-in L2, ...) are linked once.
set(UDF_TEST_LINK_CACHE_DIR "${CMAKE_BINARY_DIR}/link-cache" CACHE PATH "udf-link's cache folder for the test modules")
# The GPU tests need every k bucket (the default, empty).  scripts/test.sh
# sets 32 on a machine without a GPU, where those tests skip: the modules are
# then only linked (k <= 32), in about a third of the time; test/gpu/stage_device.sh
# and bench/stage_bench.sh refuse such a build.
set(UDF_TEST_MODULES_MAX_K "" CACHE STRING "Link the GPU test modules for k buckets up to this only (empty: every bucket)")
set(_max_k)
if(UDF_TEST_MODULES_MAX_K)
  set(_max_k MAX_K ${UDF_TEST_MODULES_MAX_K})
endif()
set(_link KERNEL_PACK ${UDF_KERNEL_PACK_DIR} CACHE_DIR ${UDF_TEST_LINK_CACHE_DIR} ${_max_k} DEPENDS udf_kernel_pack)
# The MLIR and LLVM IR examples, one module per input kind: the same metrics
# as the CUDA ones, compiled through udfc's IR front ends (LLVM 7 writer for
# sm_80 and sm_90), so a GPU test checks their numbers.
foreach(kind mlir ll)
  set(_ir_arts)
  foreach(n linf log_cosh weighted_l2)
    udf_add_artifact(runtime_test_ir_${kind}_${n} SOURCE ${PROJECT_SOURCE_DIR}/examples/${n}.${kind}
                     OUTPUT ${_art_dir}/ir_${kind}/${n}.udfa ARCHS sm_80 sm_90 FLAGS_FROM_FIRST_LINE NO_CACHE)
    list(APPEND _ir_arts runtime_test_ir_${kind}_${n})
  endforeach()
  udf_link_module(runtime_test_mod_ir_${kind} ARTIFACTS ${_ir_arts} ARCHS sm_80 sm_90
                  OUTPUT ${_mod_dir}/ir_${kind}.udfm ${_link})
endforeach()
# The same metrics declared monotone (udfc --monotone): their k <= 32 scans
# prune (ivf_flat_v1.h, PRUNE); a GPU test checks they give the plain ones'
# results bit for bit.  (A separate module: one symbol per module.)
set(_prune_arts)
foreach(src ${PROJECT_SOURCE_DIR}/examples/weighted_l2.cu ${PROJECT_SOURCE_DIR}/examples/l2_sqrt.cu
            ${PROJECT_SOURCE_DIR}/examples/int8_l2.cu ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_udfs/neg_l1.cu)
  get_filename_component(n ${src} NAME_WE)
  udf_add_artifact(runtime_test_prune_${n} SOURCE ${src} OUTPUT ${_art_dir}/prune/${n}.udfa ARCHS sm_80 sm_90
                   FLAGS --monotone FLAGS_FROM_FIRST_LINE NO_CACHE)
  list(APPEND _prune_arts runtime_test_prune_${n})
endforeach()
# sm_90 only: a module with an older target keeps the plain scans (udf-link).
udf_link_module(runtime_test_mod_prune ARTIFACTS ${_prune_arts} ARCHS sm_90 OUTPUT ${_mod_dir}/prune.udfm ${_link})
udf_link_module(runtime_test_mod_builtin ARTIFACTS ${_builtin} ARCHS sm_80 sm_90 OUTPUT ${_mod_dir}/builtin.udfm
                ${_link} udf_builtin_metrics)
udf_link_module(runtime_test_mod_udfs ARTIFACTS ${_arts} ARCHS sm_80 sm_90 OUTPUT ${_mod_dir}/udfs.udfm ${_link})
udf_link_module(runtime_test_mod_l2_sm100 ARTIFACTS ${CMAKE_BINARY_DIR}/share/udf/metrics/l2.udfa ARCHS sm_100
                OUTPUT ${_mod_dir}/l2_sm100.udfm ${_link} udf_builtin_metrics)
# Filters (ABI ivf_flat.filter.v1) from CUDA (the built-in bitmap, a
# per-query one), MLIR and LLVM IR, paired with metrics of every element
# type; only the pairs the tests use (sm_90 only: the link is the slow part).
set(_filters ${CMAKE_BINARY_DIR}/share/udf/filters/bitmap.udfa)
foreach(src ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_udfs/query_group.cu ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_udfs/price_range.mlir
            ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_udfs/odd_ids.ll)
  get_filename_component(n ${src} NAME_WE)
  udf_add_artifact(runtime_test_filter_${n} SOURCE ${src} OUTPUT ${_art_dir}/filters/${n}.udfa ARCHS sm_90 FLAGS_FROM_FIRST_LINE NO_CACHE)
  list(APPEND _filters runtime_test_filter_${n})
endforeach()
# The monotone metrics with a per-query filter and the bitmap (pack 1.16:
# their f32 and f16 filtered k 32 scans prune too, the integer ones do not);
# a GPU test checks they give the plain filtered scans' results bit for bit.
# k <= 32 only: the pruning scans'.
udf_add_artifact(runtime_test_prune_f16_l2 SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_udfs/f16_l2.cu
                 OUTPUT ${_art_dir}/prune/f16_l2.udfa ARCHS sm_90 FLAGS --monotone FLAGS_FROM_FIRST_LINE NO_CACHE)
udf_link_module(runtime_test_mod_prune_filters
                ARTIFACTS runtime_test_prune_weighted_l2 runtime_test_prune_f16_l2 runtime_test_prune_int8_l2
                          runtime_test_prune_neg_l1 ${CMAKE_BINARY_DIR}/share/udf/filters/bitmap.udfa
                          runtime_test_filter_query_group
                ARCHS sm_90 OUTPUT ${_mod_dir}/prune_filters.udfm KERNEL_PACK ${UDF_KERNEL_PACK_DIR}
                CACHE_DIR ${UDF_TEST_LINK_CACHE_DIR} MAX_K 32 DEPENDS udf_kernel_pack udf_builtin_filters
                PAIRS weighted_l2:query_group weighted_l2:udf_builtin_bitmap f16_l2:query_group int8_l2:query_group
                      neg_l1:udf_builtin_bitmap)
udf_link_module(runtime_test_mod_filters
                ARTIFACTS ${CMAKE_BINARY_DIR}/share/udf/metrics/l2.udfa ${CMAKE_BINARY_DIR}/share/udf/metrics/inner_product.udfa
                          runtime_test_art_f16_l2 runtime_test_art_int8_l2 runtime_test_art_u8_l1 ${_filters}
                ARCHS sm_90 OUTPUT ${_mod_dir}/filters.udfm ${_link} udf_builtin_metrics udf_builtin_filters
                PAIRS udf_builtin_l2:udf_builtin_bitmap udf_builtin_l2:query_group udf_builtin_l2:price_range
                      udf_builtin_l2:odd_ids udf_builtin_inner_product:udf_builtin_bitmap f16_l2:udf_builtin_bitmap
                      int8_l2:udf_builtin_bitmap u8_l1:udf_builtin_bitmap u8_l1:query_group)
# The ABI v2 test metrics (test/gpu/metrics_v2/): artifacts runtime_test_v2_<symbol>.
include(${PROJECT_SOURCE_DIR}/test/gpu/metrics_v2/metrics_v2.cmake)
# bench/search_bench's modules: an L2 metric for each element type and the weighted-L2 UDF (sm_90:
# the H100/H200 it runs on), and L2 as ABI v2 state and vector UDFs for f32, f16 and i8
# (--metrics l2_v2_state,l2_v2_vector).
# Its weighted-L2 UDF is declared monotone (its weights are >= 0), so the
# scans of k <= 32 prune; bench_plain.udfm has the same UDF undeclared, for
# A/B runs (search_bench bench_plain.udfm --metrics weighted_l2).
udf_add_artifact(runtime_test_bench_weighted_l2 SOURCE ${PROJECT_SOURCE_DIR}/examples/weighted_l2.cu
                 OUTPUT ${_art_dir}/bench/weighted_l2.udfa ARCHS sm_90 FLAGS --monotone FLAGS_FROM_FIRST_LINE NO_CACHE)
udf_link_module(runtime_test_mod_bench_plain ARTIFACTS runtime_test_art_weighted_l2 ARCHS sm_90
                OUTPUT ${_mod_dir}/bench_plain.udfm ${_link})
udf_link_module(runtime_test_mod_bench
                ARTIFACTS ${CMAKE_BINARY_DIR}/share/udf/metrics/l2.udfa runtime_test_bench_weighted_l2 runtime_test_art_f16_l2
                          runtime_test_art_int8_l2 runtime_test_v2_l2_state_f32 runtime_test_v2_l2_state_f16
                          runtime_test_v2_l2_state_i8 runtime_test_v2_l2_vector_f32 runtime_test_v2_l2_vector_f16
                          runtime_test_v2_l2_vector_i8
                ARCHS sm_90 OUTPUT ${_mod_dir}/bench.udfm ${_link} udf_builtin_metrics)
# A metric with an undefined function, for the on-demand link's failure (GPU test).
udf_add_artifact(runtime_test_art_undef_helper SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_udfs/undef_helper.cu
                 OUTPUT ${_art_dir}/undef_helper.udfa ARCHS sm_90 FLAGS_FROM_FIRST_LINE NO_CACHE)
add_custom_target(runtime_test_modules ALL DEPENDS runtime_test_art_undef_helper runtime_test_mod_ir_mlir runtime_test_mod_ir_ll
                  runtime_test_mod_builtin runtime_test_mod_udfs runtime_test_mod_l2_sm100 runtime_test_mod_filters
                  runtime_test_mod_bench runtime_test_mod_bench_plain runtime_test_mod_prune
                  runtime_test_mod_prune_filters)

# runtime_api_fuzz_test: random valid and invalid C API calls on the GPU
# (same modules; $UDF_FUZZ_SEED / $UDF_FUZZ_TRIALS).  runtime_stress_test:
# threads with their own runtimes and async searches on caller streams, for
# $UDF_SOAK_SECONDS each (test/gpu/soak.sh runs the long soak).
# runtime_fault_test: every allocation and driver call of a build or a search
# made to fail in turn (the runtime's fault hook), and a real out-of-memory.
# runtime_shards_test: indexes over several GPUs (udf_index_build_sharded,
# udf_index_load_sharded) against one-GPU indexes over the same lists, bit for
# bit: shards on one GPU ({0,0}, {0,0,0}) everywhere, {0,1} with a second GPU.
# runtime_exact_test: udf_exact_search and udf_refine against float64 brute
# force, its modules linked on demand from the test artifacts.
foreach(t runtime_gpu_test runtime_api_fuzz_test runtime_stress_test runtime_fault_test runtime_shards_test
          runtime_exact_test)
  add_executable(${t} ${CMAKE_CURRENT_SOURCE_DIR}/unit/${t}.cpp)
  target_link_libraries(${t} PRIVATE udf_runtime GTest::gtest_main OpenSSL::Crypto ${CMAKE_DL_LIBS})
  target_include_directories(${t} PRIVATE ${UDF_CUDA_INCLUDE_DIR})
  target_compile_definitions(${t} PRIVATE UDF_TEST_MODULE_DIR="${_mod_dir}")
  set_target_properties(${t} PROPERTIES BUILD_RPATH "\$ORIGIN/../lib")
  add_dependencies(${t} runtime_test_modules)
  gtest_discover_tests(${t} DISCOVERY_TIMEOUT 60)
endforeach()
# runtime_device_array_test: udf_device_array_* (include/udf/runtime.h): the
# argument checks, which need no GPU, and the copies on a GPU (skipped there
# without one); it needs no module, so it builds and runs without them.
set(_da_src ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_device_array_test.cpp)
list(REMOVE_ITEM UDF_UNIT_TESTS ${_da_src})
add_executable(runtime_device_array_test ${_da_src})
target_link_libraries(runtime_device_array_test PRIVATE udf_runtime GTest::gtest_main Threads::Threads ${CMAKE_DL_LIBS})
target_include_directories(runtime_device_array_test PRIVATE ${UDF_CUDA_INCLUDE_DIR})
target_compile_definitions(runtime_device_array_test PRIVATE UDF_TEST_MODULE_DIR="${_mod_dir}")
set_target_properties(runtime_device_array_test PROPERTIES BUILD_RPATH "\$ORIGIN/../lib")
gtest_discover_tests(runtime_device_array_test DISCOVERY_TIMEOUT 60)
add_test(NAME runtime_link_deps COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:udf_runtime>
         -P ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_link_deps.cmake)

# bench/filter_bench: a filter's cost in the scan (not a test; run on a GPU
# with test/modules/filters.udfm, see bench/README.md).
add_executable(filter_bench ${PROJECT_SOURCE_DIR}/bench/filter_bench.cpp)
target_link_libraries(filter_bench PRIVATE udf_runtime ${CMAKE_DL_LIBS})
set_target_properties(filter_bench PROPERTIES BUILD_RPATH "\$ORIGIN/../lib")

# bench/search_bench: search end to end against PyTorch exact (not a test; run on a GPU with
# test/modules/bench.udfm through bench/search_bench.py, see bench/README.md).
add_executable(search_bench ${PROJECT_SOURCE_DIR}/bench/search_bench.cpp)
target_link_libraries(search_bench PRIVATE udf_runtime Threads::Threads ${CMAKE_DL_LIBS})
set_target_properties(search_bench PROPERTIES BUILD_RPATH "\$ORIGIN/../lib")

# bench/exact_search_bench: exact search through the C API, A/B of kernel packs in one process (not a
# test; run on a GPU with a module linked with udf-link --exact, see bench/README.md).
add_executable(exact_search_bench ${PROJECT_SOURCE_DIR}/bench/exact_search_bench.cpp)
target_link_libraries(exact_search_bench PRIVATE udf_runtime Threads::Threads ${CMAKE_DL_LIBS})
set_target_properties(exact_search_bench PROPERTIES BUILD_RPATH "\$ORIGIN/../lib")

# runtime_gpu_v2_test: metrics of ABI v2 (test/gpu/metrics_v2/) on the GPU
# against float64 references, and next to the v1 L2.  Like runtime_gpu_test it
# links only libudf_runtime and GoogleTest; its modules go to test/modules/
# (v2_*.udfm, sm_90; the v1 L2 of each element type is linked in v2_l2.udfm).
set(_v2_test_src ${CMAKE_CURRENT_SOURCE_DIR}/unit/runtime_gpu_v2_test.cpp)
list(REMOVE_ITEM UDF_UNIT_TESTS ${_v2_test_src})
udf_link_module(runtime_test_mod_v2_l2
                ARTIFACTS ${CMAKE_BINARY_DIR}/share/udf/metrics/l2.udfa runtime_test_art_f16_l2 runtime_test_art_int8_l2
                          runtime_test_v2_l2_v1_u8 runtime_test_v2_l2_state_f32 runtime_test_v2_l2_state_f16
                          runtime_test_v2_l2_state_i8 runtime_test_v2_l2_state_u8 runtime_test_v2_l2_vector_f32
                          runtime_test_v2_l2_vector_f16 runtime_test_v2_l2_vector_i8 runtime_test_v2_l2_vector_u8
                ARCHS sm_90 OUTPUT ${_mod_dir}/v2_l2.udfm ${_link} udf_builtin_metrics)
# (pearson_u8 and cosine_u8 made nvJitLink 13.0 crash before the v2 scans
# extracted u8 bytes with prmt: kernels/ivf_flat_scan.cuh, unpack.)
udf_link_module(runtime_test_mod_v2_state
                ARTIFACTS runtime_test_v2_pearson_f32 runtime_test_v2_pearson_f16 runtime_test_v2_pearson_i8
                          runtime_test_v2_pearson_i8f runtime_test_v2_pearson_u8 runtime_test_v2_pearson_u8f
                          runtime_test_v2_pearson_sim_f32 runtime_test_v2_cosine_f32 runtime_test_v2_cosine_f16
                          runtime_test_v2_cosine_i8 runtime_test_v2_cosine_u8 runtime_test_v2_cosine_u8f
                          runtime_test_v2_weighted_cosine
                          runtime_test_v2_l2_ctx ${CMAKE_BINARY_DIR}/share/udf/filters/bitmap.udfa
                ARCHS sm_90 OUTPUT ${_mod_dir}/v2_state.udfm ${_link} udf_builtin_filters
                PAIRS pearson_f32:udf_builtin_bitmap)
udf_link_module(runtime_test_mod_v2_vector
                ARTIFACTS runtime_test_v2_emd_f32 runtime_test_v2_emd_f16 runtime_test_v2_emd_u8 runtime_test_v2_emd_u8f
                          runtime_test_v2_js_f32 runtime_test_v2_js_f16 runtime_test_v2_js_u8f
                          runtime_test_v2_weighted_l2_vector runtime_test_v2_l2_ctx_vector runtime_test_v2_dot_vector
                          ${CMAKE_BINARY_DIR}/share/udf/filters/bitmap.udfa runtime_test_filter_query_group
                ARCHS sm_90 OUTPUT ${_mod_dir}/v2_vector.udfm ${_link} udf_builtin_filters
                PAIRS emd_u8:udf_builtin_bitmap js_f32:query_group)
add_custom_target(runtime_test_modules_v2 ALL DEPENDS runtime_test_mod_v2_l2 runtime_test_mod_v2_state
                  runtime_test_mod_v2_vector)
add_executable(runtime_gpu_v2_test ${_v2_test_src})
target_link_libraries(runtime_gpu_v2_test PRIVATE udf_runtime GTest::gtest_main ${CMAKE_DL_LIBS})
target_include_directories(runtime_gpu_v2_test PRIVATE ${UDF_CUDA_INCLUDE_DIR})
target_compile_definitions(runtime_gpu_v2_test PRIVATE UDF_TEST_MODULE_DIR="${_mod_dir}")
set_target_properties(runtime_gpu_v2_test PROPERTIES BUILD_RPATH "\$ORIGIN/../lib")
add_dependencies(runtime_gpu_v2_test runtime_test_modules_v2)
gtest_discover_tests(runtime_gpu_v2_test DISCOVERY_TIMEOUT 60)

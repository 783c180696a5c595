# Tests of the interop / run-time link / udf-run side of the runtime.
# Included by test/CMakeLists.txt.
#  - interop_test: the C API of udf/runtime_interop.h, against libudf_runtime.so.
#  - runtime_link_test: lib/runtime/module/link_session.cpp, link_queue.cpp and
#    capi/link_api.cpp compiled in with stubs of the runtime entry points they
#    call, linking for sm_90 on a machine without a GPU.
#  - vector_files_test: the .fvecs/.bvecs/.ivecs/.npy readers (udf_data).
foreach(_t interop_test runtime_link_test vector_files_test)
  list(REMOVE_ITEM UDF_UNIT_TESTS ${CMAKE_CURRENT_SOURCE_DIR}/unit/${_t}.cpp)
endforeach()

add_executable(interop_test unit/interop_test.cpp)
target_link_libraries(interop_test PRIVATE udf_runtime GTest::gtest_main)
set_target_properties(interop_test PROPERTIES BUILD_RPATH "\$ORIGIN/../lib")
gtest_discover_tests(interop_test DISCOVERY_TIMEOUT 60)

add_executable(runtime_link_test unit/runtime_link_test.cpp ${PROJECT_SOURCE_DIR}/lib/runtime/module/link_session.cpp
                                 ${PROJECT_SOURCE_DIR}/lib/runtime/module/link_queue.cpp
                                 ${PROJECT_SOURCE_DIR}/lib/runtime/capi/link_api.cpp)
target_include_directories(runtime_link_test PRIVATE ${UDF_CUDA_INCLUDE_DIR} ${PROJECT_SOURCE_DIR}/lib/runtime)
target_link_libraries(runtime_link_test PRIVATE udf_link udf_artifact udf_support GTest::gtest_main ${CMAKE_DL_LIBS})
target_compile_definitions(runtime_link_test PRIVATE
  UDF_TEST_ARTIFACT="${CMAKE_BINARY_DIR}/examples/weighted_l2.udfa"
  UDF_TEST_FILTER_ARTIFACT="${CMAKE_BINARY_DIR}/share/udf/filters/bitmap.udfa"
  UDF_TEST_PRUNE_ARTIFACT="${CMAKE_CURRENT_BINARY_DIR}/runtime_artifacts/prune/weighted_l2.udfa"
  UDF_TEST_KERNEL_PACK="${CMAKE_BINARY_DIR}/share/udf/kernels")
add_dependencies(runtime_link_test examples udf_kernel_pack udf_builtin_filters runtime_test_prune_weighted_l2)
gtest_discover_tests(runtime_link_test DISCOVERY_TIMEOUT 60)

add_executable(vector_files_test unit/vector_files_test.cpp)
target_link_libraries(vector_files_test PRIVATE udf_data GTest::gtest_main)
gtest_discover_tests(vector_files_test DISCOVERY_TIMEOUT 60)

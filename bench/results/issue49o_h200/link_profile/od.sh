cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz
UDF_TEST_MODULE_DIR=$PWD/.device/modules timeout 200 .device/bin/runtime_gpu_test --gtest_brief=1 --gtest_filter='*OnDemand*:*RuntimeLink*' > $OUT/runtime_gpu_test_ondemand.log 2>&1
echo "rc $?"; tail -4 $OUT/runtime_gpu_test_ondemand.log

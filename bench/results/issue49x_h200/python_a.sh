#!/usr/bin/env bash
# Device call, first of two (python.sh follows while the machine is warm):
# the direct-twin GPU test again after its fix (.bench/small.tar.xz: the test
# binary, the runtime, the pack, artifacts and the fixture's modules), with the
# other on-demand tests; then installs 5cc6eb6's wheel (.bench/oldwheel:
# 58dfd33's, the same package and native code) into /tmp/site-49x-old.
set -uo pipefail
mkdir -p "$OUT"
tar -xJf .bench/small.tar.xz
UDF_TEST_MODULE_DIR=$PWD/.device/modules timeout 200 .device/bin/runtime_gpu_test --gtest_filter='*OnDemand*' 2>&1 | tail -25 | tee "$OUT/ondemand_tests.log"
rm -rf /tmp/site-49x-old && /opt/torch/.venv/bin/python -m pip install -q --no-deps --target /tmp/site-49x-old .bench/oldwheel/*.whl && echo installed

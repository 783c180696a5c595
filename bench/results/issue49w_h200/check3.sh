#!/usr/bin/env bash
# Device call: udf_index_coarse_weights (4b9af08) on the GPU: the runtime tests
# that read the weights back (C, C++ wrapper, the sharded build paths) and the
# Python test, from a small carry (.bench/small.tar.xz) and the wheel.
set -uo pipefail
tar -xJf .bench/small.tar.xz
export UDF_TEST_MODULE_DIR=$PWD/.device/modules
mkdir -p "$OUT"
{
  .device/bin/runtime_gpu_test --gtest_filter='*CoarseWeights*:*SaveLoad*:*WithMetric*' 2>&1 | tail -4
  .device/bin/runtime_wrapper_shards_test 2>&1 | tail -3
  .device/bin/runtime_shards_test --gtest_filter='*BuildPaths*:*SaveAndLoad*' 2>&1 | tail -3
  py=/opt/torch/.venv/bin/python site=/tmp/site-49w3
  rm -rf $site && $py -m pip install -q --no-deps --target $site .device/wheel/*.whl
  UDF_PYTHON_DIR=$site UDF_CACHE_DIR=/tmp/udf-cache-49w3 PYTHONPATH=$site \
    $py -m pytest -q -p no:cacheprovider python/tests/test_gpu.py -k "coarse_weights or centroids" 2>&1 | tail -3
} 2>&1 | tee "$OUT/check3.log"

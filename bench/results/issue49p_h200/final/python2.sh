#!/bin/bash
# The Python GPU tests this change touches (the whole `pytest -m gpu` outran one call): the early
# start and compile ahead, filters, the GPU tests, the quickstart; verbose, first failure stops.
cd "$(dirname "$0")/../../../.."
PY=/opt/torch/.venv/bin/python
site=/tmp/udf-site2; rm -rf $site
$PY -m pip install -q --no-deps --no-index --target $site .device/wheel/*.whl
export UDF_PYTHON_DIR=$site UDF_CACHE_DIR=/tmp/udf-cache2; unset UDF_BIN_DIR
cd /tmp && timeout 380 $PY -m pytest $OLDPWD/python/tests/test_cuda_start.py $OLDPWD/python/tests/test_filter.py \
  $OLDPWD/python/tests/test_quickstart.py $OLDPWD/python/tests/test_gpu.py -m gpu -x -v -rs -p no:cacheprovider > $OUT/pytest_gpu.log 2>&1
echo "pytest rc $?"; grep -cE "PASSED" $OUT/pytest_gpu.log; grep -E "FAILED|ERROR|passed|failed" $OUT/pytest_gpu.log | tail -5; tail -3 $OUT/pytest_gpu.log

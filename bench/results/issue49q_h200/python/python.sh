#!/bin/bash
# This tree's wheel (filtered pruning twins linked on demand, last): toolchain_bench.py's cold Python
# rows, then the Python GPU tests of filters, the early start and the quickstart.
cd "$(dirname "$0")/../../../.."
s=$(date +%s)
PY=/opt/torch/.venv/bin/python
N=/tmp/udf_new; rm -rf $N; mkdir -p $N $OUT/b
$PY -m zipfile -e .device/wheel/*.whl $N; chmod +x $N/udf/bin/*
CUDA_CACHE_DISABLE=1 timeout 150 $PY bench/toolchain_bench.py --cases python --python-device --python-path $N \
  --python-udfs metric,filter,builtin+filter --reps 5 --out $OUT/b --tag python_new 2>&1 | grep "^| "
echo "bench at $(( $(date +%s) - s )) s"
site=/tmp/udf_site; rm -rf $site
$PY -m pip install -q --no-deps --no-index --target $site .device/wheel/*.whl
mkdir -p /tmp/pt && cd /tmp/pt
UDF_PYTHON_DIR=$site UDF_CACHE_DIR=/tmp/pt/cache timeout 300 $PY -m pytest $OLDPWD/python/tests/test_filter.py \
  $OLDPWD/python/tests/test_cuda_start.py $OLDPWD/python/tests/test_quickstart.py -m gpu -q -rs -p no:cacheprovider > $OUT/pytest.log 2>&1
echo "pytest rc $? at $(( $(date +%s) - s )) s"; tail -8 $OUT/pytest.log
tar -C $OUT -cf $OUT/results.tar b && rm -rf $OUT/b

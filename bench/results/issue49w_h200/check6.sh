#!/usr/bin/env bash
# Device call: toolchain_bench's Python rows with 378867d's wheel (installed by
# check6a.sh in the call before, the commit before this change) and 58dfd33's (.device/wheel), one after the
# other, then the Python coarse-weights test on 58dfd33's wheel.
set -uo pipefail
py=/opt/torch/.venv/bin/python
mkdir -p "$OUT"
for who in old new; do
  site=/tmp/site-49w6-$who; whl=.device/wheel; [[ $who == old ]] && whl=.bench/oldwheel
  [[ $who == new ]] && { rm -rf $site && $py -m pip install -q --no-deps --target $site $whl/*.whl; }
  CUDA_CACHE_DISABLE=1 timeout 200 $py bench/toolchain_bench.py --cases python --python-device --python-path $site \
    --python-udfs metric,filter,builtin+filter --reps 5 --out "$OUT" --tag python_49w6_$who 2>&1 | tail -9
done
UDF_PYTHON_DIR=/tmp/site-49w6-new UDF_CACHE_DIR=/tmp/udf-cache-49w6 PYTHONPATH=/tmp/site-49w6-new \
  $py -m pytest -q -p no:cacheprovider python/tests/test_gpu.py -k coarse_weights 2>&1 | tail -2 | tee "$OUT/check6_pytest.log"

#!/usr/bin/env bash
# Device call: this tree's wheel (.device/wheel), the coarse-weights GPU test,
# the 10M coarse-weights recall (coarse_weights.py), then the package's GPU tests.
set -uo pipefail
py=/opt/torch/.venv/bin/python
site=/tmp/site-49w
rm -rf "$site" && $py -m pip install -q --no-deps --target "$site" .device/wheel/*.whl
export UDF_PYTHON_DIR=$site UDF_CACHE_DIR=/tmp/udf-cache-49w PYTHONPATH=$site
mkdir -p "$OUT"
$py -m pytest -q -p no:cacheprovider python/tests/test_gpu.py -k coarse_weights 2>&1 | tail -3 | tee "$OUT/pytest_coarse_weights.log"
timeout 330 $py bench/results/issue49w_h200/coarse_weights.py --seeds 49,50,51 --json "$OUT/coarse_weights.json" 2>&1 \
  | tee "$OUT/coarse_weights.log"
timeout 200 $py -m pytest -q -p no:cacheprovider -m gpu python/tests -x 2>&1 | tail -4 | tee "$OUT/pytest_gpu.log"

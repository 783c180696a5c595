#!/usr/bin/env bash
# Device call: README's Python quickstart (examples/python/quickstart.py, now
# built with coarse_weights) run as a user runs it, with 4b9af08's wheel; then the
# quickstart before that change, written to quickstart_before.py before the call with
# `git show 6a5cff0:examples/python/quickstart.py` (not kept: it is that commit's file).
set -uo pipefail
py=/opt/torch/.venv/bin/python site=/tmp/site-49w5
mkdir -p "$OUT"
rm -rf $site && $py -m pip install -q --no-deps --target $site .device/wheel/*.whl
UDF_PYTHON_DIR=$site UDF_CACHE_DIR=/tmp/udf-cache-49w5 PYTHONPATH=$site \
  $py -m pytest -q -p no:cacheprovider python/tests/test_quickstart.py -rs 2>&1 | tail -3 | tee "$OUT/check5.log"
PYTHONPATH=$site UDF_CACHE_DIR=/tmp/udf-cache-49w5 $py examples/python/quickstart.py 2>&1 | tail -2 | tee -a "$OUT/check5.log"
echo "before (no coarse_weights):" | tee -a "$OUT/check5.log"
PYTHONPATH=$site UDF_CACHE_DIR=/tmp/udf-cache-49w5 $py bench/results/issue49w_h200/quickstart_before.py 2>&1 | tail -1 | tee -a "$OUT/check5.log"

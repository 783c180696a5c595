#!/usr/bin/env bash
# Device call: toolchain_bench's Python rows (cold, an empty cache per
# process) with this tree's wheel (dist/), two rounds, then the Python
# package's GPU tests on it.
set -uo pipefail
py=/opt/torch/.venv/bin/python
mkdir -p "$OUT"
rm -rf /tmp/site-49y && $py -m pip install -q --no-deps --target /tmp/site-49y dist/udf-*cp312*.whl
for round in 1 2; do
  CUDA_CACHE_DISABLE=1 timeout 200 $py bench/toolchain_bench.py --cases python --python-device --python-path /tmp/site-49y \
    --python-udfs metric,filter,builtin+filter --reps 5 --out "$OUT" --tag python_49y_$round 2>&1 | tail -8
done
UDF_PYTHON_DIR=/tmp/site-49y UDF_CACHE_DIR=/tmp/udf-cache-49y PYTHONPATH=/tmp/site-49y \
  timeout 250 $py -m pytest -q -p no:cacheprovider -m gpu python/tests 2>&1 | tail -3 | tee "$OUT/pytest_gpu.log"

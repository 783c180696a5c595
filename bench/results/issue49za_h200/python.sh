#!/usr/bin/env bash
# Device call 2: this tree's wheel (dist/): the Python package's GPU tests
# (an index file loaded with its metric recompiled among them), then toolchain_bench's
# Python rows (cold, an empty cache per process), two rounds.
set -uo pipefail
py=/opt/torch/.venv/bin/python
site=/tmp/site-49za
mkdir -p "$OUT"
rm -rf $site && $py -m pip install -q --no-deps --target $site dist/udf-*cp312*.whl
UDF_PYTHON_DIR=$site UDF_CACHE_DIR=/tmp/udf-cache-49za PYTHONPATH=$site \
  timeout 300 $py -m pytest -q -p no:cacheprovider -m gpu python/tests -rs 2>&1 | tail -30 | tee "$OUT/pytest_gpu.log"
for round in 1 2; do
  CUDA_CACHE_DISABLE=1 timeout 120 $py bench/toolchain_bench.py --cases python --python-device --python-path $site \
    --python-udfs metric,filter,builtin+filter --reps 5 --out "$OUT" --tag python_49za_$round 2>&1 | tail -8
done

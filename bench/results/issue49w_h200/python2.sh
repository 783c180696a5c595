#!/usr/bin/env bash
# Device call: the 10M search times with and without coarse weights (seed 49,
# batch 10k: the recall queries as one batch), then toolchain_bench's Python rows.
set -uo pipefail
py=/opt/torch/.venv/bin/python
site=/tmp/site-49w
[[ -d $site ]] || $py -m pip install -q --no-deps --target "$site" .device/wheel/*.whl
export UDF_PYTHON_DIR=$site UDF_CACHE_DIR=/tmp/udf-cache-49w PYTHONPATH=$site
mkdir -p "$OUT"
timeout 200 $py bench/results/issue49w_h200/coarse_weights.py --seeds 49 --time-reps 7 --json "$OUT/coarse_weights_time.json" 2>&1 \
  | tee "$OUT/coarse_weights_time.log"
CUDA_CACHE_DISABLE=1 timeout 300 $py bench/toolchain_bench.py --cases python --python-device --python-path "$site" \
  --python-udfs metric,filter,builtin+filter --reps 5 --out "$OUT" --tag python_49w 2>&1 | tail -25

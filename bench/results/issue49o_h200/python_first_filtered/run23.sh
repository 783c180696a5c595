#!/bin/bash
# Issue 49 item 5 with pack 1.15: Python's first filtered result, cold and warm (this tree's cp312 wheel), two rounds.
cd "$(dirname "$0")/.."
PY=/opt/torch/.venv/bin/python
W=/tmp/udf_new; rm -rf $W; mkdir -p $W
$PY -m zipfile -e .bench/whl_new/udf-0.1.0-cp312-cp312-manylinux_2_34_x86_64.whl $W; chmod +x $W/udf/bin/*
for round in 1 2; do
  echo "== round $round"
  CUDA_CACHE_DISABLE=1 timeout 250 $PY bench/toolchain_bench.py --cases python --python-device --python-path $W \
    --python-udfs metric,filter,builtin+filter --reps 5 --out $OUT --tag python_filter_p115_r$round 2>&1 | grep "^| "
done

#!/bin/bash
# Issue 49 item 5: Python's first filtered result, cold and warm, with the k 32 bucket's filtered scans
# linked in the background beside the metric's (whl_new) and without (whl_old, 9704e43); a metric alone
# with the new wheel.  Each wheel unpacked into its own folder.
cd "$(dirname "$0")/.."
PY=/opt/torch/.venv/bin/python
for w in old new; do
  W=/tmp/udf_$w; rm -rf $W; mkdir -p $W
  $PY -m zipfile -e .bench/whl_$w/udf-0.1.0-cp312-cp312-manylinux_2_34_x86_64.whl $W; chmod +x $W/udf/bin/*
done
for round in 1 2; do
  for w in old new; do
    udfs=filter,builtin+filter; [[ $w == new && $round == 1 ]] && udfs=metric,filter,builtin+filter
    echo "== round $round wheel $w"
    CUDA_CACHE_DISABLE=1 timeout 250 $PY bench/toolchain_bench.py --cases python --python-device --python-path /tmp/udf_$w \
      --python-udfs $udfs --reps 5 --out $OUT --tag python_filter_${w}_r$round 2>&1 | grep "^| "
  done
done

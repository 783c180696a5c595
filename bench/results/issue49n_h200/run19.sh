#!/bin/bash
# Issue 49 item 5: Python's first filtered result, cold and warm, beside a metric's (this tree's
# cp312 wheel, unpacked), and the bare driver start on the same machine.
cd "$(dirname "$0")/.."
PY=/opt/torch/.venv/bin/python
W=$(mktemp -d)
$PY -m zipfile -e .bench/udf-0.1.0-cp312-cp312-manylinux_2_34_x86_64.whl $W
chmod +x $W/udf/bin/*
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
$PY bench/cuda_start.py --processes 5 2>&1 | tail -3
CUDA_CACHE_DISABLE=1 timeout 420 $PY bench/toolchain_bench.py --cases python --python-device --python-path $W \
  --python-udfs metric,filter,builtin+filter --reps 5 --out $OUT --tag python_filter_h200 2>&1 | tail -22

#!/bin/bash
# The final wheel (optional pruning scans linked after the others): toolchain_bench.py's Python
# rows, then the Python GPU suite (device_suite.sh --part python; .device kept from native.sh).
cd "$(dirname "$0")/../../../.."
s=$(date +%s)
PY=/opt/torch/.venv/bin/python
N=/tmp/udf_final; rm -rf $N; mkdir -p $N $OUT/b
$PY -m zipfile -e .device/wheel/*.whl $N; chmod +x $N/udf/bin/*
CUDA_CACHE_DISABLE=1 timeout 150 $PY bench/toolchain_bench.py --cases python --python-device --python-path $N \
  --python-udfs metric,filter,builtin+filter --reps 5 --out $OUT/b --tag python_final 2>&1 | grep "^| "
echo "bench at $(( $(date +%s) - s )) s"
timeout 400 bash test/gpu/device_suite.sh --part python > $OUT/device_suite_python.log 2>&1
echo "device_suite rc $? at $(( $(date +%s) - s )) s"
grep -E "^===|passed|failed|FAILED|PASSED" $OUT/device_suite_python.log | tail -20
tar -C $OUT -cf $OUT/results.tar b device_suite_python.log && rm -rf $OUT/b

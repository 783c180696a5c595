#!/bin/bash
# toolchain_bench.py's Python rows, alternated: old (HEAD a09d82a's Python files and runtime),
# mid (this tree's Python, per-entry links with the pruning scan linked beside the others),
# new (the final wheel: the pruning scan linked after the others).
cd "$(dirname "$0")/../../../.."
PY=/opt/torch/.venv/bin/python
N=/tmp/v_new; M=/tmp/v_mid; O=/tmp/v_old; rm -rf $N $M $O; mkdir -p $N $OUT/b
$PY -m zipfile -e .device/wheel/*.whl $N; chmod +x $N/udf/bin/*
cp -a $N $M; cp .bench/mid_rt.so $M/udf/lib/libudf_runtime.so.3
cp -a $N $O; tar xf .bench/old_py.tar -C $O; cp .bench/old_rt.so $O/udf/lib/libudf_runtime.so.3
export CUDA_CACHE_DISABLE=1
for round in 1 2; do for v in old mid new; do
  W=/tmp/v_$v; echo "== $v round $round"
  timeout 60 $PY bench/toolchain_bench.py --cases python --python-device --python-path $W --python-udfs metric,filter,builtin+filter \
    --reps 3 --out $OUT/b --tag python_${v}_r$round 2>&1 | grep "^| " | grep cold
done; done
tar -C $OUT -cf $OUT/results.tar b && rm -rf $OUT/b

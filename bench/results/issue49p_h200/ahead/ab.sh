#!/bin/bash
# This tree's wheel (a search waits only for the entries it runs; declared UDFs compile ahead
# once the early start knows the arch) against HEAD a09d82a's Python files and runtime, in the
# same wheel otherwise: first the timeline script, then toolchain_bench.py's Python rows,
# alternated old / new, one new process a row.
cd "$(dirname "$0")/../../../.."
PY=/opt/torch/.venv/bin/python
N=/tmp/udf_new; O=/tmp/udf_old; rm -rf $N $O; mkdir -p $N
$PY -m zipfile -e .bench/whl/*.whl $N; chmod +x $N/udf/bin/*
cp -a $N $O; tar xf .bench/old_py.tar -C $O; cp .bench/old_rt.so $O/udf/lib/libudf_runtime.so.3
export CUDA_CACHE_DISABLE=1; mkdir -p $OUT/b
for round in 1 2; do
  for row in metric filter builtin+filter; do
    for di in "" --no-device-info; do
      for lib in old new; do
        W=$N; [ $lib = old ] && W=$O
        C=$(mktemp -d)
        echo "== $lib $row $di round $round"
        PYTHONPATH=$W UDF_CACHE_DIR=$C UDF_PROFILE_LINK=1 timeout 100 $PY bench/results/issue49p_h200/timeline/timeline.py $row $di 2>&1 | grep -v "^$"
        rm -rf $C
      done
    done
  done
done > $OUT/timeline_ab.log
for round in 1 2; do
  for lib in old new; do
    W=$N; [ $lib = old ] && W=$O
    echo "== toolchain_bench $lib round $round"
    timeout 200 $PY bench/toolchain_bench.py --cases python --python-device --python-path $W \
      --python-udfs metric,filter,builtin+filter --reps 5 --out $OUT/b --tag python_${lib}_r$round 2>&1 | grep "^| "
  done
done
tar -C $OUT -cf $OUT/results.tar b timeline_ab.log && rm -rf $OUT/b $OUT/timeline_ab.log

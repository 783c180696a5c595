#!/bin/bash
# A search waits only for the entries it runs (per-entry background links) against HEAD's
# runtime (whole sets): the same wheel, its libudf_runtime.so.3 swapped, alternated per process.
cd "$(dirname "$0")/../../../.."
PY=/opt/torch/.venv/bin/python
W=/tmp/udf_w; rm -rf $W; mkdir -p $W
$PY -m zipfile -e .bench/whl/*.whl $W; chmod +x $W/udf/bin/*
cp $W/udf/lib/libudf_runtime.so.3 /tmp/new_rt.so; cp .bench/old_rt.so /tmp/old_rt.so
export CUDA_CACHE_DISABLE=1 PYTHONPATH=$W
for round in 1 2 3; do
  for row in metric filter builtin+filter; do
    for di in "" --no-device-info; do
      for lib in old new; do
        cp /tmp/${lib}_rt.so $W/udf/lib/libudf_runtime.so.3
        C=$(mktemp -d)
        echo "== $lib $row $di round $round"
        UDF_CACHE_DIR=$C UDF_PROFILE_LINK=1 timeout 100 $PY bench/results/issue49p_h200/timeline/timeline.py $row $di 2>&1 | grep -v "^$"
        rm -rf $C
      done
    done
  done
done

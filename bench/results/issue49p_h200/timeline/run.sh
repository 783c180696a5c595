#!/bin/bash
# The host's link times (udf-link from the wheel, alone and 4 at once) and the Python timeline.
cd "$(dirname "$0")/../../../.."
PY=/opt/torch/.venv/bin/python
W=/tmp/udf_w; rm -rf $W; mkdir -p $W
$PY -m zipfile -e .bench/whl/*.whl $W; chmod +x $W/udf/bin/*
export CUDA_CACHE_DISABLE=1 PYTHONPATH=$W
T=/tmp/tl; rm -rf $T; mkdir -p $T
$W/udf/bin/udfc examples/weighted_l2.cu --flags-from-first-line --monotone -o $T/wl2.udfa --arch sm_90 || exit 1
$W/udf/bin/udfc examples/filters/tenant.cu --flags-from-first-line -o $T/tenant.udfa --arch sm_90 || exit 1
nproc; lscpu | grep -E "Model name|Thread|Core|Socket|MHz" ; uptime
for j in 1 4 1 4; do echo "== udf-link -j $j"; $W/udf/bin/udf-link $T/wl2.udfa $T/tenant.udfa --arch sm_90 --max-k 32 --no-cache -v -j $j -o $T/m.udfm 2>&1 | grep -E "linked in|link\(s\)|wrappers"; done
for round in 1 2; do
  for row in metric filter builtin+filter; do
    for di in "" --no-device-info; do
      C=$(mktemp -d); echo "== $row $di round $round"
      UDF_CACHE_DIR=$C UDF_PROFILE_LINK=1 timeout 100 $PY bench/results/issue49p_h200/timeline/timeline.py $row $di 2>&1 | grep -v "^$"
      rm -rf $C
    done
  done
done

#!/bin/bash
# Cold first results with (new) and without (old: the pack manifest's filtered_prune taken out, so no
# filtered pruning twin is planned) the filtered pruning twins, one wheel, alternated, two rounds.
cd "$(dirname "$0")/../../../.."
PY=/opt/torch/.venv/bin/python
N=/tmp/v_new; O=/tmp/v_old; rm -rf $N $O; mkdir -p $N $OUT/b
$PY -m zipfile -e .device/wheel/*.whl $N; chmod +x $N/udf/bin/*
cp -a $N $O
J=$(find $O -name ivf_flat_v1.json | head -1)
$PY - "$J" <<'P'
import json, sys
m = json.load(open(sys.argv[1]))
n = 0
for v in m["scan_variants"]:
    if v.pop("filtered_prune", None):
        v.pop("filtered_min_blocks_per_sm", None); n += 1
m["version"]["minor"] = 15
json.dump(m, open(sys.argv[1], "w"), indent=1)
print("old: filtered_prune taken from", n, "variants")
P
export CUDA_CACHE_DISABLE=1
for round in 1 2; do for v in old new; do
  echo "== $v round $round"
  timeout 80 $PY bench/toolchain_bench.py --cases python --python-device --python-path /tmp/v_$v --python-udfs metric,filter,builtin+filter \
    --reps 3 --out $OUT/b --tag python_${v}_r$round 2>&1 | grep "^| " | grep cold
done; done
tar -C $OUT -cf $OUT/results_ab.tar b && rm -rf $OUT/b

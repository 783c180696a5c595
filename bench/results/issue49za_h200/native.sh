#!/usr/bin/env bash
# Device call 1: index files bound to their metric by symbol, and the pack
# compiled in pinned sources.  This tree's staged build (.bench/dev.tar.xz,
# test/gpu/stage_device.sh --no-wheel): udf-run loads an index file with the
# same metric compiled again for other archs (test/lit/udf-run/devices-gpu.test's
# new lines, by hand: the GPU machine has no FileCheck); search_bench (1M x 128
# overlap, P32, k 10, 50 repetitions); test/gpu/device_suite.sh --part native.
# Everything goes to $OUT.
set -uo pipefail
[[ -d .device ]] || tar -xJf .bench/dev.tar.xz
mkdir -p "$OUT"
py=/opt/torch/.venv/bin/python
B=.device/bin t=/tmp/reload
rm -rf $t && mkdir -p $t
{
  echo "=== udf-run: an index file loads with its metric compiled again"
  $py test/lit/udf-run/Inputs/make-vectors.py $t
  $B/udfc examples/weighted_l2.cu -o $t/wl2.udfa --arch sm_80 --capture 'weights:f32[]' &&
  $B/udf-link $t/wl2.udfa -o $t/wl2.udfm --arch sm_80,sm_90,sm_100 &&
  $B/udfc examples/weighted_l2.cu -o $t/again.udfa --arch sm_80,sm_90 --capture 'weights:f32[]' &&
  $B/udf-link $t/again.udfa -o $t/again.udfm --arch sm_90 --max-k 32 || echo "compile/link FAILED"
  $B/udfc --inspect $t/wl2.udfa | grep '"cache_key"' | sed 's/^/first:  /'
  $B/udfc --inspect $t/again.udfa | grep '"cache_key"' | sed 's/^/again:  /'
  a=(--queries $t/q.fvecs --capture weights=$t/w.npy --n-probes 3 --k 5)
  $B/udf-run $t/wl2.udfm --dataset $t/base.fvecs "${a[@]}" --n-lists 8 --out $t/one.npy --index $t/i.udfi --save-index 2>&1 | tail -2
  $B/udf-run $t/again.udfm "${a[@]}" --index $t/i.udfi --load-index --out $t/again.npy 2>&1 | tail -2
  $B/udf-run $t/again.udfm "${a[@]}" --index $t/i.udfi --load-index --devices 0,0 --out $t/again-two.npy 2>&1 | tail -2
  ok=1
  for f in again again-two; do
    cmp $t/one.npy $t/$f.npy && cmp $t/one.distances.npy $t/$f.distances.npy && echo "$f: the same ids and distances" || ok=0
  done
  ((ok)) && echo "udf-run check: ok" || echo "udf-run check: FAILED"
} 2>&1 | tee "$OUT/udf_run.log"
echo "=== search_bench"
timeout 150 .device/bin/search_bench .device/modules/bench.udfm --rows 1000000 --dim 128 --lists 1024 --data overlap \
  --probes 32 --ks 10 --reps 50 --elem f32 --metrics l2,weighted_l2 --batches 1,100,10000 --json "$OUT/search_bench.json" 2>&1 \
  | tee "$OUT/search_bench.md" | grep -E '^\| overlap|build' | head -20
echo "=== native suite"
timeout 430 test/gpu/device_suite.sh --part native 2>&1 | tee "$OUT/native_suite.log" | grep -E "^=== .*: (ok|FAILED)|passed|FAILED" | tail -30

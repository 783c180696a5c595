#!/usr/bin/env bash
# Device call: the native GPU suite on this tree's .device (carried as
# .bench/dev.tar.xz), then search_bench with the previous runtime
# (.bench/old.tar.xz: a665a2c's libudf_runtime and search_bench, the native code
# before the coarse weights) and this one, alternated, on the same data.
set -uo pipefail
tar -xJf .bench/dev.tar.xz && tar -xJf .bench/old.tar.xz -C .bench
mkdir -p "$OUT"
bash test/gpu/device_suite.sh --part native 2>&1 | tee "$OUT/native_suite.log" | grep -E "^=== |passed|FAILED|tests ran" | tail -40
# udf-run --coarse-weights end to end (test/lit/udf-run/gpu.test's steps, without lit).
v=$(mktemp -d) && /opt/torch/.venv/bin/python test/lit/udf-run/Inputs/make-vectors.py "$v" &&
  .device/bin/udf-run .device/modules/udfs.udfm --metric weighted_l2 --dataset "$v/base.fvecs" --queries "$v/q.fvecs" \
    --capture weights="$v/w.npy" --coarse-weights "$v/w.npy" --n-lists 8 --n-probes 8 --k 5 --index "$v/cw.udfi" \
    --save-index --out "$v/cw.npy" --check -q 2>&1 | tee "$OUT/udf_run_coarse_weights.log" &&
  /opt/torch/.venv/bin/python -c "import struct, sys; b = open(sys.argv[1], 'rb').read(); assert struct.unpack_from('<II', b, 8) == (1, 1); \
assert struct.unpack_from('<I', b, 28)[0] & 0x200; print('udf-run coarse weights file: ok')" "$v/cw.udfi"
args=(--rows 1000000 --dim 128 --lists 1024 --data overlap --elem f32 --metrics l2,weighted_l2 --batches 1,100,10000
      --probes 32 --ks 10 --reps 50)
for round in 1 2; do
  for who in old new; do
    bin=.device/bin/search_bench; [[ $who == old ]] && bin=.bench/old/bin/search_bench
    timeout 100 "$bin" .device/modules/bench.udfm "${args[@]}" --json "$OUT/search_${who}_$round.json" \
      > "$OUT/search_${who}_$round.txt" 2>&1 || echo "search_bench $who $round: rc $?"
  done
done
grep -h "| overlap" "$OUT"/search_*_*.txt | head -40

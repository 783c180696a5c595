#!/usr/bin/env bash
# Device call 3: this tree staged by test/gpu/stage_device.sh --no-wheel
# (.bench/dev.tar.xz): search_bench 1M x 128 overlap, P32, k 10 (the linked
# code is unchanged: a check), then `device_suite.sh --part native`.
set -uo pipefail
mkdir -p "$OUT"
tar -xJf .bench/dev.tar.xz
echo "=== search_bench"
timeout 120 .device/bin/search_bench .device/modules/bench.udfm --rows 1000000 --dim 128 --lists 1024 --data overlap \
  --probes 32 --ks 10 --reps 30 --elem f32 --metrics l2,weighted_l2 --batches 1,10000 --json "$OUT/search_bench.json" 2>&1 \
  | tee "$OUT/search_bench.md" | grep -E '^\| overlap|build' | head -20
echo "=== native suite"
timeout 440 test/gpu/device_suite.sh --part native 2>&1 | tee "$OUT/native_suite.log" | grep -E "^=== .*: (ok|FAILED)|passed|FAILED" | tail -30

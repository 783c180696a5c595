#!/usr/bin/env bash
# Host arrays against device arrays at batch 10k (1M x 128, 1024 lists, built-in L2), and the
# runtime's host copy workers at 7 (base), 15 and 3 at most, alternated processes.
set -u
cd "$(dirname "$0")/.."
rm -rf .device; tar xJf .bench/dev.tar.xz
mkdir -p .bench/lib_base && cp .device/lib/libudf_runtime.so.3 .bench/lib_base/
for w in 15 3; do xz -dkf .bench/lib_w$w/libudf_runtime.so.3.xz; done
s=$(date +%s)
B=.device/bin/search_bench M=.device/modules/bench.udfm
for r in 1 2; do for v in base w15 w3; do
  LD_LIBRARY_PATH=$PWD/.bench/lib_$v timeout 100 $B $M --rows 1000000 --lists 1024 --data clustered --elem f32 --metrics l2 --batches 1000,10000 --probes 32 --ks 10 --reps 30 --json $OUT/${v}_$r.json > $OUT/${v}_$r.md 2>&1
  echo "== $v $r rc $? at $(( $(date +%s) - s )) s"; grep -E "^\| clustered \| f32 \| l2" $OUT/${v}_$r.md | awk -F'|' '{print $4, $5, "median", $8, "p10", $9, "coarse", $13, "scan", $15}'
done; done

#!/usr/bin/env bash
# Issue 33: k 100 (the block-merge scans), libA (073379f) / lib (632f89a), overlap weighted L2 (bench_plain.udfm, every k bucket): times and results byte for byte.
set -u
[[ -d .device ]] || { tar xJf .devpack/dev.tar.xz; }
R=/tmp/r64; mkdir -p $R
c=(--rows 1000000 --lists 1024 --elem f32 --spread 0.92 --probes 32,128 --ks 100 --batches 1,100,10000 --data overlap --metrics weighted_l2)
for l in A B; do LD_LIBRARY_PATH=$PWD/.device/lib${l/B/} timeout 120 .device/bin/search_bench .device/modules/bench_plain.udfm "${c[@]}" --dump-results /tmp/res/k100_$l > $R/k100_$l.txt 2>&1; echo "k100 $l rc=$? $SECONDS"; done
n=0; bad=0; for f in /tmp/res/k100_A/*.npy; do n=$((n+1)); cmp -s $f /tmp/res/k100_B/$(basename $f) || { bad=$((bad+1)); echo "DIFF $(basename $f)"; }; done; echo "cmp k100 B vs A: $n files, $bad differ" | tee $R/cmp.txt
grep "| 100 |" $R/k100_*.txt
tar cf - -C /tmp r64 | xz -1 > $OUT/r64.tar.xz

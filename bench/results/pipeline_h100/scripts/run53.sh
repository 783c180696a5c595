#!/usr/bin/env bash
# Issue 33: GPU times of the coarse-stage kernels at batch 10k (the last search's launches), ncu gpu__time_duration.
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
R=/tmp/r53; mkdir -p $R
NCU=/usr/local/cuda/bin/ncu
c=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --batches 10000 --reps 1)
for p in 32 128; do
LD_LIBRARY_PATH=$PWD/.device/lib timeout 250 $NCU --metrics gpu__time_duration.sum --kernel-name regex:"coarse|select|sched|merge|convert" --csv --print-units base \
  .device/bin/search_bench .device/v/s45base/plain.udfm "${c[@]}" --probes $p --data overlap --metrics weighted_l2 > $R/ncu_p$p.csv 2> $R/err_p$p.txt; echo "ncu p$p rc=$? $SECONDS"
grep -c gpu__time $R/ncu_p$p.csv
done
tar cf - -C /tmp r53 | xz -1 > $OUT/r53.tar.xz

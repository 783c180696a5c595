#!/usr/bin/env bash
# Issue 33: the coarse-stage kernels of lib (new coarse kernel) at batch 10k P32: durations, then a details profile of one coarse_keys and one select launch.
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
R=/tmp/r55; mkdir -p $R
NCU=/usr/local/cuda/bin/ncu
c=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --batches 10000 --reps 1 --probes 32 --data overlap --metrics weighted_l2)
LD_LIBRARY_PATH=$PWD/.device/lib timeout 200 $NCU --metrics gpu__time_duration.sum --kernel-name regex:"coarse|select" --csv --print-units base \
  .device/bin/search_bench .device/v/s45base/plain.udfm "${c[@]}" > $R/dur.csv 2> $R/err.txt; echo "ncu rc=$? $SECONDS"
n=$(grep -c '"udf_ivf_index_v1_coarse_keys"' $R/dur.csv); echo "coarse_keys launches $n"
LD_LIBRARY_PATH=$PWD/.device/lib timeout 200 $NCU --kernel-name regex:"coarse_keys$|select$" --launch-skip $((2*n-4)) --launch-count 2 --set full \
  -o $R/full -f .device/bin/search_bench .device/v/s45base/plain.udfm "${c[@]}" > $R/full_run.txt 2>&1; echo "ncu full rc=$? $SECONDS"
$NCU -i $R/full.ncu-rep --page details > $R/full_details.txt 2>&1
$NCU -i $R/full.ncu-rep --page source --csv --print-source sass > $R/full_sass.csv 2>&1
rm -f $R/full.ncu-rep
tar cf - -C /tmp r55 | xz -1 > $OUT/r55.tar.xz

#!/usr/bin/env bash
# Issue 33: AWAKE (host pool workers spinning): libB7 with UDF_AB_PREWAKE (the scan's end wakes the pool for the results' copy) and UDF_AB_LINGER_US (workers stay awake after a job): V0 0/0, V1 prewake, V2 prewake + linger 1000 us, V3 prewake + linger 200 us; 3 alternated rounds; bits V2 vs V0.
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
R=/tmp/r61; mkdir -p $R
c=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --probes 32,128 --batches 1000,10000)
sb() { UDF_AB_PREWAKE=$2 UDF_AB_LINGER_US=$3 LD_LIBRARY_PATH=$PWD/.device/libB7 timeout 100 .device/bin/search_bench .device/v/s45base/plain.udfm "${c[@]}" --data overlap --metrics weighted_l2 --dump-results /tmp/res/$1 > $R/$1.txt 2>&1; echo "$1 rc=$? $SECONDS"; }
for round in 1 2 3; do sb ovp_V0_$round 0 0; sb ovp_V1_$round 1 0; sb ovp_V2_$round 1 1000; sb ovp_V3_$round 1 200; done
for kind in ovp_%s_1 ovp_%s_2; do A=/tmp/res/$(printf $kind V0); B=/tmp/res/$(printf $kind V2)
  n=0; bad=0; for f in $A/*.npy; do n=$((n+1)); cmp -s $f $B/$(basename $f) || { bad=$((bad+1)); echo "DIFF $(basename $f)"; }; done
  echo "cmp $(printf $kind V2) vs V0: $n files, $bad differ"; done | tee $R/cmp.txt
tar cf - -C /tmp r61 | xz -1 > $OUT/r61.tar.xz

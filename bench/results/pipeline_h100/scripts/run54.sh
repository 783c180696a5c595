#!/usr/bin/env bash
# Issue 33: the host copy pool + the coarse kernel read 16 bytes a load, tile prefetch: libA (073379f) / lib (pool), 3 alternated rounds; bits compared.
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
R=/tmp/r54; mkdir -p $R
c=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --probes 32,128 --batches 1,100,1000,10000)
sb() { LD_LIBRARY_PATH=$PWD/.device/$2 timeout 100 .device/bin/search_bench .device/v/s45base/$3.udfm "${c[@]}" --data $4 --metrics $5 --dump-results /tmp/res/$1 > $R/$1.txt 2>&1; echo "$1 rc=$? $SECONDS"; }
for round in 1 2 3; do sb ovp_A_$round libA plain overlap weighted_l2; sb ovp_B_$round lib plain overlap weighted_l2; done
sb clm_A_1 libA mono clustered l2,weighted_l2; sb clm_B_1 lib mono clustered l2,weighted_l2
for kind in ovp_%s_1 ovp_%s_2 ovp_%s_3 clm_%s_1; do A=/tmp/res/$(printf $kind A); B=/tmp/res/$(printf $kind B)
  n=0; bad=0; for f in $A/*.npy; do n=$((n+1)); cmp -s $f $B/$(basename $f) || { bad=$((bad+1)); echo "DIFF $(basename $f)"; }; done
  echo "cmp $(printf $kind B) vs A: $n files, $bad differ"; done | tee $R/cmp.txt
tar cf - -C /tmp r54 | xz -1 > $OUT/r54.tar.xz

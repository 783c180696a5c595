#!/usr/bin/env bash
# Issue 33: libA (073379f) / libB1 (host pool + coarse kernel) / libB4 (+ a first slice of 128 KB), 3 alternated rounds, batches 1000 and 10k; bits compared.
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
R=/tmp/r58; mkdir -p $R
c=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --probes 32,128 --batches 1000,10000)
sb() { LD_LIBRARY_PATH=$PWD/.device/$2 timeout 100 .device/bin/search_bench .device/v/s45base/$3.udfm "${c[@]}" --data $4 --metrics $5 --dump-results /tmp/res/$1 > $R/$1.txt 2>&1; echo "$1 rc=$? $SECONDS"; }
for round in 1 2 3; do for l in A B1 B4; do sb ovp_${l}_$round lib$l plain overlap weighted_l2; done; done
for kind in ovp_%s_1 ovp_%s_2 ovp_%s_3; do for v in B1 B4; do A=/tmp/res/$(printf $kind A); B=/tmp/res/$(printf $kind $v); [[ -d $B ]] || continue
  n=0; bad=0; for f in $A/*.npy; do n=$((n+1)); cmp -s $f $B/$(basename $f) || { bad=$((bad+1)); echo "DIFF $(basename $f)"; }; done
  echo "cmp $(printf $kind $v) vs A: $n files, $bad differ"; done; done | tee $R/cmp.txt
tar cf - -C /tmp r58 | xz -1 > $OUT/r58.tar.xz

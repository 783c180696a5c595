#!/usr/bin/env bash
# Issue 33: libB1 (host pool + coarse kernel) / libB5 (+ block histograms in the schedule's count and scatter), 3 alternated rounds (overlap plain), one of clustered monotone; bits compared; schedule kernel durations of B5.
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
R=/tmp/r59; mkdir -p $R
c=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --probes 32,128 --batches 1000,10000)
sb() { LD_LIBRARY_PATH=$PWD/.device/$2 timeout 100 .device/bin/search_bench .device/v/s45base/$3.udfm "${c[@]}" --data $4 --metrics $5 --dump-results /tmp/res/$1 > $R/$1.txt 2>&1; echo "$1 rc=$? $SECONDS"; }
for round in 1 2 3; do for l in B1 B5; do sb ovp_${l}_$round lib$l plain overlap weighted_l2; done; done
for l in B1 B5; do sb clm_${l}_1 lib$l mono clustered l2,weighted_l2; done
for kind in ovp_%s_1 ovp_%s_2 ovp_%s_3 clm_%s_1; do A=/tmp/res/$(printf $kind B1); B=/tmp/res/$(printf $kind B5)
  n=0; bad=0; for f in $A/*.npy; do n=$((n+1)); cmp -s $f $B/$(basename $f) || { bad=$((bad+1)); echo "DIFF $(basename $f)"; }; done
  echo "cmp $(printf $kind B5) vs B1: $n files, $bad differ"; done | tee $R/cmp.txt
LD_LIBRARY_PATH=$PWD/.device/libB5 timeout 100 /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum --kernel-name regex:"sched" --csv --print-units base \
  .device/bin/search_bench .device/v/s45base/plain.udfm --rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --batches 10000 --reps 1 --probes 32,128 --data overlap --metrics weighted_l2 > $R/dur_B5.csv 2>/dev/null; echo "ncu rc=$? $SECONDS"
tar cf - -C /tmp r59 | xz -1 > $OUT/r59.tar.xz

#!/usr/bin/env bash
# Issue 33: libA (073379f) / libB1 (host copy pool + coarse kernel 16-byte loads) / libB2 (+ bounded select in the batch kernel) / libB3 (+ coarse kernel at 8 blocks an SM), 3 alternated rounds; bits compared; then the coarse kernels' durations of B2 and B3.
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
R=/tmp/r56; mkdir -p $R
c=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --probes 32,128 --batches 1,100,1000,10000)
sb() { LD_LIBRARY_PATH=$PWD/.device/$2 timeout 100 .device/bin/search_bench .device/v/s45base/$3.udfm "${c[@]}" --data $4 --metrics $5 --dump-results /tmp/res/$1 > $R/$1.txt 2>&1; echo "$1 rc=$? $SECONDS"; }
for round in 1 2 3; do for l in A B1 B2 B3; do sb ovp_${l}_$round lib$l plain overlap weighted_l2; done; done
for l in A B2; do sb clm_${l}_1 lib$l mono clustered l2,weighted_l2; done
for kind in ovp_%s_1 ovp_%s_2 ovp_%s_3 clm_%s_1; do for v in B1 B2 B3; do A=/tmp/res/$(printf $kind A); B=/tmp/res/$(printf $kind $v); [[ -d $B ]] || continue
  n=0; bad=0; for f in $A/*.npy; do n=$((n+1)); cmp -s $f $B/$(basename $f) || { bad=$((bad+1)); echo "DIFF $(basename $f)"; }; done
  echo "cmp $(printf $kind $v) vs A: $n files, $bad differ"; done; done | tee $R/cmp.txt
NCU=/usr/local/cuda/bin/ncu
for l in B2 B3; do
LD_LIBRARY_PATH=$PWD/.device/lib$l timeout 100 $NCU --metrics gpu__time_duration.sum --kernel-name regex:"coarse|select" --csv --print-units base \
  .device/bin/search_bench .device/v/s45base/plain.udfm --rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --batches 10000 --reps 1 --probes 32,128 --data overlap --metrics weighted_l2 > $R/dur_$l.csv 2>/dev/null; echo "ncu $l rc=$? $SECONDS"
done
tar cf - -C /tmp r56 | xz -1 > $OUT/r56.tar.xz

#!/usr/bin/env bash
# Issue 33: 16 queries an item (--qpi 16) against the automatic 12 at batch 10k, this session's runtime (68cf8db): overlap plain 3 alternated rounds, clustered monotone and uniform plain one each; bits compared.
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
R=/tmp/r62; mkdir -p $R
c=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --probes 32,128 --batches 10000)
sb() { local n=$1 q=$2 m=$3 d=$4 me=$5; shift 5; LD_LIBRARY_PATH=$PWD/.device/lib timeout 100 .device/bin/search_bench .device/v/s45base/$m.udfm "${c[@]}" --data $d --metrics $me $q --dump-results /tmp/res/$n > $R/$n.txt 2>&1; echo "$n rc=$? $SECONDS"; }
for round in 1 2 3; do sb ovp_auto_$round "" plain overlap weighted_l2; sb ovp_q16_$round "--qpi 16" plain overlap weighted_l2; done
sb clm_auto_1 "" mono clustered l2,weighted_l2; sb clm_q16_1 "--qpi 16" mono clustered l2,weighted_l2
sb unp_auto_1 "" plain uniform weighted_l2; sb unp_q16_1 "--qpi 16" plain uniform weighted_l2
sb ovm_auto_1 "" mono overlap l2,weighted_l2; sb ovm_q16_1 "--qpi 16" mono overlap l2,weighted_l2
for kind in ovp_%s_1 clm_%s_1 unp_%s_1 ovm_%s_1; do A=/tmp/res/$(printf $kind auto); B=/tmp/res/$(printf $kind q16)
  n=0; bad=0; for f in $A/*.npy; do n=$((n+1)); cmp -s $f $B/$(basename $f) || { bad=$((bad+1)); echo "DIFF $(basename $f)"; }; done
  echo "cmp $(printf $kind q16) vs auto: $n files, $bad differ"; done | tee $R/cmp.txt
tar cf - -C /tmp r62 | xz -1 > $OUT/r62.tar.xz

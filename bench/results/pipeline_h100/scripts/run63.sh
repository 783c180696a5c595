#!/usr/bin/env bash
# Issue 33, this session's final state (632f89a): the GPU native suite, then libA (073379f) / lib (632f89a) alternated (overlap plain 2 rounds; overlap monotone, clustered monotone, uniform plain one each; k 100 overlap one), results byte for byte.
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
timeout 330 bash test/gpu/device_suite.sh --part native > $OUT/suite.txt 2>&1; echo "suite rc=$? $((SECONDS-t0))s"
grep -E "^=== .*: |PASSED|FAILED|tests ran" $OUT/suite.txt | head -40
R=/tmp/r63; mkdir -p $R
c=(--rows 1000000 --lists 1024 --elem f32 --spread 0.92 --probes 32,128)
sb() { local n=$1 l=$2 m=$3 d=$4 me=$5; shift 5; LD_LIBRARY_PATH=$PWD/.device/$l timeout 100 .device/bin/search_bench .device/v/s45base/$m.udfm "${c[@]}" --data $d --metrics $me "$@" --dump-results /tmp/res/$n > $R/$n.txt 2>&1; echo "$n rc=$? $SECONDS"; }
for round in 1 2; do sb ovp_A_$round libA plain overlap weighted_l2 --ks 10 --batches 1,100,1000,10000; sb ovp_B_$round lib plain overlap weighted_l2 --ks 10 --batches 1,100,1000,10000; done
for l in A B; do sb ovm_${l}_1 lib${l/B/} mono overlap l2,weighted_l2 --ks 10 --batches 100,10000; done
for l in A B; do sb clm_${l}_1 lib${l/B/} mono clustered l2,weighted_l2 --ks 10 --batches 100,10000; done
for l in A B; do sb unp_${l}_1 lib${l/B/} plain uniform weighted_l2 --ks 10 --batches 100,10000; done
for l in A B; do sb k100_${l}_1 lib${l/B/} plain overlap weighted_l2 --ks 100 --batches 100,10000; done
for kind in ovp_%s_1 ovp_%s_2 ovm_%s_1 clm_%s_1 unp_%s_1 k100_%s_1; do A=/tmp/res/$(printf $kind A); B=/tmp/res/$(printf $kind B)
  n=0; bad=0; for f in $A/*.npy; do n=$((n+1)); cmp -s $f $B/$(basename $f) || { bad=$((bad+1)); echo "DIFF $(basename $f)"; }; done
  echo "cmp $(printf $kind B) vs A: $n files, $bad differ"; done | tee $R/cmp.txt
tar cf - -C /tmp r63 | xz -1 > $OUT/r63.tar.xz

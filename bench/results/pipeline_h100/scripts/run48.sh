#!/usr/bin/env bash
# Issue 33: capture 0 staged in shared memory (hack: dim 128 f32) smemw3 (72 regs) and smemw3b8 (64 regs, 8 blocks) against s45base, overlap, 2 rounds; bits compared.
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R=/tmp/r48; mkdir -p $R
c=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --probes 32,128 --batches 100,10000)
for round in 1 2; do for v in s45base smemw3 smemw3b8; do
  timeout 100 .device/bin/search_bench .device/v/$v/plain.udfm "${c[@]}" --data overlap --metrics weighted_l2 --dump-results /tmp/res/ovp_${v}_$round > $R/ovp_${v}_$round.txt 2>&1; echo "ovp $v $round rc=$? $SECONDS"
done; done
for v in s45base smemw3; do
  timeout 100 .device/bin/search_bench .device/v/$v/plain.udfm "${c[@]}" --data uniform --metrics weighted_l2 --dump-results /tmp/res/unp_${v}_1 > $R/unp_${v}_1.txt 2>&1; echo "unp $v rc=$? $SECONDS"
done
for kind in ovp_%s_1 ovp_%s_2 unp_%s_1; do for v in smemw3 smemw3b8; do
  A=/tmp/res/$(printf $kind s45base); B=/tmp/res/$(printf $kind $v); [[ -d $B ]] || continue
  n=0; bad=0; for f in $A/*.npy; do n=$((n+1)); cmp -s $f $B/$(basename $f) || { bad=$((bad+1)); echo "DIFF $(basename $f)"; }; done
  echo "cmp $(printf $kind $v) vs base: $n files, $bad differ"
done; done | tee $R/cmp.txt
tar cf - -C /tmp r48 | xz -1 > $OUT/r48.tar.xz

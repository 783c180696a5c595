#!/usr/bin/env bash
# Issue 33: host-side trace of batch-10k searches (libT = pool + coarse kernel + a temporary trace).
set -u
rm -rf .device; tar xJf .devpack/dev.tar.xz
R=/tmp/r57; mkdir -p $R
c=(--rows 1000000 --lists 1024 --elem f32 --ks 10 --spread 0.92 --probes 32,128 --batches 10000)
UDF_TRACE_HOST=1 LD_LIBRARY_PATH=$PWD/.device/libT timeout 100 .device/bin/search_bench .device/v/s45base/plain.udfm "${c[@]}" --data overlap --metrics weighted_l2 > $R/t.txt 2> $R/trace.txt; echo "rc=$?"
grep -c TRACE $R/trace.txt; grep TRACE $R/trace.txt | tail -6; grep "| 10000 |" $R/t.txt
tar cf - -C /tmp r57 | xz -1 > $OUT/r57.tar.xz

#!/bin/bash
# Exact search's new tiling (16 to 1024 tiles, rows whole pairs of steps): the exact GPU tests on this
# tree's runtime, then the exact-search bench with HEAD's runtime (lib) and this tree's (lib_new),
# alternated process by process, the shipped kernel pack's module.
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
tmp=$(mktemp -d)
for t in runtime_exact_test runtime_device_array_test; do
  UDF_TEST_MODULE_DIR=$PWD/.device/modules UDF_CACHE_DIR=$tmp/cache-$t timeout 240 .device/bin/$t --gtest_brief=1 > $OUT/$t.log 2>&1
  echo "$t rc $?"; tail -3 $OUT/$t.log
done
cd .bench
for pass in 1 2; do
  for lib in lib lib_new; do
    echo "== pass $pass $lib"
    LD_LIBRARY_PATH=$PWD/$lib timeout 150 bin/exact_search_bench mod/exact_fin.udfm --batches 10000,5000,1000,100,1 --reps 5 --rounds 1 \
      --metrics weighted_l2:3,l1:2,linf:2 2>/dev/null | grep "^| [wl]"
  done
done

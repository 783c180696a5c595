#!/bin/bash
# The fold with each half's first query chunk read before the copy wait (y1: this tree; k2: the same for
# whole halves only) against the shipped fold (fin), alternated in one process, two rounds, with refine;
# then runtime_exact_test on this tree's pack (y1).
cd "$(dirname "$0")/.."
(while true; do nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader; sleep 0.5; done) > $OUT/clocks23.txt 2>&1 &
CL=$!
cd .bench && LD_LIBRARY_PATH=$PWD/lib timeout 150 bin/exact_search_bench mod/exact_fin.udfm,mod/exact_y1.udfm,mod/exact_k2.udfm \
  --batches 10000,100 --reps 5 --rounds 2 --metrics weighted_l2:3,l1:2,linf:2 --refine 256 > $OUT/ab23.md 2> $OUT/ab23.log
echo "bench rc $?"; kill $CL; cd ..
cat $OUT/ab23.md | grep "^| "
tar xJf .bench/dev.tar.xz
UDF_TEST_MODULE_DIR=$PWD/.device/modules UDF_CACHE_DIR=$(mktemp -d)/c timeout 200 .device/bin/runtime_exact_test --gtest_brief=1 > $OUT/runtime_exact_test_y1.log 2>&1
echo "runtime_exact_test rc $?"; tail -3 $OUT/runtime_exact_test_y1.log

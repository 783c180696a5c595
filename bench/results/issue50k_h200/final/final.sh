#!/bin/bash
# Issue 50, the two-group tiled fold: runtime_exact_test on this tree's build, then the exact-search A/B
# (HEAD's pack against this tree's, the same runtime), three rounds.
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz  # the exact test, its library, pack, artifacts and builtin.udfm
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
tmp=$(mktemp -d)
UDF_TEST_MODULE_DIR=$PWD/.device/modules UDF_CACHE_DIR=$tmp/udf-exact-cache timeout 300 .device/bin/runtime_exact_test --gtest_brief=1 > $OUT/runtime_exact_test.log 2>&1
echo "runtime_exact_test rc $?"; tail -4 $OUT/runtime_exact_test.log
(while true; do nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader; sleep 0.5; done) > $OUT/clocks.txt 2>&1 &
CL=$!
cd .bench && LD_LIBRARY_PATH=$PWD/lib timeout 200 bin/exact_search_bench mod/exact_old.udfm,mod/exact_fin.udfm --batches 1,100,10000 --reps 5 --rounds 3 \
  --metrics weighted_l2:3,l1:2,linf:2 > $OUT/exact_ab_final.md 2> $OUT/exact_ab_final.log; echo "bench rc $?"
kill $CL
cat $OUT/exact_ab_final.md
sort $OUT/clocks.txt | uniq -c | sort -rn | head -3

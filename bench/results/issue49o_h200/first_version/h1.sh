# Filtered grouped folds: the GPU tests with filters, then old/new filtered modules alternated (search_bench).
cd "$(dirname "$0")/.."
s=$(date +%s)
tar xJf .bench/dev.tar.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=$OUT/w; mkdir -p $W
UDF_TEST_MODULE_DIR=$PWD/.device/modules UDF_CACHE_DIR=$(mktemp -d) timeout 300 .device/bin/runtime_gpu_test --gtest_brief=1 --gtest_filter='*Filter*:*Filtered*' > $W/runtime_gpu_test_filters.log 2>&1
echo "runtime_gpu_test filters rc $? at $(( $(date +%s) - s )) s"; tail -3 $W/runtime_gpu_test_filters.log
UDF_TEST_MODULE_DIR=$PWD/.device/modules timeout 200 .device/bin/runtime_gpu_v2_test --gtest_brief=1 --gtest_filter='*Filter*' > $W/runtime_gpu_v2_test_filters.log 2>&1
echo "runtime_gpu_v2_test filters rc $?"; tail -2 $W/runtime_gpu_v2_test_filters.log
B=.device/bin/search_bench
F="--filters none,query_group:n_groups=2,odd_ids --metrics weighted_l2 --elem f32 --probes 32 --ks 10"
for r in 1 2; do for v in old new; do
  timeout 120 $B .bench/mod/bench_filter_$v.udfm --rows 1000000 --lists 1024 --data overlap --batches 100,10000 --reps 20 $F \
    --dump-results $W/res_1m_${v}_$r --json $W/1m_${v}_$r.json > $W/1m_${v}_$r.md 2> $W/1m_${v}_$r.err
  echo "== 1m $v $r rc $? at $(( $(date +%s) - s )) s"; grep "| overlap | f32 | weighted" $W/1m_${v}_$r.md | grep -v "k-means\|build" | awk -F'|' '{print $4, $5, $8, $12, $15}' | tr '\n' ';'; echo
done; done
for v in old new; do
  timeout 150 $B .bench/mod/bench_filter_$v.udfm --rows 20000000 --lists 4096 --data clustered --batches 10000 --reps 20 $F \
    --json $W/20m_$v.json > $W/20m_$v.md 2> $W/20m_$v.err
  echo "== 20m $v rc $? at $(( $(date +%s) - s )) s"; grep "| clustered | f32 | weighted" $W/20m_$v.md | grep -v "k-means\|build" | awk -F'|' '{print $4, $5, $8, $12, $15}' | tr '\n' ';'; echo
done
for r in 1 2; do d=$(diff -rq $W/res_1m_old_$r $W/res_1m_new_$r | wc -l); echo "round $r: $(ls $W/res_1m_new_$r | wc -l) result files, $d differ old/new"; done
rm -rf $W/res_1m_*_2
tar czf $OUT/h1.tgz -C $OUT w && rm -rf $W

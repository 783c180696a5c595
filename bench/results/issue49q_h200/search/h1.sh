# Filtered scans prune (pack 1.16): the GPU tests it touches, then search_bench --filters with a module
# linked from HEAD's pack (old: no filtered pruning twins) and this tree's (new), alternated processes.
cd "$(dirname "$0")/../../../.."
s=$(date +%s)
tar xJf .bench/dev.tar.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=$OUT/w; mkdir -p $W
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
export UDF_TEST_MODULE_DIR=$PWD/.device/modules
timeout 200 .device/bin/runtime_gpu_test --gtest_filter='*Prune*:*OnDemand*:*Filter*:*RuntimeLink*:*QueryBound*' > $W/gtest.log 2>&1
echo "gtest rc $? at $(( $(date +%s) - s )) s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED  \]" $W/gtest.log | tail -12
B=.device/bin/search_bench
F="--filters none,query_group:n_groups=2,query_group:n_groups=16,odd_ids --metrics weighted_l2 --elem f32 --probes 32 --ks 10"
for r in 1 2; do for v in old new; do
  P=""; [[ $v == new ]] && P="--testing-paths 0,1,2"
  timeout 100 $B .bench/mod/bench_filter_$v.udfm --rows 1000000 --lists 1024 --data overlap --batches 1,10000 --reps 20 $F $P \
    --dump-results $W/res_1m_${v}_$r --json $W/1m_${v}_$r.json > $W/1m_${v}_$r.md 2> $W/1m_${v}_$r.err
  echo "== 1m $v $r rc $? at $(( $(date +%s) - s )) s"
done; done
for v in old new; do
  P=""; [[ $v == new ]] && P="--testing-paths 0,1,2"
  timeout 170 $B .bench/mod/bench_filter_$v.udfm --rows 20000000 --lists 4096 --data clustered --batches 1,10000 --reps 20 $F $P \
    --dump-results $W/res_20m_$v --json $W/20m_$v.json > $W/20m_$v.md 2> $W/20m_$v.err
  echo "== 20m $v rc $? at $(( $(date +%s) - s )) s"
done
for r in 1 2; do echo "1m round $r: $(diff -rq $W/res_1m_old_$r $W/res_1m_new_$r | wc -l) of $(ls $W/res_1m_old_$r | wc -l) differ"; done
echo "20m: $(diff -rq $W/res_20m_old $W/res_20m_new | wc -l) of $(ls $W/res_20m_old | wc -l) differ"
rm -rf $W/res_*
for f in $W/1m_*_1.md $W/20m_*.md; do echo "## $f"; grep "| weighted" $f | grep -v "k-means\|build" | head -40; done
tar czf $OUT/h1.tgz -C $OUT w && rm -rf $W

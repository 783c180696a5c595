# Filtered grouped folds under launch bounds: old, new (no bound: 84 registers), mb6, mb7; alternated processes.
cd "$(dirname "$0")/.."
s=$(date +%s)
tar xJf .bench/dev.tar.xz
W=$OUT/w; mkdir -p $W
B=.device/bin/search_bench
F="--filters none,query_group:n_groups=2,odd_ids --metrics weighted_l2 --elem f32 --probes 32 --ks 10"
for r in 1 2; do for v in old new mb6 mb7; do
  timeout 120 $B .bench/mod/bench_filter_$v.udfm --rows 1000000 --lists 1024 --data overlap --batches 100,10000 --reps 20 $F \
    --dump-results $W/res_1m_${v}_$r --json $W/1m_${v}_$r.json > $W/1m_${v}_$r.md 2> $W/1m_${v}_$r.err
  echo "== 1m $v $r rc $? at $(( $(date +%s) - s )) s"; grep "| overlap | f32 | weighted" $W/1m_${v}_$r.md | grep -v "k-means\|build" | awk -F'|' '{print $4, $5, $8}' | tr '\n' ';'; echo
done; done
for v in old new mb6 mb7; do
  timeout 150 $B .bench/mod/bench_filter_$v.udfm --rows 20000000 --lists 4096 --data clustered --batches 10000 --reps 20 $F \
    --json $W/20m_$v.json > $W/20m_$v.md 2> $W/20m_$v.err
  echo "== 20m $v rc $? at $(( $(date +%s) - s )) s"; grep "| clustered | f32 | weighted" $W/20m_$v.md | grep -v "k-means\|build" | awk -F'|' '{print $4, $5, $8}' | tr '\n' ';'; echo
done
for v in new mb6 mb7; do for r in 1 2; do echo "$v round $r: $(diff -rq $W/res_1m_old_$r $W/res_1m_${v}_$r | wc -l) of $(ls $W/res_1m_old_$r | wc -l) differ from old"; done; done
rm -rf $W/res_1m_*
tar czf $OUT/h2.tgz -C $OUT w && rm -rf $W

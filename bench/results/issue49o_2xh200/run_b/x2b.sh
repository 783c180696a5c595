B=.bench/bin/search_bench; M=.bench/mod/bench_filter.udfm
C="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --probes 32 --ks 10 --batches 1,10000 --reps 30 --filters none,query_group:n_groups=2,odd_ids"
for r in 1 2; do
  $B $M $C --json $OUT/one_r$r.json > $OUT/one_r$r.txt 2> $OUT/one_r$r.err || tail -5 $OUT/one_r$r.err
  $B $M $C --devices 0,1 --shard-layout vectors --json $OUT/two_r$r.json > $OUT/two_r$r.txt 2> $OUT/two_r$r.err || tail -5 $OUT/two_r$r.err
done
for f in $OUT/*.txt; do echo "== $f"; grep "weighted_l2" $f | grep -v "build\|k-means" | awk -F'|' '{print $4, $5, $8, $9, $10, $12}'; done

set -x
nvidia-smi -L
B=.bench/bin/search_bench; M=.bench/mod/bench_filter.udfm
C="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --probes 32 --ks 10 --batches 1,5000,10000 --reps 20 --filters none,query_group:n_groups=2"
( time $B $M $C --json $OUT/one.json > $OUT/one.txt 2> $OUT/one.err ) 2>&1 | tail -3
( time $B $M $C --devices 0,1 --shard-layout vectors --json $OUT/two.json > $OUT/two.txt 2> $OUT/two.err ) 2>&1 | tail -3
cat $OUT/one.txt $OUT/two.txt | grep -v "^$" | head -60

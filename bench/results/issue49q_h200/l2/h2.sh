# The built-in l2 (monotone) with the same filters: scan choice / plain / pruning ([paths 0/1/2]) in one process.
cd "$(dirname "$0")/../../../.."
s=$(date +%s)
[[ -x .device/bin/search_bench ]] || tar xJf .bench/dev.tar.xz
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
W=$OUT/w2; mkdir -p $W
B=.device/bin/search_bench
F="--filters none,query_group:n_groups=2,query_group:n_groups=16,odd_ids --metrics l2 --elem f32 --probes 32 --ks 10 --testing-paths 0,1,2"
timeout 100 $B .bench/mod/l2_filter_new.udfm --rows 1000000 --lists 1024 --data overlap --batches 1,100,10000 --reps 20 $F \
  --json $W/l2_1m.json > $W/l2_1m.md 2> $W/l2_1m.err; echo "== 1m rc $? at $(( $(date +%s) - s )) s"
timeout 200 $B .bench/mod/l2_filter_new.udfm --rows 20000000 --lists 4096 --data clustered --batches 1,100,10000 --reps 20 $F \
  --json $W/l2_20m.json > $W/l2_20m.md 2> $W/l2_20m.err; echo "== 20m rc $? at $(( $(date +%s) - s )) s"
for f in $W/l2_*.md; do echo "## $f"; grep "| l2" $f | grep -v "k-means\|build" | awk -F'|' '{print $4, $5, $8}'; done
tar czf $OUT/h2.tgz -C $OUT w2 && rm -rf $W

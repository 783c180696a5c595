# f16 and i8 (monotone f16_l2 and int8_l2 with the same filters): scan choice / plain / pruning ([paths 0/1/2]) in one process.
cd "$(dirname "$0")/../../../.."
s=$(date +%s)
[[ -x .device/bin/search_bench ]] || tar xJf .bench/dev.tar.xz
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
W=$OUT/w3; mkdir -p $W
B=.device/bin/search_bench
for e in i8 f16; do
  F="--filters none,query_group:n_groups=2,odd_ids --metrics l2 --elem $e --probes 32 --ks 10 --testing-paths 0,1,2"
  timeout 120 $B .bench/mod/${e}_filter_new.udfm --rows 20000000 --lists 4096 --data clustered --batches 100,10000 --reps 20 $F \
    --json $W/${e}_20m.json > $W/${e}_20m.md 2> $W/${e}_20m.err; echo "== $e 20m rc $? at $(( $(date +%s) - s )) s"
  timeout 60 $B .bench/mod/${e}_filter_new.udfm --rows 1000000 --lists 1024 --data overlap --batches 10000 --reps 20 $F \
    --json $W/${e}_1m.json > $W/${e}_1m.md 2> $W/${e}_1m.err; echo "== $e 1m rc $? at $(( $(date +%s) - s )) s"
done
for f in $W/*.md; do echo "## $f"; grep "| clustered\|| overlap" $f | grep -v "k-means\|build\|device arrays" | awk -F'|' '{print $4, $5, $8}' | tr '\n' ';'; echo; done
tail -2 $W/*.err
tar czf $OUT/h3.tgz -C $OUT w3 && rm -rf $W

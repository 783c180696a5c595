set -u
cd "$(dirname "$0")/.."
rm -rf .device; tar xJf .bench/dev.tar.xz
B=.device/bin/search_bench
for adj in 0 0.25; do
  for meso in 0 64; do
    n=adj${adj}_m${meso}_10m
    UDF_KMEANS_ADJUST=$adj UDF_KMEANS_ADJUST_VERBOSE=1 UDF_PROFILE_BUILD=1 $B .device/modules/bench.udfm --rows 10000000 --lists 4096 --data overlap --elem f32 --metrics l2 --batches 10000 --probes 16,32 --ks 10 $( [[ $meso != 0 ]] && echo --mesoclusters $meso ) --json $OUT/$n.json > $OUT/$n.md 2>&1
    echo "== $n rc $? adjusted: $(grep -c 'centers adjusted' $OUT/$n.md) last: $(grep 'centers adjusted' $OUT/$n.md | tail -1)"
    grep -E "^\| overlap" $OUT/$n.md | head -4
  done
  n=adj${adj}_1m
  UDF_KMEANS_ADJUST=$adj $B .device/modules/bench.udfm --rows 1000000 --lists 1024 --data overlap,many --elem f32 --metrics l2 --batches 10000 --probes 16,32 --ks 10 --json $OUT/$n.json > $OUT/$n.md 2>&1
  echo "== $n rc $?"; grep -E "^\| (overlap|many)" $OUT/$n.md | head -8
done

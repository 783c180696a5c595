set -u
cd "$(dirname "$0")/.."
[[ -d .device ]] || tar xJf .bench/dev.tar.xz
B=.device/bin/search_bench
for adj in 0 0.25; do
  for meso in 64 0; do
    n=frontier_adj${adj}_m${meso}
    UDF_KMEANS_ADJUST=$adj $B .device/modules/bench.udfm --rows 10000000 --lists 4096 --data overlap --elem f32 --metrics l2 --batches 10000 --probes 12,16,24,32,40,48 --ks 10 $( [[ $meso != 0 ]] && echo --mesoclusters $meso ) > $OUT/$n.md 2>&1
    echo "== $n rc $?"; grep -E "^\| overlap \| f32 \| l2 \| 10000" $OUT/$n.md | awk -F'|' '{print $6, $8, $12, $17}'
  done
done

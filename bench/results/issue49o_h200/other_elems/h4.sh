# f16 and i8 filtered scans: f4086f1's pack files (old) against pack 1.15 (new), alternated processes.
cd "$(dirname "$0")/.."
B=.bench/bin/search_bench
for r in 1 2; do for v in old new; do
  timeout 100 $B .bench/mod/el_$v.udfm --rows 1000000 --lists 1024 --data overlap --elem f16,i8 --metrics l2 --batches 10000 --probes 32 --ks 10 --reps 10 \
    --filters none,query_group:n_groups=2,odd_ids --json $OUT/el_${v}_$r.json > $OUT/el_${v}_$r.md 2> $OUT/el_${v}_$r.err
  echo "== $v $r rc $?"; grep "| overlap | " $OUT/el_${v}_$r.md | grep -v "k-means\|build" | awk -F'|' '{print $3, $4, $5, $8}' | tr '\n' ';'; echo
done; done
rm -f $OUT/*.err

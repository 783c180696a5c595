#!/bin/bash
# Where an exact-search call's time goes at batch 10k (L1, the shipped fold): every kernel's duration
# (ncu, clocks not locked) beside the bench's wall times.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
NCU=/usr/local/cuda/bin/ncu
timeout 250 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --launch-count 80 \
  bin/exact_search_bench mod/exact_fin.udfm --batches 10000 --reps 3 --rounds 1 --metrics l1:2 > $OUT/k_l1.csv 2> $OUT/k_l1.log
echo "rc $?"; grep -c gpu__time $OUT/k_l1.csv
python3 - $OUT/k_l1.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; rows = rows[1:]
ki = hdr.index("Kernel Name"); vi = len(hdr) - 1; ui = hdr.index("Metric Unit")
for r in rows:
    print(r[0], r[ki][:60], r[vi], r[ui])
PY
timeout 100 bin/exact_search_bench mod/exact_fin.udfm --batches 10000 --reps 5 --rounds 1 --metrics l1:2 | tail -1

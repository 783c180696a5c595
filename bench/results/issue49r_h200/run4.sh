#!/bin/bash
# The final build: the native GPU suite, then builds with nearest_wide
# against the 64-centroid kernel (--testing-paths 4096), alternated: 20M x
# 128 clustered (the sharded build's one-GPU row) and 1M overlap, flat and
# two levels (issue 49).
set -u
tar -xJf .bench/dev.tar.xz   # .device/, for device_suite.sh
bash test/gpu/device_suite.sh --part native 2>&1 | grep -E "^=== |passed|failed|FAILED" | tail -30
D=$PWD/.device
export LD_LIBRARY_PATH=$D/lib UDF_PROFILE_BUILD=1
run() {  # label paths data rows lists mesoclusters metric
  echo "=== $1 $3 rows $4 lists $5 mesoclusters $6 $7"
  timeout 200 $D/bin/search_bench $D/modules/bench.udfm --rows $4 --lists $5 --data $3 --elem f32 --metrics $7 \
    --batches 10000 --probes 32 --ks 10 --reps 3 --testing-paths $2 $([[ $6 != 0 ]] && echo --mesoclusters $6) \
    --json $OUT/$1_$3_$4_m$6.json 2>&1 | grep -E "udf build|^\| $3 \| f32 \| $7 \| [0-9.]+ \|" | cut -c1-150
}
run wide 0 clustered 20000000 4096 0 weighted_l2; run narrow 4096 clustered 20000000 4096 0 weighted_l2
run narrow 4096 overlap 1000000 1024 32 l2; run wide 0 overlap 1000000 1024 32 l2

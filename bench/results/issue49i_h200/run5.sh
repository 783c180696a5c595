#!/bin/bash
# One-GPU builds, old (c3545a3's runtime, .devpack/mg) against new, alternated (issue 49).
set -u
D=/tmp/dev; rm -rf $D; mkdir -p $D; tar -C $D -xJf .devpack/b49/dev.tar.xz
OLD=$PWD/.devpack/mg
export UDF_PROFILE_BUILD=1
run() {  # version rows lists meso
  local bin lib
  if [[ $1 == old ]]; then bin=$OLD/bin/search_bench; lib=$OLD/lib; else bin=$D/bin/search_bench; lib=$D/lib; fi
  echo "=== $1 rows $2 lists $3 mesoclusters $4"
  LD_LIBRARY_PATH=$lib timeout 120 $bin $D/modules/bench.udfm --rows $2 --lists $3 --data overlap --elem f32 --metrics l2 --batches 10000 --probes 32 --ks 10 --reps 5 $([[ $4 != 0 ]] && echo --mesoclusters $4) --json $OUT/$1_$2_m$4.json 2>&1 | grep -E "udf build|^\| overlap" | cut -c1-140
}
for m in 0; do run old 10000000 4096 $m; run new 10000000 4096 $m; done
for m in 0; do run new 1000000 1024 $m; run old 1000000 1024 $m; done

#!/usr/bin/env bash
set -u
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz
mkdir -p .bench/lib_new && cp .device/lib/libudf_runtime.so.3 .bench/lib_new/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export UDF_TEST_MODULE_DIR=$PWD/.device/modules
.device/bin/runtime_gpu_test --gtest_brief=1 --gtest_filter='*BatchCoarse*' 2>&1 | tail -4
B=.device/bin/search_bench M=.device/modules/bench.udfm
run() { local tag=$1 lib=$2; shift 2
  LD_LIBRARY_PATH=$PWD/.bench/$lib $B $M "$@" --json $OUT/$tag.json > $OUT/$tag.txt 2>&1 || echo "FAILED $tag"; }
for r in 1 2; do
  for v in head new; do
    run a10_${v}_$r lib_$v --data clustered --elem f32 --metrics l2,weighted_l2 --batches 1,100,1000,10000 --probes 32,128 --ks 10
    run l4k_${v}_$r lib_$v --rows 2000000 --lists 4096 --data overlap --elem f32 --metrics l2 --batches 100,1000,10000 --probes 32,64 --ks 10
    run l16k_${v}_$r lib_$v --rows 2000000 --lists 16384 --data overlap --elem f32 --metrics l2 --batches 100,1000,10000 --probes 32,64,128 --ks 10
  done
done
python3 .bench/ab.py $OUT > $OUT/ab.md; cat $OUT/ab.md
for t in runtime_gpu_test runtime_gpu_v2_test runtime_shards_test runtime_faiss_test runtime_cuvs_test; do
  echo "== $t"; .device/bin/$t --gtest_brief=1 2>&1 | tail -3; done
tar czf $OUT/runs.tgz -C $OUT $(cd $OUT && ls *.json *.txt)

#!/usr/bin/env bash
set -u
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz
mkdir -p .bench/trl && xz -dc .bench/tr/libudf_runtime.so.3.xz > .bench/trl/libudf_runtime.so.3
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl=$(/opt/torch/.venv/bin/python -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -n $nccl ]] && export UDF_NCCL_LIBRARY=$nccl
s=$(date +%s)
for t in runtime_shards_test runtime_wrapper_shards_test; do
  UDF_TEST_MODULE_DIR=.device/modules timeout 240 .device/bin/$t --gtest_brief=1 > $OUT/$t.log 2>&1
  echo "$t rc $? at $(( $(date +%s) - s )) s"; grep -E "PASSED|FAILED|SKIPPED|ms total|Failure" $OUT/$t.log | head -8
done
B=.device/bin/search_bench M=.device/modules/bench.udfm
c="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 10000 --probes 32 --ks 10"
for p in 0 2048; do
  LD_LIBRARY_PATH=$PWD/.bench/trl UDF_TRACE_SHARDS=1 timeout 150 $B $M $c --reps 30 --devices 0,1 --shard-layout vectors --testing-paths $p > $OUT/trace_$p.md 2> $OUT/trace_$p.err
  echo "== trace paths $p rc $? at $(( $(date +%s) - s )) s"
  python3 - $OUT/trace_$p.err <<'PY'
import sys, re, statistics as st
for tag in ('TRACE', 'TRAC2'):
    rows = [l for l in open(sys.argv[1]) if l.startswith(tag)][-28:]
    keys = None; vals = []
    for l in rows:
        parts = re.findall(r'([a-z0-9_]+(?: [a-z_0-9]+)?) (-?[0-9.]+)', l[6:])
        vals.append([float(v) for _, v in parts]); keys = [k for k, _ in parts]
    print(' '.join(f'{k}={st.median(v[i] for v in vals):.3f}' for i, k in enumerate(keys or [])))
PY
done
timeout 200 $B $M $c --devices 0,1 --shard-layout vectors --testing-paths 0,2048 --path-rounds 6 --json $OUT/x2_ab.json > $OUT/x2_ab.md 2>&1
echo "x2_ab rc $? at $(( $(date +%s) - s )) s"; grep -E "^\| clustered \| f32 \| weighted_l2 \[" $OUT/x2_ab.md | awk -F'|' '{print $4, $8, $9, $10}'
timeout 200 $B $M $c --json $OUT/x1.json > $OUT/x1.md 2>&1
echo "x1 rc $? at $(( $(date +%s) - s )) s"; grep -E "^\| clustered \| f32 \| weighted_l2 \| 10000" $OUT/x1.md | awk -F'|' '{print $8, $9, $10, "coarse", $13}'
cd $OUT && tar czf logs.tgz *.log *.md *.err *.json && rm -f *.log *.md *.err *.json

#!/usr/bin/env bash
set -u
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz
mkdir -p .bench/trl && xz -dc .bench/tr/libudf_runtime.so.3.xz > .bench/trl/libudf_runtime.so.3
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl=$(/opt/torch/.venv/bin/python -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -n $nccl ]] && export UDF_NCCL_LIBRARY=$nccl
s=$(date +%s)
B=.device/bin/search_bench M=.device/modules/bench.udfm
c="--rows 20000000 --lists 4096 --data clustered --elem f32 --metrics weighted_l2 --batches 10000 --probes 32 --ks 10 --reps 30"
for p in 0 2048; do
  LD_LIBRARY_PATH=$PWD/.bench/trl UDF_TRACE_SHARDS=1 timeout 150 $B $M $c --devices 0,1 --shard-layout vectors --testing-paths $p > $OUT/trace_$p.md 2> $OUT/trace_$p.err
  echo "== paths $p rc $? at $(( $(date +%s) - s )) s"; grep -E "^\| clustered \| f32 \| weighted_l2.*10000" $OUT/trace_$p.md
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

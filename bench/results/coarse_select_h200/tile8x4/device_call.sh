#!/usr/bin/env bash
set -u
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz
mkdir -p .bench/lib_new && cp .device/lib/libudf_runtime.so.3 .bench/lib_new/
xz -dk .bench/lib_var/libudf_runtime.so.3.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export UDF_TEST_MODULE_DIR=$PWD/.device/modules
.device/bin/runtime_gpu_test --gtest_brief=1 --gtest_filter='*BatchCoarse*' 2>&1 | tail -3
LD_LIBRARY_PATH=$PWD/.bench/lib_var .device/bin/runtime_gpu_test --gtest_brief=1 --gtest_filter='*BatchCoarse*:*Exact*:*Recall*:*Coarse*' 2>&1 | tail -3
B=.device/bin/search_bench M=.device/modules/bench.udfm
run() { local tag=$1 lib=$2; shift 2
  LD_LIBRARY_PATH=$PWD/.bench/$lib $B $M "$@" --json $OUT/$tag.json > $OUT/$tag.txt 2>&1 || echo "FAILED $tag"; }
for r in 1 2; do
  for v in new var; do
    run a10_${v}_$r lib_$v --data clustered --elem f32 --metrics l2 --batches 1000,10000 --probes 32 --ks 10
    run l16k_${v}_$r lib_$v --rows 2000000 --lists 16384 --data overlap --elem f32 --metrics l2 --batches 1000,10000 --probes 32,64 --ks 10
  done
done
sed -i "s/('head', 'new')/('new', 'var')/; s/runs\['head'\]/runs['new']/g; s/runs\['new'\]\[0\]/runs['new'][0]/" .bench/ab.py
python3 - "$OUT" <<'PY'
import json, glob, sys
out = sys.argv[1]
for fam in ['a10', 'l16k']:
    R = {v: [{(r['metric'], r['arrays'], r['batch'], r['n_probes']): r for r in json.load(open(f))['results']} for f in sorted(glob.glob(f'{out}/{fam}_{v}_*.json'))] for v in ('new', 'var')}
    print('###', fam, '| key | new ms | var ms | var/new | new coarse | var coarse |')
    for k in R['new'][0]:
        n = [r[k]['median_ms'] for r in R['new']]; v = [r[k]['median_ms'] for r in R['var']]
        nc = [r[k]['coarse_ms'] for r in R['new']]; vc = [r[k]['coarse_ms'] for r in R['var']]
        f = lambda xs: '/'.join('%.3f' % x for x in xs)
        print(f'| {k} | {f(n)} | {f(v)} | {sum(v)/sum(n):.3f} | {f(nc)} | {f(vc)} |')
PY

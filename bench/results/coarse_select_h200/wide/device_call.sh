#!/usr/bin/env bash
set -u
cd "$(dirname "$0")/.."
tar xJf .bench/dev.tar.xz
mkdir -p .bench/lib_new && cp .device/lib/libudf_runtime.so.3 .bench/lib_new/
xz -dk .bench/lib_prev/libudf_runtime.so.3.xz
export UDF_TEST_MODULE_DIR=$PWD/.device/modules
.device/bin/runtime_gpu_test --gtest_brief=1 2>&1 | tail -3
B=.device/bin/search_bench M=.device/modules/bench.udfm
run() { local tag=$1 lib=$2; shift 2
  LD_LIBRARY_PATH=$PWD/.bench/$lib $B $M "$@" --reps 30 --json $OUT/$tag.json > $OUT/$tag.txt 2>&1 || echo "FAILED $tag"; }
for r in 1 2; do
  for v in prev new; do
    run a10_${v}_$r lib_$v --data clustered --elem f32 --metrics l2 --batches 10,100,300 --probes 32 --ks 10
    run l4k_${v}_$r lib_$v --rows 1000000 --lists 4096 --data overlap --elem f32 --metrics l2 --batches 10,100,300 --probes 32 --ks 10
    run l16k_${v}_$r lib_$v --rows 1000000 --lists 16384 --data overlap --elem f32 --metrics l2 --batches 10,100,300 --probes 32 --ks 10
  done
done
python3 - "$OUT" <<'PY' | tee $OUT/ab.md
import json, glob, sys
out = sys.argv[1]
for fam in ['a10', 'l4k', 'l16k']:
    R = {v: [{(r['metric'], r['arrays'], r['batch'], r['n_probes']): r for r in json.load(open(f))['results']} for f in sorted(glob.glob(f'{out}/{fam}_{v}_*.json'))] for v in ('prev', 'new')}
    print('###', fam, '| key | prev ms | new ms | new/prev | prev coarse | new coarse |')
    for k in R['prev'][0]:
        n = [r[k]['median_ms'] for r in R['prev']]; v = [r[k]['median_ms'] for r in R['new']]
        nc = [r[k]['coarse_ms'] for r in R['prev']]; vc = [r[k]['coarse_ms'] for r in R['new']]
        f = lambda xs: '/'.join('%.4f' % x for x in xs)
        print(f'| {k} | {f(n)} | {f(v)} | {sum(v)/sum(n):.3f} | {f(nc)} | {f(vc)} |')
PY
cd $OUT && tar czf runs.tgz *.json *.txt && rm -f *_1.json *_2.json *_1.txt *_2.txt

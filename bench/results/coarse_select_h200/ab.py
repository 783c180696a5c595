import json, sys, glob, os
out = sys.argv[1]
def load(f):
    d = json.load(open(f))
    return {(r['metric'], r['arrays'], r['batch'], r['n_probes'], r['k']): r for r in d['results']}
for fam in ['a10', 'l4k', 'l16k']:
    runs = {v: [load(f) for f in sorted(glob.glob(f'{out}/{fam}_{v}_*.json'))] for v in ('head', 'new')}
    if not runs['head'] or not runs['new']: continue
    print(f'### {fam}')
    print('| metric | arrays | batch | P | head ms | new ms | new/head | head coarse | new coarse |')
    print('|---|---|---:|---:|---|---|---:|---|---|')
    for key in runs['head'][0]:
        h = [r[key]['median_ms'] for r in runs['head'] if key in r]; n = [r[key]['median_ms'] for r in runs['new'] if key in r]
        hc = [r[key]['coarse_ms'] for r in runs['head'] if key in r]; nc = [r[key]['coarse_ms'] for r in runs['new'] if key in r]
        f = lambda xs: '/'.join('%.3f' % x for x in xs)
        print(f'| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {f(h)} | {f(n)} | {sum(n)/sum(h):.3f} | {f(hc)} | {f(nc)} |')

import csv, gzip, sys, collections, re
# Groups consecutive SASS instructions with the same execution count into runs and prints each run's
# share of the stall samples, its count, stall reasons and op histogram (sorted by samples).
rows = list(csv.reader(gzip.open(sys.argv[1], 'rt')))
hdr = rows[1]; data = rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
reasons = [h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
total = sum(int(r[ix['Warp Stall Sampling (All Samples)']] or 0) for r in data)
inst_total = sum(int(r[ix['Instructions Executed']] or 0) for r in data)
runs = []; cur = None
for r in data:
    ex = int(r[ix['Instructions Executed']] or 0)
    if cur and cur['ex'] == ex: cur['rows'].append(r)
    else:
        cur = {'ex': ex, 'rows': [r]}; runs.append(cur)
out = []
for run in runs:
    samp = sum(int(r[ix['Warp Stall Sampling (All Samples)']] or 0) for r in run['rows'])
    rs = collections.Counter()
    for r in run['rows']:
        for h in reasons: rs[h[6:]] += int(r[ix[h]] or 0)
    ops = collections.Counter(re.sub(r'^@!?U?P\w+\s+', '', r[ix['Source']].strip()).split()[0] for r in run['rows'])
    out.append((samp, run, rs, ops))
print(f"total samples {total}, instructions {inst_total/1e9:.2f}G")
for samp, run, rs, ops in sorted(out, key=lambda x: -x[0])[:int(sys.argv[2]) if len(sys.argv) > 2 else 25]:
    tot = sum(rs.values()) or 1
    top = ', '.join(f"{k} {100*v//tot}" for k, v in rs.most_common(5))
    print(f"{run['rows'][0][ix['Address']][-5:]} ex {run['ex']/1e6:7.2f}M n {len(run['rows']):4d} samp {100*samp/total:5.1f}%  inst {100*run['ex']*len(run['rows'])/inst_total:5.1f}% | {top} | {dict(ops.most_common(5))}")

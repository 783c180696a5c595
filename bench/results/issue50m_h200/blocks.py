import re, sys, collections
# Splits nvdisasm -c output into basic blocks (at labels and after branches) and prints each block
# with more than N instructions: its address range, count, and op histogram.
lines = open(sys.argv[1]).read().splitlines()
minn = int(sys.argv[2]) if len(sys.argv) > 2 else 20
ins = []
for l in lines:
    m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);', l)
    if m:
        txt = m.group(2).strip()
        txt = re.sub(r'^@!?U?P\w+\s+', '', txt)
        op = txt.split()[0]
        ins.append((int(m.group(1), 16), op, m.group(2)))
    elif re.match(r'\.L_x_\d+:', l.strip()):
        ins.append((None, 'LABEL', l.strip()))
blocks = []; cur = []
for a, op, t in ins:
    if op == 'LABEL':
        if cur: blocks.append(cur); cur = []
        continue
    cur.append((a, op, t))
    if op.startswith('BRA') or op in ('EXIT', 'RET', 'BRX', 'CALL'):
        blocks.append(cur); cur = []
if cur: blocks.append(cur)
tot = collections.Counter()
for b in blocks:
    c = collections.Counter(op for _, op, _ in b)
    fp = sum(v for k, v in c.items() if k.split('.')[0] in ('FADD', 'FMUL', 'FFMA', 'FMNMX'))
    if len(b) >= minn:
        print(f"{b[0][0]:6x}-{b[-1][0]:6x} n {len(b):4d} fp32 {fp:4d} ", dict(c.most_common(8)))

import re, sys
# Counts FP32 instructions in [lo, hi) whose source registers (without a reuse flag) share a bank (reg % 2),
# as a rough register-bank-conflict proxy for Volta+ (two 64-bit banks).
lines = open(sys.argv[1]).read().splitlines()
lo, hi = int(sys.argv[2], 16), int(sys.argv[3], 16)
n = conf = 0
for l in lines:
    m = re.match(r'\s*/\*([0-9a-f]+)\*/\s+(F(?:ADD|MUL|FMA|MNMX)\S*)\s+(.*?);', l)
    if not m: continue
    a = int(m.group(1), 16)
    if not lo <= a < hi: continue
    ops = [o.strip() for o in m.group(3).split(',')]
    srcs = []
    for o in ops[1:]:
        r = re.match(r'-?\|?-?R(\d+)(\.reuse)?', o)
        if r and not r.group(2): srcs.append(int(r.group(1)) % 2)
    n += 1
    if len(srcs) >= 2 and len(set(srcs)) < len(srcs): conf += 1
print(n, "fp32 instructions,", conf, "with two non-reused sources in one bank")

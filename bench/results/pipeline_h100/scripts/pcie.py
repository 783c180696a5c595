# PCIe copy rates on the device machine (issue 33: the coarse stage is the query upload at batch 10k).
import time, numpy as np, torch, ctypes
cudart = ctypes.CDLL("libcudart.so") if False else None
def best(f, n=40):
    b = 1e9
    for _ in range(n):
        torch.cuda.synchronize(); t = time.perf_counter(); f(); torch.cuda.synchronize(); b = min(b, time.perf_counter() - t)
    return b
N = 5 << 20
pin = torch.empty(N // 4, dtype=torch.float32).pin_memory()
dev = torch.empty(N // 4, dtype=torch.float32, device='cuda')
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
for sz in (1 << 20, 5 << 20):
    m = sz // 4
    t = best(lambda: dev[:m].copy_(pin[:m], non_blocking=True)); print(f"pinned -> GPU {sz>>20} MB one copy: {t*1e3:.3f} ms ({sz/t/1e9:.1f} GB/s)")
def slices(streams):
    m = (1 << 20) // 4
    for i in range(5):
        with torch.cuda.stream(streams[i % len(streams)]): dev[i*m:(i+1)*m].copy_(pin[i*m:(i+1)*m], non_blocking=True)
t = best(lambda: slices([s1])); print(f"5 x 1 MB, one stream: {t*1e3:.3f} ms ({N/t/1e9:.1f} GB/s)")
t = best(lambda: slices([s1, s2])); print(f"5 x 1 MB, two streams: {t*1e3:.3f} ms ({N/t/1e9:.1f} GB/s)")
out = torch.empty(1200000 // 4, dtype=torch.float32).pin_memory(); dsrc = torch.empty(1200000 // 4, dtype=torch.float32, device='cuda')
t = best(lambda: out.copy_(dsrc, non_blocking=True)); print(f"GPU -> pinned 1.2 MB: {t*1e3:.3f} ms ({1.2e6/t/1e9:.1f} GB/s)")
# a kernel reading mapped pinned memory (zero copy) through torch: not available; numa info
import os
print(open('/proc/cpuinfo').read().count('processor'), 'cpus;', os.popen('nvidia-smi topo -m 2>&1 | head -5').read())
print(os.popen('nvidia-smi -q | grep -i -A3 "Link Width\\|Link Gen\\|PCIe Generation" | head -20').read())

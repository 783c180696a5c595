#!/usr/bin/env python3
"""The CUDA driver's own start in new processes, the floor under any GPU program's first result:
dlopen libcuda, cuInit, the primary context of device 0 made current, one 1 MiB allocation.
Needs only the driver (ctypes; no toolkit, no udf).  Prints one JSON line per process and the
medians.

    python bench/cuda_start.py [--processes 5]
"""
import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import ctypes, json, time
t0 = time.perf_counter()
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    raise SystemExit(f"no CUDA driver: {e}")
t1 = time.perf_counter()
def check(r, what):
    if r != 0:
        raise SystemExit(f"{what} failed: CUresult {r}")
check(cu.cuInit(0), "cuInit")
t2 = time.perf_counter()
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
t3 = time.perf_counter()
p = ctypes.c_uint64()
check(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)), "cuMemAlloc")
check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
t4 = time.perf_counter()
print(json.dumps({"dlopen_ms": (t1 - t0) * 1e3, "cuInit_ms": (t2 - t1) * 1e3, "primary_ctx_ms": (t3 - t2) * 1e3,
                  "first_alloc_ms": (t4 - t3) * 1e3, "total_ms": (t4 - t0) * 1e3}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=5)
    a = ap.parse_args()
    runs = []
    for _ in range(a.processes):
        p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write(p.stdout + p.stderr)
            return 1
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]))
    print("medians: " + ", ".join(f"{k} {statistics.median(r[k] for r in runs):.1f}" for k in runs[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

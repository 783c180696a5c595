#!/usr/bin/env python3
"""Exact search and refine with a UDF (issue 50) next to PyTorch on one GPU, in one process.

    python3 bench/exact_bench.py [--rows 1000000] [--dim 128] [--out bench/results/exact] [--quick]

Needs the udf package (its wheel, or UDF_PYTHON_DIR) and torch with CUDA.  Data: rows x dim
float32, standard normal, on the GPU as torch tensors (device arrays in and out for both);
k 10.  Every timing is the median wall clock of its repetitions (after two warm-up calls, which
also link udf's rows scans on demand), with torch.cuda.synchronize() around each call.  Each call,
warm-ups included, gets a query batch (and refine's candidates) of its own, drawn before timing,
so no call finds the previous one's queries in the L2 cache; udf and PyTorch get the same batches.

--profile adds, for each batch, a table of the GPU kernels one call of each udf row runs (from
torch.profiler, which sees the runtime's kernels: they run in the same CUDA context), so a
slow row shows where its time goes.

Rows of the table:
  weighted_l2  udf: the weighted-L2 UDF (examples/weighted_l2.cu, weights a capture), exact;
               PyTorch: ||q'||^2 - 2 q' X'^T + ||x'||^2 on sqrt(w)-scaled data (one float32 matmul a
               chunk of queries, TF32 off; the scaled dataset and its norms made before timing),
               then torch.topk
  l1           udf: sum |x - y| as a CUDA UDF; PyTorch: torch.cdist(p=1) + topk, on at most
               --cdist-queries queries (its time for the batch is scaled from those)
  canberra     udf: sum |x - y| / (|x| + |y|) (0 where both are 0); no PyTorch kernel: compared
               with torch.cdist(p=1), the nearest built-in non-GEMM distance; canberra_fdividef the
               same with __fdividef (one SFU reciprocal a coordinate)
  chebyshev    udf: max |x - y| (L-infinity), compared with torch.cdist(p=1)
  refine       udf.refine of 256 candidates a query (random rows) with weighted_l2, against the
               time to read those vectors once (batch x 256 x dim x 4 bytes at the GPU's measured
               copy bandwidth, a device-to-device torch copy of the dataset)
For weighted_l2 and l1 at the largest batch it reports the share of the FP32 issue limit:
batch x rows x dim x (FP32 operations a coordinate: 3 for weighted_l2 -- sub, mul, fma --
and 2 for l1 -- sub, add of the absolute value) / (time x SMs x 128 lanes x the SM clock).

Writes OUT/exact_bench.json and OUT/exact_bench.md and prints the markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

L1_SRC = r"""
extern "C" __device__ float l1(float x, float y, float acc, const udf_ctx_v1 *ctx) { return acc + fabsf(x - y); }
"""
CANBERRA_SRC = r"""
extern "C" __device__ float canberra(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  const float den = fabsf(x) + fabsf(y);
  return den > 0.0f ? acc + fabsf(x - y) / den : acc;
}
"""
# The same with the SFU's approximate division (__fdividef, 2 ulp): one reciprocal a coordinate.
CANBERRA_FAST_SRC = r"""
extern "C" __device__ float canberra_fast(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  return acc + __fdividef(fabsf(x - y), fmaxf(fabsf(x) + fabsf(y), 1e-30f));
}
"""
CHEBYSHEV_SRC = r"""
extern "C" __device__ float chebyshev(float x, float y, float acc, const udf_ctx_v1 *ctx) { return fmaxf(acc, fabsf(x - y)); }
"""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--batches", default="1,100,10000")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--cdist-queries", type=int, default=1000)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "exact")
    p.add_argument("--quick", action="store_true", help="fewer repetitions, batches 1 and 100 and 1000")
    p.add_argument("--metrics", default="weighted_l2,l1,canberra,canberra_fdividef,chebyshev,refine",
                   help="the rows to run, comma-separated")
    p.add_argument("--profile", action="store_true", help="print the GPU kernels of one call of each udf row")
    return p.parse_args()


WARMUP = 2


def timed(fn, reps: int, torch) -> float:
    """Median wall seconds of fn(i) over reps runs (i = 2 ..) after two warm-up runs (i = 0, 1)."""
    for i in range(WARMUP):
        fn(i)
    torch.cuda.synchronize()
    out = []
    for i in range(WARMUP, WARMUP + reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn(i)
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def kernel_table(fn, torch, label: str) -> None:
    """Prints the GPU kernels one fn() runs, with their times (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    total = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            name = e.name if len(e.name) <= 70 else e.name[:67] + "..."
            n, us = total.get(name, (0, 0.0))
            total[name] = (n + 1, us + e.device_time_total)
    print(f"-- kernels of one call: {label}", flush=True)
    for name, (n, us) in sorted(total.items(), key=lambda kv: -kv[1][1]):
        print(f"   {us / 1e3:9.3f} ms  x{n:<3d} {name}", flush=True)


def sm_clock_hz() -> float:
    """The SM clock the GPU runs at under load (nvidia-smi's max SM clock), in Hz."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout.split()[0]
    return float(out) * 1e6


def torch_weighted_l2(torch, xs, xs_norm, q, w_sqrt, k):
    """PyTorch exact weighted L2 on the sqrt(w)-scaled dataset xs (norms precomputed)."""
    qs = q * w_sqrt
    chunk = max(1, (2 << 30) // (xs.shape[0] * 4))
    ds, ids = [], []
    for i in range(0, qs.shape[0], chunk):
        part = qs[i:i + chunk]
        d = (part * part).sum(1, keepdim=True) - 2.0 * (part @ xs.T) + xs_norm
        v, j = torch.topk(d, k, dim=1, largest=False)
        ds.append(v)
        ids.append(j)
    return torch.cat(ds), torch.cat(ids)


def torch_cdist_l1(torch, x, q, k):
    chunk = max(1, (2 << 30) // (x.shape[0] * 4))
    out = []
    for i in range(0, q.shape[0], chunk):
        d = torch.cdist(q[i:i + chunk], x, p=1)
        out.append(torch.topk(d, k, dim=1, largest=False)[1])
    return torch.cat(out)


def main() -> int:
    a = parse_args()
    import torch
    import udf

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda:0")
    batches = [1, 100, 1000] if a.quick else [int(b) for b in a.batches.split(",")]
    reps = 3 if a.quick else a.reps
    gen = torch.Generator(device=dev).manual_seed(1234)
    x = torch.randn(a.rows, a.dim, device=dev, generator=gen)
    w = torch.rand(a.dim, device=dev, generator=gen) * 1.5 + 0.5
    w_sqrt = w.sqrt()
    xs = x * w_sqrt
    xs_norm = (xs * xs).sum(1)[None, :]
    props = torch.cuda.get_device_properties(0)
    clock = sm_clock_hz()
    fp32_rate = props.multi_processor_count * 128 * clock
    wl2 = udf.cuda_source_metric(ROOT / "examples" / "weighted_l2.cu", flags=["--flags-from-first-line"])
    l1 = udf.cuda_source_metric(L1_SRC)
    canberra = udf.cuda_source_metric(CANBERRA_SRC)
    canberra_fast = udf.cuda_source_metric(CANBERRA_FAST_SRC)
    chebyshev = udf.cuda_source_metric(CHEBYSHEV_SRC)
    rows = []

    def add(metric, batch, ms, torch_ms=None, torch_what=None, ops=None, note=None):
        r = {"metric": metric, "batch": batch, "rows": a.rows, "dim": a.dim, "k": a.k, "udf_ms": ms * 1e3}
        if torch_ms is not None:
            r.update(torch_ms=torch_ms * 1e3, torch=torch_what, speedup=torch_ms / ms)
        if ops is not None:
            r["fp32_issue_share"] = batch * a.rows * a.dim * ops / (ms * fp32_rate)
        if note:
            r["note"] = note
        rows.append(r)
        print(json.dumps(r), flush=True)

    # Agreement first: udf's ids against PyTorch's at batch 100 (ties aside: recall@k).
    q = torch.randn(100, a.dim, device=dev, generator=gen)
    _, ui = udf.exact_search(wl2, x, q, a.k, captures={"weights": w})
    _, ti = torch_weighted_l2(torch, xs, xs_norm, q, w_sqrt, a.k)
    agree = sum(len(set(u.tolist()) & set(t.tolist())) for u, t in zip(ui.cpu(), ti.cpu())) / (100 * a.k)
    print(f"weighted_l2 recall@{a.k} of udf against PyTorch (batch 100): {agree:.4f}", flush=True)

    want = set(a.metrics.split(","))
    cdist_per_query = None
    for batch in batches:
        qs = [torch.randn(batch, a.dim, device=dev, generator=gen) for _ in range(WARMUP + reps)]
        runs = {
            "weighted_l2": lambda i: udf.exact_search(wl2, x, qs[i], a.k, captures={"weights": w}),
            "l1": lambda i: udf.exact_search(l1, x, qs[i], a.k),
            "canberra": lambda i: udf.exact_search(canberra, x, qs[i], a.k),
            "canberra_fdividef": lambda i: udf.exact_search(canberra_fast, x, qs[i], a.k),
            "chebyshev": lambda i: udf.exact_search(chebyshev, x, qs[i], a.k),
        }
        if "weighted_l2" in want:
            ms = timed(runs["weighted_l2"], reps, torch)
            tm = timed(lambda i: torch_weighted_l2(torch, xs, xs_norm, qs[i], w_sqrt, a.k), reps, torch)
            add("weighted_l2", batch, ms, tm, "fp32 matmul + topk (TF32 off)", ops=3)
        if want & {"l1", "canberra", "canberra_fdividef", "chebyshev"} and (cdist_per_query is None or batch <= a.cdist_queries):
            nq = min(batch, a.cdist_queries)
            tq = timed(lambda i: torch_cdist_l1(torch, x, qs[i][:nq], a.k), max(1, reps // 2), torch)
            cdist_per_query = tq / nq
        cd = None if cdist_per_query is None else cdist_per_query * batch
        note = None if batch <= a.cdist_queries else f"PyTorch time scaled from {a.cdist_queries} queries"
        for name, what, ops in (("l1", "torch.cdist(p=1) + topk", 2),
                                ("canberra", "torch.cdist(p=1) + topk (L1: no Canberra kernel)", None),
                                ("canberra_fdividef", "torch.cdist(p=1) + topk (L1: no Canberra kernel)", None),
                                ("chebyshev", "torch.cdist(p=1) + topk (L1)", 2)):
            if name in want:
                add(name, batch, timed(runs[name], reps, torch), cd, what, ops=ops, note=note)
        if a.profile:
            for name in [n for n in runs if n in want]:
                kernel_table(lambda: runs[name](0), torch, f"{name}, batch {batch}")

    # Refine: 256 random candidates a query, weighted_l2, against one read of those vectors.
    m = 256
    copy_s = timed(lambda i: x.clone(), reps, torch)
    bandwidth = 2 * x.numel() * 4 / copy_s  # bytes read + written
    for batch in [b for b in batches if b >= 100 and "refine" in want]:
        qs = [torch.randn(batch, a.dim, device=dev, generator=gen) for _ in range(WARMUP + reps)]
        cands = [torch.randint(0, a.rows, (batch, m), device=dev, generator=gen) for _ in range(WARMUP + reps)]

        def refine(i):
            return udf.refine(wl2, x, qs[i], cands[i], a.k, captures={"weights": w})
        ms = timed(refine, reps, torch)
        if a.profile:
            kernel_table(lambda: refine(0), torch, f"refine, batch {batch}")
        read_s = batch * m * a.dim * 4 / bandwidth
        add("refine_weighted_l2", batch, ms, note=f"{m} candidates a query; one read of them: {read_s * 1e3:.3f} ms "
                                                  f"at {bandwidth / 1e12:.2f} TB/s; ratio {ms / read_s:.2f}")
        rows[-1].update(read_once_ms=read_s * 1e3, ratio_to_read_once=ms / read_s)

    a.out.mkdir(parents=True, exist_ok=True)
    meta = {"gpu": props.name, "sms": props.multi_processor_count, "sm_clock_mhz": clock / 1e6,
            "torch": torch.__version__, "udf": udf.__version__, "recall_vs_torch": agree}
    (a.out / "exact_bench.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    lines = [f"GPU {props.name}, {a.rows} x {a.dim} f32, k {a.k}; udf recall@{a.k} against PyTorch {agree:.4f}", "",
             "| metric | batch | udf ms | PyTorch ms | PyTorch | speed-up | FP32 issue share | note |",
             "|---|---:|---:|---:|---|---:|---:|---|"]
    for r in rows:
        t = f"{r['torch_ms']:.2f}" if "torch_ms" in r else ""
        s = f"{r['speedup']:.1f}x" if "speedup" in r else ""
        f = f"{100 * r['fp32_issue_share']:.0f}%" if "fp32_issue_share" in r else ""
        lines.append(f"| {r['metric']} | {r['batch']} | {r['udf_ms']:.3f} | {t} | {r.get('torch', '')} | {s} | {f} | "
                     f"{r.get('note', '')} |")
    (a.out / "exact_bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

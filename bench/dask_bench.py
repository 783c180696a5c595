#!/usr/bin/env python3
"""udf.dask against the in-process index over several GPUs: what Dask costs per search.

One machine, two GPUs (--devices 0,1): the same rows (clustered float32, generated from a seed in
two halves) indexed twice with the same weighted-L2 Python UDF --
  in-process   udf.Index.build(..., devices=[0, 1]): list shards, top-k merged through NCCL
  dask         udf.dask.Index.build on a local cluster of one worker process per GPU
               (udf.dask.local_gpu_cluster): vector shards over shared centroids; each worker
               generates its half itself; queries sent to both, top-k merged on a worker
-- then searched with host NumPy queries at each batch size.  Prints build times, a table of
milliseconds per batch and queries per second for both and the difference, and the round trip
of an empty Dask task (the floor of the overhead at batch 1).  --json writes the numbers.

    python bench/dask_bench.py --rows 20000000 --lists 4096 --batches 1,100,10000
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
import time

import numpy as np


def gen_half(half: int, rows: int, dim: int, seed: int) -> np.ndarray:
    """Rows of half `half` (0 or 1) of the data: 1000 Gaussian clusters (shared by both halves)."""
    centers = np.random.default_rng(seed).normal(0.0, 4.0, (1000, dim)).astype(np.float32)
    rng = np.random.default_rng([seed, half + 1])
    out = rng.standard_normal((rows, dim), dtype=np.float32)
    out += centers[rng.integers(0, len(centers), rows)]
    return out


POOL_BATCHES = 8  # distinct query batches a batch size cycles through


def timed(fn, pool: np.ndarray, b: int, min_seconds: float = 1.0, min_reps: int = 3) -> float:
    """Median seconds of fn(queries) over enough repetitions (after one warm-up), each with the
    next of the pool's batches of b queries, so that no repetition searches warm copies of the
    last one's queries."""
    n = max(1, len(pool) // b)
    batch = lambda i: pool[(i % n) * b:(i % n) * b + b]  # noqa: E731
    fn(batch(0))
    times, t_end = [], time.perf_counter() + min_seconds
    while len(times) < min_reps or time.perf_counter() < t_end:
        q = batch(len(times) + 1)
        t0 = time.perf_counter()
        fn(q)
        times.append(time.perf_counter() - t0)
        if len(times) >= 1000:
            break
    return float(np.median(times))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--lists", type=int, default=4096)
    ap.add_argument("--probes", type=int, default=32)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--batches", default="1,100,10000")
    ap.add_argument("--devices", default="0,1")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    import udf
    import udf.dask as udd
    from distributed import Client

    devices = [int(d) for d in args.devices.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    halves = [args.rows // 2, args.rows - args.rows // 2]
    weights = np.random.default_rng(args.seed + 7).uniform(0.5, 1.5, args.dim).astype(np.float32)

    @udf.metric(captures={"weights": weights})
    def weighted_l2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d

    art = udf.compile(weighted_l2, archs=sorted({udf.device_info(d)["arch"] for d in devices}))
    queries = gen_half(2, POOL_BATCHES * max(batches), args.dim, args.seed)
    result = {"rows": args.rows, "dim": args.dim, "lists": args.lists, "probes": args.probes, "k": args.k,
              "devices": devices, "batches": {}}

    # ---- in process
    t0 = time.perf_counter()
    data = np.concatenate([gen_half(h, halves[h], args.dim, args.seed) for h in (0, 1)])
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ix = udf.Index.build(art, data, n_lists=args.lists, devices=devices)
    result["inproc_build_s"] = time.perf_counter() - t0
    del data
    print(f"in-process: generated in {gen_s:.1f} s, built in {result['inproc_build_s']:.1f} s "
          f"({ix.shard_transport}; shards {[s['size'] for s in ix.shards]})", flush=True)
    inproc = {b: timed(lambda q, ix=ix: ix.search(q, k=args.k, n_probes=args.probes), queries, b) for b in batches}
    del ix

    # ---- Dask
    with udd.local_gpu_cluster(devices) as cluster, Client(cluster) as client:
        client.wait_for_workers(len(devices))
        noop = timed(lambda q: client.submit(int, 0, pure=False).result(), queries, 1)
        parts = [functools.partial(gen_half, h, halves[h], args.dim, args.seed) for h in (0, 1)]
        t0 = time.perf_counter()
        dix = udd.Index.build(client, art, parts, n_lists=args.lists)
        result["dask_build_s"] = time.perf_counter() - t0  # includes generating the rows on the workers
        print(f"dask: built in {result['dask_build_s']:.1f} s (rows generated on the workers); shards "
              f"{[s['size'] for s in dix.shards]}; empty task round trip {noop * 1e3:.2f} ms", flush=True)
        dask_t = {b: timed(lambda q: dix.search(q, k=args.k, n_probes=args.probes), queries, b) for b in batches}
        pipelined = {b: timed(lambda q, b=b: dix.search(q, k=args.k, n_probes=args.probes,
                                                     batch_rows=b // 4), queries, b) for b in batches if b >= 4000}
        dix.close()
    result["dask_noop_ms"] = noop * 1e3

    print(f"\n{args.rows:,} x {args.dim} f32, {args.lists} lists, n_probes {args.probes}, k {args.k}, "
          f"devices {devices}")
    print(f"{'batch':>6} {'in-proc ms':>11} {'dask ms':>9} {'+ms':>8} {'x':>6} {'in-proc QPS':>12} {'dask QPS':>10}")
    for b in batches:
        a, d = inproc[b] * 1e3, dask_t[b] * 1e3
        row = {"inproc_ms": a, "dask_ms": d, "inproc_qps": b / inproc[b], "dask_qps": b / dask_t[b]}
        print(f"{b:>6} {a:>11.3f} {d:>9.3f} {d - a:>8.3f} {d / a:>6.2f} {b / inproc[b]:>12,.0f} {b / dask_t[b]:>10,.0f}")
        if b in pipelined:
            row["dask_batch_rows"] = b // 4
            row["dask_pipelined_ms"] = pipelined[b] * 1e3
            print(f"{'':>6} {'':>11} {pipelined[b] * 1e3:>9.3f}   (dask, sent in 4 batches of {b // 4})")
        result["batches"][str(b)] = row
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

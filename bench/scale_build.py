#!/usr/bin/env python3
"""An index larger than one GPU (issue 34): N x D u8 vectors sharded over several GPUs, then searched.

    python3 bench/scale_build.py [--rows 500000000] [--chunk 10000000] [--lists 16384] [--devices 0,1]
                                 [--shard-layout vectors|lists]
                                 [--probes 8,32,128] [--batches 1,100,10000] [--json OUT.json] ...

Data: clustered u8 rows made on the home GPU (the first of --devices) with torch, chunk by chunk
(chunk i from a CUDA generator seeded with seed + 1 + i), so the host never holds the data set
and torch one chunk at most: --centres centres uniform in 0..255, each row a random centre plus
round(N(0, sigma)) noise, clamped to 0..255.  Queries are drawn the same way from another seed.
Build (--build chunked, the default): udf.Index.build_chunked(the built-in squared L2 for u8, the
chunks, devices=[...]): k-means on chunk 0, each chunk generated again for the placement pass,
each GPU's lists allocated once.  --build add: udf.Index.build over chunk 0, then index.add(chunk
i) for the others (each add re-lays the lists: a GPU holds its shard twice meanwhile).  Ids are
0 .. N-1 in row order either way.  Ground truth: the
exact top-k of the first --truth-queries queries, kept up to date chunk by chunk on the home GPU
(float32 matmul, TF32 off: exact, since every value is an integer below 2^24).  Search: host
NumPy queries, QPS per (probes, batch); recall@k per probes, by ids and counting ties at the
k-th distance (the found rows are generated again to get their exact distances).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast off (docs/scale-out.md); before NCCL loads
import torch  # noqa: E402
import udf  # noqa: E402

GEN_BLOCK = 1 << 20       # rows generated at a time (their float32 temporaries: about 1 GB)
TRUTH_BYTES = 2 << 30     # ground truth: a sub-chunk's distances and float rows stay under 2 GiB
QUERY_SEED = 10**9        # queries: seed + QUERY_SEED (chunk i: seed + 1 + i)
WARMUP = 4                # searches before timing: the runtime times both scans in its first ones (SCAN CHOICE)
MIN_SECONDS, MIN_REPS = 1.0, 3


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=500_000_000, help="vectors in the index (default 500M)")
    p.add_argument("--chunk", type=int, default=10_000_000, help="rows generated and added at a time")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--lists", type=int, default=16384, help="n_lists (at most 16384)")
    p.add_argument("--devices", type=ints, default=[0, 1], help="CUDA ordinals, comma-separated; the first is the home")
    p.add_argument("--metric", default="sqeuclidean", choices=["sqeuclidean", "l2"],
                   help="built-in metric (udf.builtin_metric(NAME, 'u8')); the ground truth is squared L2")
    p.add_argument("--queries", type=int, default=1000, help="search queries (repeated for larger batches)")
    p.add_argument("--truth-queries", type=int, default=200, help="queries with exact ground truth (the first ones)")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--probes", type=ints, default=[8, 32, 128])
    p.add_argument("--batches", type=ints, default=[1, 100, 10000])
    p.add_argument("--build", choices=["chunked", "add"], default="chunked",
                   help="chunked: Index.build_chunked (each GPU allocates its lists once); add: build, then add")
    p.add_argument("--shard-layout", choices=["vectors", "lists"], default="vectors",
                   help="how the GPUs split the vectors (udf.Index shard_layout); lists: 8 bytes a vector less")
    p.add_argument("--kmeans-rows", type=int, help="max_train_rows (default 256 x lists); at most chunk 0's rows")
    p.add_argument("--centres", type=int, default=10_000, help="cluster centres of the data")
    p.add_argument("--sigma", type=float, default=12.0, help="noise around a centre (per coordinate)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="write the results here")
    a = p.parse_args()
    first = min(a.chunk, a.rows)
    if a.rows < 1 or a.chunk < 1 or not 1 <= a.lists <= min(16384, first):
        p.error(f"need rows, chunk >= 1 and 1 <= lists <= min(16384, first chunk = {first})")
    if not 1 <= a.k <= min(1024, first) or not 1 <= a.truth_queries <= a.queries:
        p.error("need 1 <= k <= min(1024, first chunk) and 1 <= truth-queries <= queries")
    if not a.devices or min(a.probes + a.batches) < 1 or max(a.probes) > a.lists:
        p.error("need devices, probes in 1 .. lists and batches >= 1")
    a.kmeans_rows = min(a.kmeans_rows or 256 * a.lists, first)
    return a


def gen_rows(centres: torch.Tensor, n: int, seed: int, sigma: float) -> torch.Tensor:
    """n clustered u8 rows on the centres' device; the same rows for the same (centres, n, seed)."""
    dev = centres.device
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    out = torch.empty((n, centres.shape[1]), dtype=torch.uint8, device=dev)
    for r0 in range(0, n, GEN_BLOCK):
        m = min(GEN_BLOCK, n - r0)
        c = torch.randint(0, centres.shape[0], (m,), generator=g, device=dev)
        x = torch.randn((m, centres.shape[1]), generator=g, device=dev).mul_(sigma).add_(centres[c])
        out[r0:r0 + m] = x.round_().clamp_(0, 255).to(torch.uint8)
    return out


class Truth:
    """Running exact top-k (squared L2) of `queries` over the rows seen so far, ids = global row numbers."""

    def __init__(self, queries: torch.Tensor, k: int):
        self.q = queries.float()
        self.qq = (self.q * self.q).sum(1)
        self.k = k
        self.d = torch.full((len(queries), k), float("inf"), device=queries.device)
        self.i = torch.full((len(queries), k), -1, dtype=torch.int64, device=queries.device)
        self.sub = max(1, TRUTH_BYTES // (4 * (len(queries) + 2 * queries.shape[1])))

    def update(self, x: torch.Tensor, row0: int) -> None:
        for s0 in range(0, len(x), self.sub):
            xs = x[s0:s0 + self.sub].float()
            # -2 x.q + ||x||^2 + ||q||^2: integers below 2^24 at every step, so exact in float32
            d = (self.q @ xs.T).mul_(-2).add_((xs * xs).sum(1)).add_(self.qq[:, None])
            vals, idx = torch.topk(d, min(self.k, len(xs)), dim=1, largest=False)
            all_d, all_i = torch.cat([self.d, vals], 1), torch.cat([self.i, idx + (row0 + s0)], 1)
            self.d, pos = torch.topk(all_d, self.k, dim=1, largest=False)  # sorted, nearest first
            self.i = torch.gather(all_i, 1, pos)


def gpu_used_gib(devices: list[int]) -> dict[int, float]:
    out = {}
    for d in devices:
        free, total = torch.cuda.mem_get_info(d)
        out[d] = round((total - free) / 2**30, 2)
    return out


def build(a, centres: torch.Tensor, truth: Truth, devices: list[int]):
    """The sharded index, chunk by chunk; (index, timings, per-chunk log)."""
    metric = udf.builtin_metric(a.metric, "u8")
    n_chunks = -(-a.rows // a.chunk)
    chunk_rows = [min(a.chunk, a.rows - i * a.chunk) for i in range(n_chunks)]
    t = dict(gen_s=0.0, truth_s=0.0, build_s=0.0, add_s=0.0)
    log, index, start = [], None, time.perf_counter()
    for i, n in enumerate(chunk_rows):
        t0 = time.perf_counter()
        x = gen_rows(centres, n, a.seed + 1 + i, a.sigma)
        torch.cuda.synchronize(centres.device)
        t1 = time.perf_counter()
        truth.update(x, i * a.chunk)
        torch.cuda.synchronize(centres.device)
        torch.cuda.empty_cache()  # the index needs about twice a shard while add re-lays the lists
        t2 = time.perf_counter()
        if index is None:
            warm = udf.Index.build(metric, x[:4096], n_lists=min(16, n), devices=a.devices)  # compile + link
            warm.search(x[:1].cpu().numpy(), a.k, 1)
            del warm
            t["prepare_s"] = time.perf_counter() - t2
            t2 = time.perf_counter()
            index = udf.Index.build(metric, x, n_lists=a.lists, max_train_rows=a.kmeans_rows, seed=a.seed,
                                    devices=a.devices, shard_layout=a.shard_layout)
        else:
            index.add(x)  # ids continue from the largest + 1: i * chunk on
        t3 = time.perf_counter()
        del x
        torch.cuda.empty_cache()
        t["gen_s"] += t1 - t0
        t["truth_s"] += t2 - t1
        t["build_s" if i == 0 else "add_s"] += t3 - t2
        done = i * a.chunk + n
        log.append(dict(chunk=i, rows=done, gen_s=t1 - t0, truth_s=t2 - t1, index_s=t3 - t2,
                        gpu_used_gib=gpu_used_gib(devices)))
        if i == 0 or (i + 1) % 10 == 0 or i + 1 == n_chunks:
            mem = ", ".join(f"GPU {d} {g:.1f} GiB" for d, g in log[-1]["gpu_used_gib"].items())
            print(f"{done:>13,} rows  {time.perf_counter() - start:8.1f} s  "
                  f"{'build' if i == 0 else 'add'} {t3 - t2:6.2f} s  used: {mem}", flush=True)
    t["index_s"] = t["build_s"] + t["add_s"]
    t["wall_s"] = time.perf_counter() - start
    assert index.size == a.rows, (index.size, a.rows)
    return index, t, log


def build_chunked(a, centres: torch.Tensor, truth: Truth, devices: list[int]):
    """The index by Index.build_chunked: every chunk generated twice (the assignment pass, then
    the placement; chunk 0 a third time first), the ground truth updated on its first visit;
    (index, timings, per-chunk log).  GPU memory in use is sampled at every chunk."""
    metric = udf.builtin_metric(a.metric, "u8")
    n_chunks = -(-a.rows // a.chunk)
    t = dict(gen_s=0.0, truth_s=0.0, build_s=0.0, add_s=0.0)
    t0 = time.perf_counter()  # compile + link, before the clock
    warm = udf.Index.build(metric, gen_rows(centres, 4096, a.seed + 1, a.sigma), n_lists=16, devices=a.devices)
    warm.search(np.zeros((1, a.dim), np.uint8), a.k, 1)
    del warm
    t["prepare_s"] = time.perf_counter() - t0
    log, seen, peak = [], set(), {d: 0.0 for d in devices}
    start = time.perf_counter()

    def chunk(i: int):
        t0 = time.perf_counter()
        n = min(a.chunk, a.rows - i * a.chunk)
        x = gen_rows(centres, n, a.seed + 1 + i, a.sigma)
        torch.cuda.synchronize(centres.device)
        t["gen_s"] += time.perf_counter() - t0
        if i not in seen:  # the first visit: the ground truth
            seen.add(i)
            t1 = time.perf_counter()
            truth.update(x, i * a.chunk)
            torch.cuda.synchronize(centres.device)
            t["truth_s"] += time.perf_counter() - t1
        used = gpu_used_gib(devices)
        for d, g in used.items():
            peak[d] = max(peak[d], g)
        log.append(dict(chunk=i, wall_s=time.perf_counter() - start, gpu_used_gib=used))
        if i == 0 or (i + 1) % 10 == 0 or i + 1 == n_chunks:
            mem = ", ".join(f"GPU {d} {g:.1f} GiB" for d, g in used.items())
            print(f"  chunk {i:>4}  {time.perf_counter() - start:8.1f} s  used: {mem}", flush=True)
        return x

    index = udf.Index.build_chunked(metric, chunk, n_chunks=n_chunks, n_lists=a.lists, max_train_rows=a.kmeans_rows,
                                    seed=a.seed, devices=a.devices, shard_layout=a.shard_layout)
    torch.cuda.empty_cache()
    t["wall_s"] = time.perf_counter() - start
    t["build_s"] = t["wall_s"] - t["gen_s"] - t["truth_s"]
    t["index_s"] = t["build_s"]
    t["peak_used_gib_sampled"] = peak
    print("GPU memory in use, the most seen at a chunk: " + ", ".join(f"GPU {d} {g:.1f} GiB" for d, g in peak.items()))
    assert index.size == a.rows, (index.size, a.rows)
    return index, t, log


def exact_dists(found: np.ndarray, centres: torch.Tensor, queries: torch.Tensor, a) -> np.ndarray:
    """Exact squared L2 of each found id (found: P x T x k) to its query; NaN for ids outside
    0 .. rows-1 (padding).  The rows are generated again, a chunk at a time."""
    f = torch.from_numpy(found).to(centres.device)
    q_of = torch.arange(f.shape[1], device=f.device).view(1, -1, 1).expand_as(f)
    out = torch.full(f.shape, float("nan"), device=f.device)
    c_of = torch.where((f >= 0) & (f < a.rows), f // a.chunk, -1)
    qf = queries.float()
    for c in torch.unique(c_of).tolist():
        if c < 0:
            continue
        x = gen_rows(centres, min(a.chunk, a.rows - c * a.chunk), a.seed + 1 + c, a.sigma)
        m = c_of == c
        diff = x[f[m] - c * a.chunk].float() - qf[q_of[m]]
        out[m] = (diff * diff).sum(1)
        del x
    torch.cuda.empty_cache()
    return out.cpu().numpy()


def time_search(index, batches: list[np.ndarray], k: int, probes: int) -> list[float]:
    """Seconds per search: WARMUP searches, then at least MIN_REPS and MIN_SECONDS of timed ones."""
    for r in range(WARMUP):
        index.search(batches[r % len(batches)], k, probes)
    times, end = [], time.perf_counter() + MIN_SECONDS
    while len(times) < MIN_REPS or time.perf_counter() < end:
        q = batches[len(times) % len(batches)]
        t0 = time.perf_counter()
        index.search(q, k, probes)
        times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    a = parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    home = torch.device("cuda", a.devices[0])
    devices = sorted(set(a.devices))
    g = torch.Generator(device=home)
    g.manual_seed(a.seed)
    centres = torch.randint(0, 256, (a.centres, a.dim), generator=g, device=home).float()
    queries = gen_rows(centres, a.queries, a.seed + QUERY_SEED, a.sigma)
    truth = Truth(queries[:a.truth_queries], a.k)
    print(f"scale_build: {a.rows:,} x {a.dim} u8, {a.lists} lists, devices {a.devices}, chunks of {a.chunk:,}, "
          f"metric {a.metric} (u8), k-means on {a.kmeans_rows:,} rows", flush=True)

    if a.build == "chunked":
        index, times, log = build_chunked(a, centres, truth, devices)
        print(f"build_chunked {times['index_s']:.1f} s (k-means, both passes); generation {times['gen_s']:.1f} s, "
              f"ground truth {times['truth_s']:.1f} s, compile + link {times['prepare_s']:.1f} s, "
              f"wall {times['wall_s']:.1f} s")
    else:
        index, times, log = build(a, centres, truth, devices)
        print(f"build {times['build_s']:.1f} s (k-means included) + adds {times['add_s']:.1f} s = "
              f"{times['index_s']:.1f} s; generation {times['gen_s']:.1f} s, ground truth {times['truth_s']:.1f} s, "
              f"compile + link {times['prepare_s']:.1f} s, wall {times['wall_s']:.1f} s")
    print(f"shards ({index.shard_transport}):")
    for s in index.shards:
        print(f"  device {s['device']}: lists [{s['list_begin']}, {s['list_end']}), {s['size']:,} vectors")

    q_host = queries.cpu().numpy()
    truth_q, truth_i, truth_d = q_host[:a.truth_queries], truth.i.cpu().numpy(), truth.d.cpu().numpy()
    found, dists = [], []
    for p in a.probes:
        d, i = index.search(truth_q, a.k, p)
        found.append(i)
        dists.append(d)
    found, dists = np.stack(found), np.stack(dists)  # P x T x k
    exact = exact_dists(found, centres, queries[:a.truth_queries], a)
    recall = []
    for p, f, d, e in zip(a.probes, found, dists, exact):
        hit = (f[:, :, None] == truth_i[:, None, :]).any(2)
        tie = hit | (e == truth_d[:, -1:])  # a found row as near as the k-th is as good as the truth's
        recall.append(dict(probes=p, recall=float(hit.mean()), recall_ties=float(tie.mean()),
                           dist_mismatches=int(((d != e) & (f >= 0)).sum())))

    search = []
    for p in a.probes:
        for b in a.batches:
            pool = [q_host[j:j + b] for j in range(0, a.queries - b + 1, b)] or [np.resize(q_host, (b, a.dim))]
            t = time_search(index, pool, a.k, p)
            ms = float(np.median(t)) * 1e3
            search.append(dict(probes=p, batch=b, median_ms=ms, qps=b / ms * 1e3, reps=len(t)))

    head = "| probes | recall@%d | recall (ties) | " % a.k + " | ".join(f"batch {b}: QPS (ms)" for b in a.batches)
    print(f"\n{a.rows:,} x {a.dim} u8, {a.lists} lists, devices {a.devices}, {a.build} build {times['index_s']:.1f} s\n")
    print(head + " |\n" + "|---:" * (3 + len(a.batches)) + "|")
    for r in recall:
        cells = [f"{s['qps']:,.0f} ({s['median_ms']:.3f})" for s in search if s["probes"] == r["probes"]]
        print(f"| {r['probes']} | {r['recall']:.4f} | {r['recall_ties']:.4f} | " + " | ".join(cells) + " |")
    bad = sum(r["dist_mismatches"] for r in recall)
    print(f"\ndistances that differ from the exact ones: {bad}" + ("" if bad == 0 else "  <-- WRONG"))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    print(f"host peak RSS {rss:.1f} GiB")

    if a.json:
        doc = dict(config=vars(a), elem="u8", metric_symbol=udf.builtin_metric(a.metric, "u8").symbol,
                   gpus={d: torch.cuda.get_device_name(d) for d in devices}, udf_version=udf.__version__,
                   torch_version=torch.__version__, commit=os.environ.get("UDF_BENCH_COMMIT"),
                   build=times, chunks=log, shards=index.shards, transport=index.shard_transport,
                   host_peak_rss_gib=rss, recall=recall, search=search)
        with open(a.json, "w") as fh:
            json.dump(doc, fh, indent=1, default=str)
        print(f"wrote {a.json}")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

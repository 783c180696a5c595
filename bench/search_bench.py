#!/usr/bin/env python3
"""Search end to end (issue 10): bench/search_bench next to PyTorch exact search, in one run.

    python3 bench/search_bench.py --bin .device/bin/search_bench --module .device/modules/bench.udfm
                                  [--out bench/results] [--quick] [-- extra search_bench options]
    python3 bench/search_bench.py --from-json bench/results/search_bench.json [--out DIR]

1. Runs search_bench with --json OUT/search_bench.json and --dump-dir (a temporary folder), so
   the data, the 1000 evaluation queries and the exact reference ids it used are written as .npy.
2. When torch with CUDA can be imported, times PyTorch exact search on that same data, for the
   f32 l2 and weighted_l2 indexes (the weights from weights.npy): ||q||^2 - 2 q X^T + ||x||^2 with
   one float32 matmul per chunk of queries (TF32 off), then torch.topk(k, largest=False).  Like
   search_bench it evicts the L2 cache (a 256 MB write) before each timed repetition, runs 2
   warm-up calls and the same number of repetitions, and takes the wall clock around the
   search with torch.cuda.synchronize(): host NumPy queries in and host results out, and (k 10)
   device tensors in and out.  Its time does not depend on the query values, so its batches
   cycle through the evaluation queries.  Its recall is measured against the dumped reference
   ids (expected ~1.0; float rounding can swap near-ties).  Its rows are merged into the JSON.
3. Prints one markdown table (search_bench's rows, PyTorch exact beside them, the speed-up =
   our QPS / PyTorch's), writes OUT/search_bench.md and, when matplotlib can be imported,
   OUT/search_latency.png and OUT/search_recall_qps.png.

--from-json skips steps 1 and 2 and renders an existing JSON.  Only the standard library and
NumPy are required; torch and matplotlib are used when present.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEVICE_K = 10                # search_bench times device arrays at k 10 (n_probes 32)
SCORE_BYTES = 2 << 30        # PyTorch: the distance matrix of one query chunk stays under 2 GiB
TORCH = "torch_exact"        # the "engine" of PyTorch rows in the JSON


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", type=Path, help="the search_bench binary")
    p.add_argument("--module", type=Path, help="the module search_bench loads (bench.udfm)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="results folder (default bench/results)")
    p.add_argument("--quick", action="store_true", help="search_bench --quick: fewer repetitions and grid points")
    p.add_argument("--from-json", type=Path, help="render this JSON only: run neither search_bench nor PyTorch")
    args = p.parse_args(argv)
    if not args.from_json and (not args.bin or not args.module):
        p.error("--bin and --module are required (or --from-json)")
    return args, extra


# ---------------------------------------------------------------- running

def source_commit() -> str:
    """$UDF_BENCH_COMMIT, else the checkout's short commit (+ "-dirty"), else "unknown"."""
    if os.environ.get("UDF_BENCH_COMMIT"):
        return os.environ["UDF_BENCH_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def driver_release() -> str | None:
    """The NVIDIA driver's release (580.xx.yy) from nvidia-smi, when there is one."""
    if not shutil.which("nvidia-smi"):
        return None
    r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True)
    return r.stdout.splitlines()[0].strip() if r.returncode == 0 and r.stdout.strip() else None


def run_search_bench(args: argparse.Namespace, extra: list[str], json_path: Path, dump_dir: Path) -> None:
    cmd = [str(args.bin), str(args.module), "--json", str(json_path), "--dump-dir", str(dump_dir)]
    cmd += ["--quick"] if args.quick else []
    cmd += extra
    print("$", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, env={**os.environ, "UDF_BENCH_COMMIT": source_commit()})
    if r.returncode != 0:
        sys.exit(f"search_bench.py: search_bench exited with {r.returncode}")


def quantiles(samples: list[float]) -> dict:
    """Median, p10 and p90 as search_bench computes them (linear interpolation)."""
    p10, median, p90 = np.percentile(samples, [10, 50, 90])
    return {"median_ms": float(median), "p10_ms": float(p10), "p90_ms": float(p90)}


def recall_at_k(found: np.ndarray, reference: np.ndarray) -> float:
    """|found ∩ reference| / (n k), row by row; padding ids (-1) never count."""
    hits = sum(len(set(f[f >= 0].tolist()) & set(r.tolist())) for f, r in zip(found, reference))
    return hits / reference.size


class TorchExact:
    """Exact k nearest under (weighted) squared L2 on the GPU: ||s q||^2 - 2 (s q) (s X)^T + ||s x||^2,
    with s = sqrt(weights) (1 for plain L2), one float32 matmul per query chunk, then topk."""

    def __init__(self, torch, base: np.ndarray, weights: np.ndarray | None):
        self.torch = torch
        self.x = torch.from_numpy(base).cuda()
        self.scale = None if weights is None else torch.from_numpy(np.sqrt(weights)).cuda()
        if self.scale is not None:
            self.x *= self.scale
        self.x_norm = (self.x * self.x).sum(1)
        self.chunk = max(1, SCORE_BYTES // (4 * len(base)))

    def search(self, q, k: int):
        """Device tensors in and out: (distances, ids), nearest first."""
        if self.scale is not None:
            q = q * self.scale
        dists, ids = [], []
        for qc in q.split(self.chunk):
            d = self.torch.addmm(self.x_norm.unsqueeze(0), qc, self.x.T, alpha=-2.0)
            d += (qc * qc).sum(1, keepdim=True)
            v, i = self.torch.topk(d, k, dim=1, largest=False, sorted=True)
            dists.append(v)
            ids.append(i)
        return self.torch.cat(dists), self.torch.cat(ids)

    def search_host(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        d, i = self.search(self.torch.from_numpy(q).cuda(), k)
        return d.cpu().numpy(), i.cpu().numpy()


def torch_rows(doc: dict, dump_dir: Path) -> list[dict] | None:
    """PyTorch exact rows for the dumped f32 data, or None (with a note) without torch + CUDA."""
    try:
        import torch
    except ImportError:
        print("search_bench.py: torch is not importable: no PyTorch exact rows")
        return None
    if not torch.cuda.is_available():
        print("search_bench.py: torch has no CUDA device: no PyTorch exact rows")
        return None
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 exact, like search_bench
    cfg = doc["config"]
    reps = {int(b): r for b, r in cfg["reps"].items()}
    evict = torch.empty(cfg["evict_bytes"], dtype=torch.uint8, device="cuda")
    weights = np.load(dump_dir / "weights.npy")

    def timed(search, batch_of, n_reps: int) -> list[float]:
        for _ in range(2):  # warm-up
            search(batch_of(0))
        samples = []
        for r in range(1, n_reps + 1):
            q = batch_of(r)
            evict.fill_(r & 0xFF)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            search(q)
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - t0) * 1e3)
        return samples

    rows = []
    for data in cfg["data"]:
        base_file = dump_dir / f"{data}_f32_base.npy"
        if not base_file.exists():
            continue
        base, queries = np.load(base_file), np.load(dump_dir / f"{data}_f32_queries.npy")
        for metric in cfg["metrics"]:
            refs = {k: dump_dir / f"{data}_f32_{metric}_ref_k{k}.npy" for k in cfg["ks"]}
            if not any(f.exists() for f in refs.values()):
                continue
            print(f"search_bench.py: PyTorch exact, {data} f32 {metric}", flush=True)
            exact = TorchExact(torch, base, weights if metric == "weighted_l2" else None)
            for k, ref_file in refs.items():
                if not ref_file.exists():
                    continue
                reference = np.load(ref_file)
                recall = recall_at_k(exact.search_host(queries, k)[1], reference)
                for batch in cfg["batches"]:
                    def host_batch(r: int, b: int = batch) -> np.ndarray:
                        """Repetition r's queries: r*b .. (r+1)*b - 1 of the evaluation set, cyclically."""
                        return np.ascontiguousarray(queries[(np.arange(b) + r * b) % len(queries)])

                    runs = {"host": (lambda q, k=k: exact.search_host(q, k), host_batch)}
                    if k == DEVICE_K:
                        runs["device"] = (lambda q, k=k: exact.search(q, k), lambda r: torch.from_numpy(host_batch(r)).cuda())
                    for arrays, (search, batch_of) in runs.items():
                        samples = timed(search, batch_of, reps[batch])
                        q = quantiles(samples)
                        rows.append({"engine": TORCH, "data": data, "elem": "f32", "metric": metric, "arrays": arrays,
                                     "batch": batch, "n_probes": None, "k": k, "reps": len(samples), **q,
                                     "qps": batch / (q["median_ms"] / 1e3), "recall": recall,
                                     "recall_queries": len(queries), "samples_ms": samples})
            del exact
            torch.cuda.empty_cache()
    doc["torch"] = {"version": torch.__version__, "device": torch.cuda.get_device_name(), "tf32": False}
    return rows


# ---------------------------------------------------------------- report

def json_text(doc: dict) -> str:
    """The JSON document as search_bench writes it: one build and one result per line."""
    head = json.dumps({key: v for key, v in doc.items() if key not in ("builds", "results")})[:-1]
    lines = lambda items: ",".join("\n  " + json.dumps(i) for i in items)
    return f'{head},\n "builds": [{lines(doc["builds"])}],\n "results": [{lines(doc["results"])}\n]}}\n'


def fmt(v, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def md_table(header: list[str], rows: list[list[str]], right_from: int) -> str:
    """A markdown table; columns from `right_from` on are right-aligned."""
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    return "\n".join("| " + " | ".join(r) + " |" for r in [header, align, *rows])


def render_markdown(doc: dict) -> str:
    results = doc["results"]
    ours = [r for r in results if r["engine"] == "udf"]
    torch = {(r["data"], r["elem"], r["metric"], r["arrays"], r["batch"], r["k"]): r for r in results if r["engine"] == TORCH}
    release = f" ({doc['driver_release']})" if doc.get("driver_release") else ""
    out = [f"# Search benchmark\n\n{doc['device']}, CUDA driver {doc['driver']}{release}, commit {doc['commit']}. "
           f"{doc['rows']:,} x {doc['dim']} vectors, {doc['lists']} lists"
           f"{' (--quick)' if doc.get('quick') else ''}. Latency: wall clock of one search call, after an L2 "
           "eviction, a different query batch each repetition; median (p10, p90). Recall@k against the "
           "same index searched with n_probes = n_lists. Stage times are GPU times; scored / query: vectors in the "
           "probed lists; list MB / query: list data the scan read (a list once for the queries sharing an item); "
           "scan GB/s: list bytes read / scan time. PyTorch exact: float32 matmul + topk on the same data.\n",
           "## Index builds\n",
           "balance: the build's list length cap (udf_index_params.balance); mean list: vectors / lists; "
           "probe-weighted: sum(s^2) / sum(s) over the list sizes s, the size of a probed list on average (a query "
           "probes a list about in proportion to its size); max: the largest list.\n",
           md_table(["data", "elem", "metric", "build s", "k-means s", "assign s", "pack + upload s", "balance", "mean list",
                     "probe-weighted", "p-w / mean", "max / mean"],
                    [[b["data"], b["elem"], b["metric"], f"{b['seconds']:.2f}", fmt(b.get("kmeans_s"), ".2f"),
                      fmt(b.get("assign_s"), ".2f"), fmt(b.get("pack_s"), ".2f"), fmt(b.get("balance"), "g"),
                      fmt(b.get("list_mean"), ".1f"), fmt(b.get("list_probe_weighted"), ".1f"),
                      fmt(b.get("probe_weighted_over_mean"), ".3f"), fmt(b.get("max_over_mean"), ".3f")]
                     for b in doc["builds"]], 3) + "\n",
           "## Search\n"]
    rows = []
    for r in ours:
        t = torch.get((r["data"], r["elem"], r["metric"], r["arrays"], r["batch"], r["k"]))
        rows.append([r["data"], r["elem"], r["metric"], r["arrays"], str(r["batch"]), str(r["n_probes"]), str(r["k"]),
                     fmt(r["median_ms"]), fmt(r["p10_ms"]), fmt(r["p90_ms"]), fmt(r["qps"], ",.0f"), fmt(r["recall"], ".4f"),
                     fmt(t and t["median_ms"]), fmt(t and t["qps"], ",.0f"), fmt(t and r["qps"] / t["qps"], ".2f"),
                     fmt(r["coarse_ms"]), fmt(r["schedule_ms"]), fmt(r["scan_ms"]), fmt(r["merge_ms"]),
                     fmt(r.get("scored_per_query"), ",.0f"), fmt(r.get("list_mb_per_query"), ".2f"),
                     fmt(r.get("scan_gbps"), ",.0f")])
    out.append(md_table(["data", "elem", "metric", "arrays", "batch", "n_probes", "k", "median ms", "p10", "p90", "QPS",
                         "recall@k", "PyTorch exact ms", "PyTorch QPS", "speed-up", "coarse", "schedule", "scan",
                         "merge ms", "scored / query", "list MB / query", "scan GB/s"], rows, 4) + "\n")
    if torch:
        out.append("## PyTorch exact\n")
        out.append(md_table(["data", "metric", "arrays", "batch", "k", "median ms", "p10", "p90", "QPS", "recall@k"],
                            [[t["data"], t["metric"], t["arrays"], str(t["batch"]), str(t["k"]), fmt(t["median_ms"]),
                              fmt(t["p10_ms"]), fmt(t["p90_ms"]), fmt(t["qps"], ",.0f"), fmt(t["recall"], ".4f")]
                             for t in torch.values()], 3) + "\n")
    else:
        out.append("No PyTorch exact rows (torch with CUDA was not available).\n")
    return "\n".join(out)


def plot(doc: dict, out_dir: Path) -> list[Path]:
    """The two figures, or [] (with a note) without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("search_bench.py: matplotlib is not importable: no plots")
        return []
    res = doc["results"]

    def pick(**want):
        return [r for r in res if all(r.get(key) == v for key, v in want.items())]

    written = []
    # Latency vs batch, f32 l2 clustered, k 10, host arrays: one line per n_probes, and PyTorch exact.
    fig, ax = plt.subplots(figsize=(7, 5))
    base = pick(engine="udf", data="clustered", elem="f32", metric="l2", arrays="host", k=10)
    for probes in sorted({r["n_probes"] for r in base}):
        pts = sorted((r["batch"], r["median_ms"]) for r in base if r["n_probes"] == probes)
        ax.plot(*zip(*pts), marker="o", label=f"n_probes {probes}")
    pts = sorted((r["batch"], r["median_ms"]) for r in pick(engine=TORCH, data="clustered", metric="l2", arrays="host", k=10))
    if pts:
        ax.plot(*zip(*pts), marker="s", color="black", linestyle="--", label="PyTorch exact")
    if base:
        ax.set(xscale="log", yscale="log", xlabel="batch (queries)", ylabel="median latency (ms)",
               title=f"f32 L2, clustered, k 10, {doc['rows']:,} x {doc['dim']}, {doc['device']}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        written.append(out_dir / "search_latency.png")
        fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    # Recall@10 vs QPS over n_probes, the largest batch, built-in L2 and weighted-L2 UDF, per data set.
    batch = max((r["batch"] for r in res), default=0)
    datas = [d for d in ("clustered", "overlap", "many", "uniform") if pick(engine="udf", data=d, batch=batch, k=10)]
    if datas:
        fig, axes = plt.subplots(1, len(datas), figsize=(6.5 * len(datas), 5), squeeze=False)
        for ax, data in zip(axes[0], datas):
            for metric, color in (("l2", "tab:blue"), ("weighted_l2", "tab:orange")):
                curve = sorted(pick(engine="udf", data=data, elem="f32", metric=metric, arrays="host", batch=batch, k=10),
                               key=lambda r: r["n_probes"])
                if curve:
                    ax.plot([r["recall"] for r in curve], [r["qps"] for r in curve], marker="o", color=color, label=metric)
                    for r in curve:
                        ax.annotate(str(r["n_probes"]), (r["recall"], r["qps"]), textcoords="offset points", xytext=(4, 4),
                                    fontsize=8)
                for t in pick(engine=TORCH, data=data, metric=metric, arrays="host", batch=batch, k=10):
                    ax.plot([t["recall"]], [t["qps"]], marker="*", markersize=12, color=color, linestyle="none",
                            label=f"PyTorch exact ({metric})")
            ax.set(yscale="log", xlabel="recall@10", ylabel="QPS", title=f"{data}, f32, batch {batch:,}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        fig.tight_layout()
        written.append(out_dir / "search_recall_qps.png")
        fig.savefig(written[-1], dpi=120)
        plt.close(fig)
    return written


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(sys.argv[1:] if argv is None else argv)
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / "search_bench.json"
    if args.from_json:
        doc = json.loads(args.from_json.read_text())
    else:
        with tempfile.TemporaryDirectory(prefix="search_bench_") as dump:
            run_search_bench(args, extra, json_path, Path(dump))
            doc = json.loads(json_path.read_text())
            doc["driver_release"] = driver_release()
            doc["results"] += torch_rows(doc, Path(dump)) or []
        json_path.write_text(json_text(doc))
    md = render_markdown(doc)
    print(md)
    (args.out / "search_bench.md").write_text(md + "\n")
    for f in plot(doc, args.out):
        print(f"search_bench.py: wrote {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

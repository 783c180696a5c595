#!/usr/bin/env python3
"""The proof of concept's demo, on the `udf` package.

Both examples of the PoC (cuVS IVF-Flat metric UDFs), written as its users wrote them:

1. a weighted squared L2 metric written in Python with one f32 array capture, compiled by
   numba-cuda-mlir (or numba-cuda, --backend) to LTO-IR, packaged by udfc and linked by
   udf-link into the IVF-Flat scan kernels;
2. plain squared L2 from a CUDA C++ source string (`ivf_flat.cuda_source_metric`).

Each is searched through the PoC's API (`ivf_flat.search(SearchParams(n_probes=1, metric=...),
index, queries, 3)`) over an index of one list, so that n_probes=1 scans every vector and the
result can be checked against an exhaustive float64 search; the demo prints, per example, a
table of the queries' neighbours and distances beside the reference's, and whether they match.

    python3 seed_demo.py                      # compiles anywhere; searches where a GPU is
    python3 seed_demo.py --require-gpu        # exit 1 when there is no GPU to search on
    python3 seed_demo.py --backend numba-cuda --archs sm_80,sm_90

Unlike the PoC, compiling needs no GPU: without one the demo compiles and links both metrics
for --archs, prints what it made, and says why it did not search.  Exit status: 0 when every
search matched its reference (or, without --require-gpu, when there was no GPU to search on),
1 otherwise.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np

import udf
from udf import ivf_flat

N_ROWS, DIM, N_QUERIES, K = 2000, 16, 5, 3
DEFAULT_ARCHS = "sm_80,sm_90,sm_100,sm_120"

CUDA_L2 = """
extern "C" __device__ float demo_l2_f32(float x, float y, float acc, const udf_ctx_v1 *ctx) {
  float d = x - y;
  return acc + d * d;
}
"""


def make_metrics(backend: str, weights: np.ndarray):
    """The two metrics of the PoC demo: (Python weighted L2, CUDA source L2)."""

    @ivf_flat.metric(order="min", initial=0.0, coarse_metric="sqeuclidean",
                     captures={"weights": weights}, symbol_name="demo_weighted_l2_update_f32", backend=backend)
    def weighted_l2_update(x, y, acc, ctx):
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d

    l2 = ivf_flat.cuda_source_metric(CUDA_L2, symbol_name="demo_l2_f32")
    return weighted_l2_update, l2


def make_data(seed: int = 2024):
    rng = np.random.default_rng(seed)
    dataset = rng.random((N_ROWS, DIM), dtype=np.float32)
    queries = rng.random((N_QUERIES, DIM), dtype=np.float32)
    weights = rng.uniform(0.5, 2.0, DIM).astype(np.float32)
    return dataset, queries, weights


@dataclass
class Result:
    title: str
    neighbors: np.ndarray  # n_queries x K, from the GPU
    distances: np.ndarray
    ref_neighbors: np.ndarray  # the float64 exhaustive search
    ref_distances: np.ndarray

    def query_ok(self, q: int) -> bool:
        """Same distances as the reference (float32 tolerance) and the ids carry them (ties allowed)."""
        return bool(np.allclose(self.distances[q], self.ref_distances[q], rtol=1e-5, atol=1e-6))

    @property
    def matches(self) -> int:
        return sum(self.query_ok(q) for q in range(len(self.neighbors)))

    def table(self) -> str:
        head = f"{'query':>5} | {'neighbors':<16} | {'distances':<28} | {'reference':<16} | {'max |d - ref|':>13}"
        lines = [f"== {self.title}", head, "-" * len(head)]
        for q in range(len(self.neighbors)):
            ids = " ".join(str(int(i)) for i in self.neighbors[q])
            ref = " ".join(str(int(i)) for i in self.ref_neighbors[q])
            dist = " ".join(f"{d:.5f}" for d in self.distances[q])
            err = float(np.max(np.abs(self.distances[q] - self.ref_distances[q])))
            lines.append(f"{q:>5} | {ids:<16} | {dist:<28} | {ref:<16} | {err:>13.2e}")
        lines.append(f"matches the float64 reference: {self.matches}/{len(self.neighbors)} queries")
        return "\n".join(lines)


def exhaustive(dist64: np.ndarray, k: int):
    order = np.argsort(dist64, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(dist64, order, axis=1)


def search_examples(backend: str) -> list[Result]:
    """Builds the PoC's index and runs both searches on the GPU (raises UdfRuntimeError without one)."""
    dataset, queries, weights = make_data()
    weighted_l2_update, l2 = make_metrics(backend, weights)
    index = ivf_flat.build(ivf_flat.IndexParams(n_lists=1, metric="sqeuclidean"), dataset)
    diff = dataset[None, :, :].astype(np.float64) - queries[:, None, :].astype(np.float64)
    out = []
    for title, metric, ref in [
        (f"Python weighted L2 ({backend}), capture weights: f32[{DIM}]", weighted_l2_update,
         (diff * diff * weights.astype(np.float64)).sum(-1)),
        ("CUDA source-string L2 (NVRTC)", l2, (diff * diff).sum(-1)),
    ]:
        distances, neighbors = ivf_flat.search(ivf_flat.SearchParams(n_probes=1, metric=metric), index, queries, K)
        ref_ids, ref_d = exhaustive(ref, K)
        out.append(Result(title, np.asarray(neighbors), np.asarray(distances), ref_ids, ref_d))
    return out


def compile_examples(backend: str, archs: list[str]) -> list[str]:
    """Compiles and links both metrics for `archs` (no GPU needed); one line per metric."""
    _dataset, _queries, weights = make_data()
    lines = []
    for metric in make_metrics(backend, weights):
        art = udf.compile(metric, archs=archs)
        mod = udf.link([art], archs=archs)
        lines.append(f"{art.symbol:<28} artifact {len(art.data):>7} bytes ({', '.join(f'sm_{a}' for a in art.archs)}), "
                     f"module {len(mod.data):>8} bytes")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="numba-cuda-mlir", choices=["numba-cuda-mlir", "numba-cuda"])
    ap.add_argument("--archs", default=DEFAULT_ARCHS, help="archs to compile for without a GPU (default %(default)s)")
    ap.add_argument("--require-gpu", action="store_true", help="fail when there is no GPU to search on")
    args = ap.parse_args(argv)

    print(f"udf {udf.__version__}: compiling for {args.archs} with {args.backend}")
    for line in compile_examples(args.backend, args.archs.split(",")):
        print("  " + line)
    try:
        info = udf.device_info()
    except udf.UdfRuntimeError as e:
        print(f"no GPU to search on ({e.status_name}: {e.message})")
        return 1 if args.require_gpu else 0
    print(f"device: {info['name']} (sm_{info['arch']})\n")
    results = search_examples(args.backend)
    for r in results:
        print(r.table() + "\n")
    ok = all(r.matches == len(r.neighbors) for r in results)
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

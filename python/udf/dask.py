"""`udf.dask`: an IVF-Flat index spread over the GPU workers of a Dask distributed cluster.

    from distributed import Client
    import udf, udf.dask

    cluster = udf.dask.local_gpu_cluster([0, 1])        # or dask-cuda, or `dask worker` per GPU
    client = Client(cluster)
    parts = [lambda: np.load("/data/part-0.npy"), lambda: np.load("/data/part-1.npy")]
    index = udf.dask.Index.build(client, weighted_l2, parts, n_lists=4096)
    distances, neighbors = index.search(queries, k=10, n_probes=32)
    index.save("/shared/index")                          # a shard file per worker and a manifest
    index = udf.dask.Index.load(client, "/shared/index", weighted_l2)

Shards are vector shards over shared centroids (docs/scale-out.md, "Many machines"): every shard
holds some of the vectors, each in the list of its nearest shared centroid (the balanced rule of
udf.Index.build, applied per shard; balance=0 is the plain nearest centroid).  The centroids are
trained once, by k-means on one worker over a sample that each shard draws from its own rows
(or given: `centroids=`).  The data never moves: each worker loads or computes its shard's rows
itself (a callable, a Dask array's chunks, a Delayed or Future, or a NumPy array scattered to it).

A search is one direct RPC (no scheduler round trips) to the first shard's Dask actor; in a tree
over the shards, each actor passes the queries on to its children's actors, searches its own
shard on its GPU (udf.Index.search: the same kernels as one process), and merges its children's
top-k into its own, so the top-k meet in a tree of pairwise merges on the workers and the client
gets one result.  Every shard probes the same lists (the same centroids), so the
result is the exact top-k over the probed lists' vectors of all shards: with balance=0, the
distances of one udf.Index built over all the rows with these centroids and balance=0, bit for
bit.  Ties: the smaller shard first, then the shard's own order.

One worker per GPU: each shard's index is built on its worker's default device (CUDA device 0
of what the worker sees: run workers with CUDA_VISIBLE_DEVICES set, as dask-cuda and
local_gpu_cluster do).  Shards live in their worker's process; a worker that dies loses its
shard (save and load again).  Needs `dask` and `distributed` (pip install udf[dask]).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import io
import json
import os
import threading
import uuid
from typing import Any, Mapping, Sequence

import numpy as np

from . import _artifact, _cuda
from ._files import write_atomic
from .errors import Status, UdfRuntimeError
from ._index import Index as LocalIndex, resolve_coarse_weights

# This process declares metrics for the workers, which search them on their own GPUs: no driver
# start here for a declaration (an index of this process's own still starts it).
_cuda.no_start_on_declaration()

__all__ = ["Index", "local_gpu_cluster", "merge_topk", "merge_tree", "plan_row_chunks", "read_manifest"]

MANIFEST = "udf-dask.json"
MANIFEST_FORMAT = "udf.dask.index.v1"
CENTROIDS = "centroids.npy"

# ---------------------------------------------------------------------------- pure helpers


def merge_topk(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], k: int,
               order: str) -> tuple[np.ndarray, np.ndarray]:
    """The k best of two top-k results ((distances, ids), n x ka and n x kb, each best first and
    padded with id -1): best first by distance (smallest for order "min", largest for "max"),
    ties to `a` before `b` and then to each one's own order; padding last.  n x k out."""
    da, ia = a
    db, ib = b
    if order not in ("min", "max"):
        raise ValueError(f"order {order!r}: expected 'min' or 'max'")
    if da.shape[0] != db.shape[0] or da.shape != ia.shape or db.shape != ib.shape:
        raise ValueError(f"merge_topk: shapes {da.shape}, {ia.shape} and {db.shape}, {ib.shape} do not match")
    d = np.concatenate([da, db], axis=1)
    i = np.concatenate([ia, ib], axis=1)
    key = d if order == "min" else -d
    pad = i < 0
    # lexsort is stable: the last key sorts first; equal (pad, key) keep their column order.
    cols = np.lexsort((key, pad), axis=1)[:, :k]
    rows = np.arange(d.shape[0])[:, None]
    out_d, out_i = d[rows, cols], i[rows, cols]
    if out_d.shape[1] < k:  # fewer candidates than k in all: pad
        extra = k - out_d.shape[1]
        worst = np.float32(np.inf if order == "min" else -np.inf)
        out_d = np.concatenate([out_d, np.full((d.shape[0], extra), worst, np.float32)], axis=1)
        out_i = np.concatenate([out_i, np.full((d.shape[0], extra), -1, np.int64)], axis=1)
    return np.ascontiguousarray(out_d, np.float32), np.ascontiguousarray(out_i, np.int64)


def plan_row_chunks(chunk_rows: Sequence[int], n_shards: int) -> list[list[int]]:
    """Contiguous groups of a Dask array's row chunks, one per shard, balancing rows: chunk c goes
    to the shard where the middle of its rows falls when the rows are cut into n_shards equal
    parts.  Every chunk goes to one shard, in order; a shard may get none when there are fewer
    chunks than shards."""
    if n_shards < 1:
        raise ValueError("n_shards must be at least 1")
    total = sum(chunk_rows)
    groups: list[list[int]] = [[] for _ in range(n_shards)]
    start = 0
    for c, rows in enumerate(chunk_rows):
        mid2 = 2 * start + rows  # twice the middle row, in integers
        shard = min(n_shards - 1, (mid2 * n_shards) // (2 * total)) if total else 0
        groups[shard].append(c)
        start += rows
    return groups


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of a saved index (a directory written by Index.save), checked."""
    file = os.path.join(os.fspath(path), MANIFEST)
    try:
        with open(file) as f:
            m = json.load(f)
    except FileNotFoundError:
        raise UdfRuntimeError.of(Status.IO, f"{file}: not found (not a directory written by udf.dask.Index.save)")
    except (OSError, ValueError) as e:
        raise UdfRuntimeError.of(Status.BAD_FORMAT, f"{file}: {e}")
    need = {"format": str, "metric": str, "cache_key": str, "dim": int, "n_lists": int, "elem": str,
            "order": str, "shards": list}
    for field, typ in need.items():
        if not isinstance(m.get(field) if isinstance(m, dict) else None, typ):
            raise UdfRuntimeError.of(Status.BAD_FORMAT, f"{file}: field '{field}' is missing or not a {typ.__name__}")
    if m["format"] != MANIFEST_FORMAT:
        raise UdfRuntimeError.of(Status.BAD_FORMAT, f"{file}: format '{m['format']}', expected '{MANIFEST_FORMAT}'")
    if not m["shards"]:
        raise UdfRuntimeError.of(Status.BAD_FORMAT, f"{file}: no shards")
    for n, s in enumerate(m["shards"]):
        if not (isinstance(s, dict) and isinstance(s.get("file"), str) and isinstance(s.get("size"), int)
                and "/" not in s["file"] and s["file"] not in ("", ".", "..")):
            raise UdfRuntimeError.of(Status.BAD_FORMAT, f"{file}: shards[{n}] needs a plain 'file' name and an int 'size'")
    return m


def _read_centroids(path, m: dict) -> np.ndarray | None:
    if "centroids" not in m:
        return None
    name = m["centroids"]
    if not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
        raise UdfRuntimeError.of(Status.BAD_FORMAT, f"{os.path.join(os.fspath(path), MANIFEST)}: field 'centroids' "
                                 "must be a plain file name")
    file = os.path.join(os.fspath(path), name)
    try:
        c = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise UdfRuntimeError.of(Status.BAD_FORMAT, f"{file}: {e}")
    if c.dtype != np.float32 or c.shape != (m["n_lists"], m["dim"]):
        raise UdfRuntimeError.of(Status.BAD_FORMAT, f"{file}: {c.dtype} {c.shape}; the manifest says float32 "
                                 f"({m['n_lists']}, {m['dim']})")
    return c


def portable_metric(metric, archs: Sequence[int] | None = None):
    """What a worker can unpickle for `metric`: an Artifact (a metric object compiled here for
    `archs`, default udf.DEFAULT_ARCHS; a .udfa file read here), the bytes of a linked Module
    (a Module, a .udfm file), or a list of those.  Metric objects hold locks and compiled state
    that do not pickle; Artifacts and module bytes do."""
    if isinstance(metric, (list, tuple)):
        return [portable_metric(m, archs) for m in metric]
    if isinstance(metric, _artifact.Artifact):
        return metric
    if isinstance(metric, _artifact.Module):
        if metric.data is None:
            raise ValueError("udf.dask: a Module linked on demand has no bytes to send to workers; pass its metric")
        return ("udfm", bytes(metric.data))
    if isinstance(metric, (str, os.PathLike)):
        p = os.fspath(metric)
        if p.endswith(".udfm"):
            return ("udfm", _artifact.load_module(p).data)
        return _artifact.Artifact.load(p)
    return _artifact.compile(metric, archs=list(archs) if archs else list(_artifact.DEFAULT_ARCHS))


def _spec_metric_info(spec) -> "_artifact.MetricInfo | None":
    """The metric of what portable_metric gave (a build takes the only one), or None."""
    items = spec if isinstance(spec, list) else [spec]
    for item in items:
        if isinstance(item, tuple) and item and item[0] == "udfm":
            metrics = _artifact.Module.from_bytes(item[1]).metrics
            return metrics[0] if len(metrics) == 1 else None
        if isinstance(item, _artifact.Artifact) and not item.is_filter:
            return item.info
    return None


def _worker_metric(spec):
    if isinstance(spec, list):
        return [_worker_metric(s) for s in spec]
    if isinstance(spec, tuple) and spec and spec[0] == "udfm":
        return _artifact.Module.from_bytes(spec[1])
    return spec


# ---------------------------------------------------------------------------- worker side

# The shards held by this process (a Dask worker): {(index key, shard): state}.
_SHARDS: dict[tuple[str, int], dict] = {}
_SHARDS_LOCK = threading.Lock()


def _shard(key: str, shard: int) -> dict:
    with _SHARDS_LOCK:
        st = _SHARDS.get((key, shard))
    if st is None:
        raise UdfRuntimeError.of(Status.INVALID_ARGUMENT,
                                 f"udf.dask: shard {shard} of index {key} is not on this worker (did it restart?)")
    return st


def _as_rows(value):
    """(data, ids or None) from what a part gave: an array, or (array, ids)."""
    if isinstance(value, tuple) and len(value) == 2:
        data, ids = value
        return data, (None if ids is None else np.ascontiguousarray(ids, np.int64))
    return value, None


def _w_load(key: str, shard: int, part, *chunks) -> dict:
    """Puts a shard's rows on this worker: `part` is a callable (called here), or None with the
    Dask array chunks in `chunks` (concatenated), or the rows themselves."""
    if callable(part):
        value = part()
    elif part is None:
        value = np.concatenate(chunks, axis=0) if chunks else None
    else:
        value = part
    data, ids = _as_rows(value)
    if not hasattr(data, "shape") or len(data.shape) != 2:
        raise ValueError(f"udf.dask: part {shard} gave {type(data).__name__} "
                         f"{getattr(data, 'shape', '')}: expected a 2-D array (rows x dim) or (array, ids)")
    if data.shape[0] == 0:
        raise ValueError(f"udf.dask: part {shard} has no rows")
    if ids is not None and ids.shape != (data.shape[0],):
        raise ValueError(f"udf.dask: part {shard}: ids have shape {ids.shape}, expected ({data.shape[0]},)")
    with _SHARDS_LOCK:
        _SHARDS[(key, shard)] = {"data": data, "ids": ids}
    return {"rows": int(data.shape[0]), "dim": int(data.shape[1]), "ids": ids is not None}


def _w_sample(key: str, shard: int, n: int, seed: int) -> np.ndarray:
    """n rows of the shard's data, without replacement (host numpy)."""
    data = _shard(key, shard)["data"]
    rows = data.shape[0]
    pick = np.sort(np.random.default_rng([seed, shard]).choice(rows, size=min(n, rows), replace=False))
    return _to_host(data[pick] if isinstance(data, np.ndarray) else data[_like(data, pick)])


def _like(array, index: np.ndarray):
    """`index` in the library of `array` (CuPy and PyTorch index with their own arrays)."""
    mod = type(array).__module__.split(".")[0]
    if mod == "cupy":
        # cupy is optional: imported only for a cupy-like result
        import cupy
        return cupy.asarray(index)
    if mod == "torch":
        # torch is optional: imported only for a torch-like result
        import torch
        return torch.as_tensor(index, device=array.device)
    return index


def _to_host(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x)
    if hasattr(x, "get"):  # CuPy
        return np.ascontiguousarray(x.get())
    if hasattr(x, "cpu"):  # PyTorch
        return np.ascontiguousarray(x.cpu().numpy())
    return np.ascontiguousarray(np.asarray(x))


def _w_train(metric, samples: list, n_lists: int, kmeans_iters: int, seed: int, balance: float,
             coarse_weights=None) -> np.ndarray:
    """Centroids by k-means over the shards' samples, on this worker's GPU."""
    sample = np.concatenate([s for s in samples if len(s)], axis=0)
    if sample.shape[0] < n_lists:
        raise ValueError(f"udf.dask: the training sample has {sample.shape[0]} rows, fewer than n_lists = {n_lists}")
    ix = LocalIndex.build(_worker_metric(metric), sample, n_lists=n_lists, kmeans_iters=kmeans_iters, seed=seed,
                          balance=balance, max_train_rows=sample.shape[0], coarse_weights=coarse_weights)
    return ix.centroids()


def _w_build(key: str, shard: int, metric, centroids: np.ndarray, first_id: int, balance: float,
             coarse_weights=None) -> dict:
    st = _shard(key, shard)
    data, ids = st.pop("data"), st.pop("ids")
    if ids is None:
        ids = np.arange(first_id, first_id + data.shape[0], dtype=np.int64)
    ix = LocalIndex.build(_worker_metric(metric), data, ids=ids, n_lists=centroids.shape[0], balance=balance,
                          centroids=centroids, coarse_weights=coarse_weights)
    st["index"] = ix
    return _w_info(key, shard)


def _w_info(key: str, shard: int) -> dict:
    ix = _shard(key, shard)["index"]
    info = ix.info
    return {"size": int(info["size"]), "dim": int(info["dim"]), "n_lists": int(info["n_lists"]),
            "elem": ix.elem, "metric": ix.metric.symbol, "order": ix.metric.order,
            "cache_key": ix.metric.cache_key, "max_k": int(ix.metric.max_k), "device": ix.device,
            "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


def _w_search(key: str, shard: int, queries: np.ndarray, k: int, n_probes: int, captures, max_batch: int):
    ix = _shard(key, shard)["index"]
    size = len(ix)
    kk = min(k, size)
    d, i = ix.search(queries, k=kk, n_probes=min(n_probes, ix.n_lists), captures=captures, max_batch=max_batch)
    if kk < k:  # a shard smaller than k: pad as the runtime pads
        worst = np.float32(np.inf if ix.metric.order == "min" else -np.inf)
        d = np.concatenate([d, np.full((d.shape[0], k - kk), worst, np.float32)], axis=1)
        i = np.concatenate([i, np.full((i.shape[0], k - kk), -1, np.int64)], axis=1)
    return np.asarray(d), np.asarray(i)


def _w_save(key: str, shard: int, path: str) -> None:
    _shard(key, shard)["index"].save(path)


def _w_open(key: str, shard: int, metric, path: str) -> dict:
    ix = LocalIndex.load(path, _worker_metric(metric))
    with _SHARDS_LOCK:
        _SHARDS[(key, shard)] = {"index": ix}
    return _w_info(key, shard)


def _w_drop(key: str) -> int:
    with _SHARDS_LOCK:
        mine = [s for s in _SHARDS if s[0] == key]
        for s in mine:
            del _SHARDS[s]
    return len(mine)


class _ShardActor:
    """A Dask actor beside shard `shard` of index `key` on its worker: searches reach it by a
    direct RPC from the client or from its parent in the merge tree, without the scheduler
    (whose batched messages add milliseconds to every task)."""

    def __init__(self, key: str, shard: int):
        self.key, self.shard = key, shard
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"udf-shard-{shard}")

    async def search(self, queries, k: int, n_probes: int, captures, max_batch: int, order: str, children: list):
        """This shard's top-k merged with those of its subtrees: children is [(actor, its children),
        ...] in shard order, each subtree's shards after this one's and before the next's."""
        loop = asyncio.get_running_loop()
        kids = [actor.search(queries, k, n_probes, captures, max_batch, order, grand) for actor, grand in children]
        out = await loop.run_in_executor(self._pool, _w_search, self.key, self.shard, queries, k, n_probes, captures,
                                         max_batch)
        for kid in kids:
            out = merge_topk(out, await kid, k, order)
        return out


def merge_tree(items: list) -> tuple:
    """The merge tree over items[0 .. n) in order: (root, [(child, its children), ...]) where a
    node covering [lo, hi) holds lo and its children cover [lo + 1, mid) and [mid, hi), so that
    merging a node's own result, then each child's, keeps the items' order.  Depth about log2 n."""
    def node(lo: int, hi: int):
        rest = hi - lo - 1
        mid = lo + 1 + (rest + 1) // 2
        kids = [node(a, b) for a, b in ((lo + 1, mid), (mid, hi)) if b > a]
        return (items[lo], kids)
    if not items:
        raise ValueError("merge_tree: no items")
    return node(0, len(items))


# ---------------------------------------------------------------------------- client side


def _workers_of(client, workers: Sequence[str] | None) -> list[str]:
    if workers is None:
        try:
            info = client.scheduler_info(n_workers=-1)  # newer distributed lists 5 workers unless asked
        except TypeError:
            info = client.scheduler_info()
        known = sorted(info["workers"])
    else:
        known = list(workers)
    if not known:
        raise ValueError("udf.dask: the cluster has no workers")
    return known


class Index:
    """An index whose shards live on Dask workers, one shard a worker (see the module docstring).

    Index.build(client, metric, parts, ...) / Index.load(client, path, metric); then search,
    save, close.  Properties: n_shards, shards (worker, size, device), size, dim, n_lists, elem,
    metric (symbol), order, centroids (numpy float32, n_lists x dim)."""

    def __init__(self, client, key: str, workers: list[str], infos: list[dict], metric_spec,
                 centroids: np.ndarray | None):
        self._client = client
        self._key = key
        self._workers = workers  # per shard
        self._infos = infos
        self._metric_spec = metric_spec
        self._centroids = centroids
        self._closed = False
        first = infos[0]
        for s, inf in enumerate(infos):
            for f in ("dim", "n_lists", "elem", "metric", "cache_key"):
                if inf[f] != first[f]:
                    raise UdfRuntimeError.of(Status.MISMATCH, f"udf.dask: shard {s} has {f} {inf[f]!r}, "
                                             f"shard 0 has {first[f]!r}")
        # one search actor a shard, on its worker; the futures keep them alive
        self._actor_futures = [client.submit(_ShardActor, key, s, workers=[w], allow_other_workers=False, actor=True)
                               for s, w in enumerate(workers)]
        self._tree = merge_tree(client.gather(self._actor_futures))

    # ------------------------------------------------------------------ creation

    @classmethod
    def build(cls, client, metric, parts, *, n_lists: int = 1024, kmeans_iters: int = 20, seed: int = 1234,
              balance: float = 2.0, max_train_rows: int = 0, centroids=None, coarse_weights=None,
              archs: Sequence[int] | None = None, workers: Sequence[str] | None = None) -> "Index":
        """Builds one shard per part, each on a worker (part i on workers[i % len(workers)]).

        metric   a metric object, Artifact, .udfa / .udfm path, Module or list of them; objects are
                 compiled here for `archs` (default udf.DEFAULT_ARCHS) and linked on each worker
                 for its GPU
        parts    a 2-D dask.array.Array (its row chunks grouped into one contiguous part per
                 worker, ids = global row numbers), or a list with one item per shard: a callable
                 run on the worker (returns rows, or (rows, ids)), a dask Delayed or Future, or an
                 array (sent to the worker).  Without ids, shard i's rows get the ids after those
                 of shards 0 .. i-1.
        centroids  n_lists x dim (host): use these instead of k-means
        coarse_weights  as udf.Index.build's (None: the metric's declared ones, if it names a
                 capture for them), for k-means and every shard
        n_lists, kmeans_iters, seed, balance, max_train_rows: as udf.Index.build; k-means runs on
                 the first worker over a sample that each shard draws from its rows in proportion
                 to its size (max_train_rows in all; 0: 256 * n_lists)
        workers  worker addresses (default: all of the cluster's, sorted)
        """
        # dask is optional (the dask extra): imported on first use
        import dask.array as da
        from dask.delayed import Delayed
        ws = _workers_of(client, workers)
        spec = portable_metric(metric, archs)
        key = f"udf-dask-{uuid.uuid4().hex}"
        futures = []
        if isinstance(parts, da.Array):
            if parts.ndim != 2:
                raise ValueError(f"udf.dask: a Dask array of data must be 2-D, not {parts.ndim}-D")
            arr = parts.rechunk({1: -1})
            groups = plan_row_chunks(arr.chunks[0], len(ws))
            blocks = arr.to_delayed().ravel()
            for s, g in enumerate(groups):
                if not g:
                    continue
                chunk_futs = client.compute([blocks[c] for c in g], workers=[ws[s]], allow_other_workers=False)
                futures.append(client.submit(_w_load, key, len(futures), None, *chunk_futs, workers=[ws[s]],
                                             allow_other_workers=False, pure=False))
            shard_workers = [ws[s] for s, g in enumerate(groups) if g]
        else:
            if not isinstance(parts, (list, tuple)) or not parts:
                raise TypeError("udf.dask: parts must be a 2-D dask.array.Array or a non-empty list of parts")
            shard_workers = [ws[s % len(ws)] for s in range(len(parts))]
            for s, part in enumerate(parts):
                w = shard_workers[s]
                if isinstance(part, Delayed):
                    part = client.compute(part, workers=[w], allow_other_workers=False)
                elif isinstance(part, np.ndarray):
                    part = client.scatter(part, workers=[w], broadcast=False, hash=False)
                futures.append(client.submit(_w_load, key, s, part, workers=[w], allow_other_workers=False,
                                             pure=False))
        index = None
        try:
            loaded = client.gather(futures)
            dims = {x["dim"] for x in loaded}
            if len(dims) != 1:
                raise ValueError(f"udf.dask: the parts have different widths {sorted(dims)}")
            if len({x["ids"] for x in loaded}) != 1:
                raise ValueError("udf.dask: some parts gave ids and some did not: give ids for all or none")
            rows = [x["rows"] for x in loaded]
            dim = dims.pop()
            w_host = None
            info = _spec_metric_info(spec)
            if info is not None:
                coarse_weights = resolve_coarse_weights(coarse_weights, info, metric)
            if coarse_weights is not None:
                w_host = np.ascontiguousarray(_to_host(coarse_weights), np.float32)
                if w_host.shape != (dim,):
                    raise ValueError(f"udf.dask: coarse_weights have shape {w_host.shape}; expected ({dim},)")
            if centroids is None:
                n_train = max_train_rows or 256 * n_lists
                total = sum(rows)
                share = [max(1, min(r, -(-n_train * r // total))) for r in rows]  # ceil, at least a row
                samples = [client.submit(_w_sample, key, s, share[s], seed, workers=[shard_workers[s]],
                                         allow_other_workers=False, pure=False) for s in range(len(rows))]
                cen = client.submit(_w_train, spec, samples, n_lists, kmeans_iters, seed, balance, w_host,
                                    workers=[shard_workers[0]], allow_other_workers=False, pure=False).result()
            else:
                cen = np.ascontiguousarray(np.asarray(centroids), np.float32)
                if cen.shape != (n_lists, dim):
                    raise ValueError(f"udf.dask: centroids have shape {cen.shape}; expected ({n_lists}, {dim})")
            cen_f = client.scatter(cen, workers=sorted(set(shard_workers)), broadcast=True, hash=False)
            first_ids = np.concatenate([[0], np.cumsum(rows)[:-1]]).tolist()
            built = [client.submit(_w_build, key, s, spec, cen_f, int(first_ids[s]), float(balance), w_host,
                                   workers=[shard_workers[s]], allow_other_workers=False, pure=False)
                     for s in range(len(rows))]
            index = cls(client, key, shard_workers, client.gather(built), spec, cen)
            return index
        finally:
            if index is None:
                client.run(_w_drop, key, workers=sorted(set(shard_workers)))

    @classmethod
    def load(cls, client, path: str | os.PathLike, metric, *, archs: Sequence[int] | None = None,
             workers: Sequence[str] | None = None) -> "Index":
        """Reads an index written by save: shard i on workers[i % len(workers)], each worker
        reading its file (so `path` must be where the workers see it).  The metric must be the
        one the index was built with, by symbol, element type and coarse metric, in any build of
        it (udf.Index.load)."""
        m = read_manifest(path)
        ws = _workers_of(client, workers)
        spec = portable_metric(metric, archs)
        key = f"udf-dask-{uuid.uuid4().hex}"
        shard_workers = [ws[s % len(ws)] for s in range(len(m["shards"]))]
        base = os.path.abspath(os.fspath(path))
        futs = [client.submit(_w_open, key, s, spec, os.path.join(base, sh["file"]), workers=[shard_workers[s]],
                              allow_other_workers=False, pure=False) for s, sh in enumerate(m["shards"])]
        index = None
        try:
            infos = client.gather(futs)
            for s, (inf, sh) in enumerate(zip(infos, m["shards"])):
                # The metric by symbol: any artifact of it loads the shards (udf.Index.load).
                if inf["size"] != sh["size"] or inf["metric"] != m["metric"]:
                    raise UdfRuntimeError.of(Status.MISMATCH, f"{path}: shard {s} ({sh['file']}) holds {inf['size']} "
                                             f"vectors of metric {inf['metric']}; the manifest says {sh['size']} "
                                             f"of {m['metric']}")
            cen = _read_centroids(path, m)
            index = cls(client, key, shard_workers, infos, spec, cen)
            return index
        finally:
            if index is None:
                client.run(_w_drop, key, workers=sorted(set(shard_workers)))

    # ------------------------------------------------------------------ use

    def search(self, queries, k: int = 10, n_probes: int = 32, *, captures: Mapping[str, Any] | None = None,
               batch_rows: int = 0, max_batch: int = 0):
        """The k nearest neighbours of each query over all shards: (distances float32, ids int64),
        n x k NumPy arrays (k for a 1-D query), best first, padded with id -1 and the worst
        distance.  queries: host rows (NumPy or anything np.asarray takes).  batch_rows: send
        the queries in batches of this many (0: one batch), each searched and merged as soon as
        it arrives; max_batch and captures: as udf.Index.search, per shard."""
        self._check_open()
        q = np.asarray(queries)
        one = q.ndim == 1
        if one:
            q = q.reshape(1, -1)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"queries: shape {np.shape(queries)}; expected (n, {self.dim}) or ({self.dim},)")
        if not 1 <= k <= (self._infos[0]["max_k"] or k):
            raise UdfRuntimeError.of(Status.INVALID_ARGUMENT, f"k = {k} must be in 1 .. {self._infos[0]['max_k']}")
        if k > self.size:
            raise UdfRuntimeError.of(Status.INVALID_ARGUMENT, f"k = {k} exceeds the index size {self.size}")
        if not 1 <= n_probes <= self.n_lists:
            raise UdfRuntimeError.of(Status.INVALID_ARGUMENT, f"n_probes = {n_probes} must be in 1 .. {self.n_lists}")
        step = batch_rows if batch_rows > 0 else max(1, q.shape[0])
        root, children = self._tree
        pending = [root.search(np.ascontiguousarray(q[r0:r0 + step]), k, n_probes, captures, max_batch, self.order,
                               children) for r0 in range(0, q.shape[0], step)]
        parts = [f.result() for f in pending]
        d = np.concatenate([p[0] for p in parts], axis=0)
        i = np.concatenate([p[1] for p in parts], axis=0)
        return (d[0], i[0]) if one else (d, i)

    def save(self, path: str | os.PathLike) -> None:
        """Writes shard i to PATH/shard-NNNN.udfi from its worker, then PATH/udf-dask.json from
        here (atomically: a manifest only once every shard file is written).  PATH is a
        directory the workers and this process see (a shared file system)."""
        self._check_open()
        base = os.path.abspath(os.fspath(path))
        os.makedirs(base, exist_ok=True)
        files = [f"shard-{s:04d}.udfi" for s in range(self.n_shards)]
        self._client.gather([self._client.submit(_w_save, self._key, s, os.path.join(base, files[s]), workers=[w],
                                                 allow_other_workers=False, pure=False)
                             for s, w in enumerate(self._workers)])
        first = self._infos[0]
        manifest = {"format": MANIFEST_FORMAT, "metric": first["metric"], "cache_key": first["cache_key"],
                    "dim": first["dim"], "n_lists": first["n_lists"], "elem": first["elem"],
                    "order": first["order"], "shards": [{"file": f, "size": inf["size"]}
                                                        for f, inf in zip(files, self._infos)]}
        if self._centroids is not None:
            manifest["centroids"] = CENTROIDS
            npy = io.BytesIO()
            np.save(npy, self._centroids)
            write_atomic(os.path.join(base, CENTROIDS), npy.getvalue())
        write_atomic(os.path.join(base, MANIFEST), (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())

    def close(self) -> None:
        """Frees the shards on the workers (their GPU memory).  The index is unusable after."""
        if not self._closed:
            self._closed = True
            self._tree = None
            self._actor_futures = []
            self._client.run(_w_drop, self._key, workers=sorted(set(self._workers)))

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise UdfRuntimeError.of(Status.INVALID_ARGUMENT, "udf.dask.Index: the index was closed")

    # ------------------------------------------------------------------ properties

    @property
    def n_shards(self) -> int:
        return len(self._workers)

    @property
    def shards(self) -> list[dict]:
        """Per shard: worker (address), size (vectors), device (the worker's CUDA ordinal) and
        visible_devices (the worker's CUDA_VISIBLE_DEVICES, None when unset)."""
        return [{"worker": w, "size": inf["size"], "device": inf["device"], "visible_devices": inf["visible_devices"]}
                for w, inf in zip(self._workers, self._infos)]

    @property
    def size(self) -> int:
        return sum(inf["size"] for inf in self._infos)

    def __len__(self) -> int:
        return self.size

    @property
    def dim(self) -> int:
        return self._infos[0]["dim"]

    @property
    def n_lists(self) -> int:
        return self._infos[0]["n_lists"]

    @property
    def elem(self) -> str:
        return self._infos[0]["elem"]

    @property
    def metric(self) -> str:
        return self._infos[0]["metric"]

    @property
    def order(self) -> str:
        return self._infos[0]["order"]

    @property
    def centroids(self) -> np.ndarray | None:
        """The shared centroids (n_lists x dim float32); None for an index loaded from a
        manifest without them."""
        return None if self._centroids is None else self._centroids.copy()

    def __repr__(self) -> str:
        return (f"<udf.dask.Index {self.metric} {self.elem} dim={self.dim} size={self.size} n_lists={self.n_lists} "
                f"shards={self.n_shards}{' closed' if self._closed else ''}>")


def local_gpu_cluster(devices: Sequence[int] = (0,), **scheduler_options):
    """A local Dask cluster with one single-threaded worker process per entry of `devices`, each
    seeing only that GPU (CUDA_VISIBLE_DEVICES): what dask-cuda's LocalCUDACluster gives, without
    it.  A device may be listed twice (two workers sharing one GPU, for tests).  Returns a
    distributed.SpecCluster; pass it to distributed.Client."""
    # distributed is optional (the dask extra): imported on first use
    from distributed import Nanny, Scheduler, SpecCluster
    if not devices:
        raise ValueError("local_gpu_cluster: devices is empty")
    workers = {f"gpu{j}-{int(d)}": {"cls": Nanny, "options": {"nthreads": 1, "memory_limit": 0,
                                                               "env": {"CUDA_VISIBLE_DEVICES": str(int(d))}}}
               for j, d in enumerate(devices)}
    opts = {"dashboard_address": None, **scheduler_options}
    return SpecCluster(scheduler={"cls": Scheduler, "options": opts}, workers=workers)

"""Which lists should a query probe?  An offline study on udf's own lists (issue 49, 10M recall).

For each data set: build a udf index (built-in L2, default parameters), read its lists back from
the saved file (every row's list), compute each list's spread m2 (mean squared distance of its
rows to its centroid), then for 1000s of queries rank the lists by several keys and report, for
each n_probes, recall@10 (the share of the exact top 10 whose list is probed: what an IVF-Flat
scan returns) and the vectors scanned a query.  `base` is today's key, ||q - c||^2; `+a*m2` adds
a * (m2_c - mean m2).  udf's own search at P32 checks the offline model.
"""
import importlib.util, json, os, struct, sys, time
import numpy as np, cupy as cp
import udf

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("cc", os.path.join(here, "../../cuvs_compare.py"))
cc = importlib.util.module_from_spec(spec); spec.loader.exec_module(cc)
out_dir = os.environ.get("OUT", "/tmp")
K, DIM = 10, 128
PS = [8, 12, 16, 20, 24, 28, 32, 40, 48, 64]
A = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8]


def read_lists(path, rows):
    """Every row's list from a .udfi file (index_file.h's layout; ids are 0 .. rows-1)."""
    with open(path, "rb") as f:
        head = f.read(8 + 4 * 6 + 8 * 3)
        _, _, elem, dim, n_lists, coarse = struct.unpack_from("<6I", head, 8)
        off = 8 + 24 + 24
        f.seek(off); (ls,) = struct.unpack("<I", f.read(4)); off += 4 + ls
        f.seek(off); (lk,) = struct.unpack("<I", f.read(4)); off += 4 + lk
        off += n_lists * dim * 4
        f.seek(off); sizes = np.frombuffer(f.read(8 * n_lists), dtype=np.uint64).astype(np.int64); off += 8 * n_lists
        es = {0: 4, 1: 2, 2: 1, 3: 1}[elem]
        lab = np.full(rows, -1, dtype=np.int32)
        for l in range(n_lists):
            f.seek(off); ids = np.frombuffer(f.read(8 * int(sizes[l])), dtype=np.int64)
            lab[ids] = l
            off += int(sizes[l]) * (8 + dim * es)
    assert (lab >= 0).all()
    return lab, sizes


def study(name, rows, lists, clusters, spread, nq, seed=1):
    t0 = time.time()
    centres = cc.make_centres(cp, clusters, DIM, seed)
    X = cc.draw(cp, centres, rows, spread, seed * 1000 + rows % 997 + 1)
    Q = cc.draw(cp, centres, nq, spread, seed * 1000 + rows % 997 + 2)
    gt, _ = cc.exact_topk(cp, X, Q, K)
    cp.cuda.Device().synchronize()
    t1 = time.time()
    ix = udf.Index.build(udf.builtin_metric("sqeuclidean"), X, n_lists=lists)
    t2 = time.time()
    _, ids32 = ix.search(Q, k=K, n_probes=32)
    ids32 = cp.asarray(ids32)
    rec_udf32 = float((ids32[:, :, None] == gt[:, None, :]).any(1).sum()) / (nq * K)
    path = "/tmp/probe_exp.udfi"
    ix.save(path)
    C = cp.asarray(np.asarray(ix.centroids(), dtype=np.float32))
    del ix
    lab_h, sizes_h = read_lists(path, rows)
    os.unlink(path)
    lab = cp.asarray(lab_h)
    sizes = cp.asarray(sizes_h).astype(cp.float64)
    m2 = cp.zeros(lists, dtype=cp.float64)
    for s in range(0, rows, 1 << 21):
        d = X[s:s + (1 << 21)] - C[lab[s:s + (1 << 21)]]
        m2 += cp.bincount(lab[s:s + (1 << 21)], weights=(d * d).sum(1).astype(cp.float64), minlength=lists)
    m2 /= cp.maximum(sizes, 1)
    gl = lab[gt]
    D = (Q * Q).sum(1)[:, None] - 2 * Q @ C.T + (C * C).sum(1)[None, :]
    D = cp.maximum(D, 0).astype(cp.float64)
    pmax = max(PS)

    def curve(key):
        order = cp.argsort(key, axis=1)[:, :pmax]
        cnt = cp.zeros((nq, pmax))
        for j in range(K):
            cnt += cp.cumsum(order == gl[:, j:j + 1], axis=1)
        return (cnt.mean(0) / K).get(), cp.cumsum(sizes[order], axis=1).mean(0).get()

    keys = {"base": D}
    for a in A:
        keys[f"+{a}*m2"] = D + a * (m2 - m2.mean())[None, :]
    ln = cp.log(cp.maximum(sizes, 2))
    keys["gauss-min"] = D + m2[None, :] - 2 * cp.sqrt(m2 / DIM)[None, :] * cp.sqrt(D) * cp.sqrt(2 * ln)[None, :]
    res = {"name": name, "rows": rows, "lists": lists, "clusters": clusters, "spread": spread, "nq": nq,
           "build_s": t2 - t1, "udf_recall_p32": rec_udf32,
           "sizes": {"mean": float(sizes.mean()), "pw": float((sizes ** 2).sum() / sizes.sum())},
           "m2": {"mean": float(m2.mean()), "std": float(m2.std()),
                  "corr_size": float(cp.corrcoef(sizes, m2)[0, 1])}, "curves": {}}
    base_r, base_s = curve(D)
    lines = [f"## {name}: {rows:,} x {DIM}, {lists} lists, {clusters} clusters, spread {spread}, {nq} queries; "
             f"build {t2 - t1:.2f} s; udf search P32 recall {rec_udf32:.4f}",
             f"sizes mean {res['sizes']['mean']:.0f}, probe-weighted {res['sizes']['pw']:.0f}; m2 mean "
             f"{res['m2']['mean']:.2f} std {res['m2']['std']:.2f}, corr(size, m2) {res['m2']['corr_size']:.2f}", "",
             "| key | " + " | ".join(f"P{p}" for p in (8, 16, 32, 64)) + " | recall at base's vectors, P8/16/32/64 |",
             "|---|" + "---|" * 5]
    for kname, key in keys.items():
        r, s = curve(key)
        res["curves"][kname] = {"recall": r.tolist(), "scanned": s.tolist()}
        eq = [float(np.interp(base_s[p - 1], s, r) - base_r[p - 1]) for p in (8, 16, 32, 64)]
        lines.append(f"| {kname} | " + " | ".join(f"{r[p - 1]:.4f}, {s[p - 1]:,.0f}" for p in (8, 16, 32, 64)) +
                     " | " + " ".join(f"{e:+.4f}" for e in eq) + " |")
    lines.append("")
    text = "\n".join(lines)
    print(text, flush=True)
    with open(os.path.join(out_dir, "probe_exp.md"), "a") as f:
        f.write(text + "\n")
    with open(os.path.join(out_dir, f"probe_exp_{name}.json"), "w") as f:
        json.dump(res, f)
    del X, Q, D, keys
    cp.get_default_memory_pool().free_all_blocks()
    print(f"[{name}] {time.time() - t0:.0f} s", flush=True)


which = sys.argv[1:] or ["1m_overlap", "10m_overlap", "1m_many", "10m_many"]
cfg = {"1m_overlap": (1_000_000, 1024, 1024, 0.92, 10000), "10m_overlap": (10_000_000, 4096, 1024, 0.92, 5000),
       "1m_many": (1_000_000, 1024, 4096, 0.55, 10000), "10m_many": (10_000_000, 4096, 16384, 0.55, 5000),
       "1m_clustered": (1_000_000, 1024, 1024, 0.15, 10000)}
for w in which:
    study(w, *cfg[w])

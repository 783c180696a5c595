#!/usr/bin/env python3
"""Inputs and result checks for examples/filters/run.sh (numpy only).

    filters_data.py make DIR [--n 20000] [--dim 64] [--queries 200]
    filters_data.py check DIR FILTER RESULT.npy [--k 10]

`make` writes into DIR: base.npy (n x dim f32, clustered), queries.npy
(queries x dim f32), and the filters' captures: tenants.npy (i32, one tenant
0..9 per id) and prices.npy (f32, one price in [0, 100) per id).  udf-run
gives the vectors the ids 0 .. n-1 (their rows), so both arrays are indexed by
id.  It also writes params.txt with the scalar captures run.sh passes.

`check` reads the ids and distances udf-run wrote (RESULT.npy and
RESULT.distances.npy) and checks them against a float64 numpy brute force
under the same filter (FILTER: same_tenant or price_in_range): every returned
id must pass the filter, rows are padded with -1 only when fewer than k ids
pass, the distances are the squared L2 of the built-in l2 metric, and the
recall against the exact filtered top k is printed.  Exit status 1 on a
mismatch.
"""
import argparse
import os
import sys

import numpy as np

# The scalar captures of the two filters (run.sh reads them from params.txt).
TENANT = 3       # same_tenant: tenant == 3 keeps about 10% of the ids
LO, HI = 10.0, 15.0  # price_in_range: [10, 15] keeps about 5%


def make(args):
    rng = np.random.default_rng(1234)
    centers = rng.normal(0.0, 4.0, size=(64, args.dim)).astype(np.float32)
    labels = rng.integers(0, len(centers), size=args.n)
    base = (centers[labels] + rng.normal(0.0, 1.0, size=(args.n, args.dim))).astype(np.float32)
    qlabels = rng.integers(0, len(centers), size=args.queries)
    queries = (centers[qlabels] + rng.normal(0.0, 1.0, size=(args.queries, args.dim))).astype(np.float32)
    tenants = rng.integers(0, 10, size=args.n).astype(np.int32)
    prices = rng.uniform(0.0, 100.0, size=args.n).astype(np.float32)
    os.makedirs(args.dir, exist_ok=True)
    np.save(os.path.join(args.dir, "base.npy"), base)
    np.save(os.path.join(args.dir, "queries.npy"), queries)
    np.save(os.path.join(args.dir, "tenants.npy"), tenants)
    np.save(os.path.join(args.dir, "prices.npy"), prices)
    with open(os.path.join(args.dir, "params.txt"), "w") as f:
        f.write("n_ids=%d\ntenant=%d\nlo=%g\nhi=%g\n" % (args.n, TENANT, LO, HI))
    print("filters_data: %d x %d vectors, %d queries; tenant %d keeps %d ids, price in [%g, %g] keeps %d"
          % (args.n, args.dim, args.queries, TENANT, int((tenants == TENANT).sum()), LO, HI,
             int(((prices >= LO) & (prices <= HI)).sum())))
    return 0


def check(args):
    base = np.load(os.path.join(args.dir, "base.npy")).astype(np.float64)
    queries = np.load(os.path.join(args.dir, "queries.npy")).astype(np.float64)
    n = len(base)
    if args.filter == "same_tenant":
        keep = np.load(os.path.join(args.dir, "tenants.npy")) == TENANT
    elif args.filter == "price_in_range":
        prices = np.load(os.path.join(args.dir, "prices.npy"))
        keep = (prices >= np.float32(LO)) & (prices <= np.float32(HI))
    else:
        sys.stderr.write("filters_data: unknown filter '%s'\n" % args.filter)
        return 2
    ids = np.load(args.result)
    dists = np.load(args.result[:-len(".npy")] + ".distances.npy")
    k = ids.shape[1]
    kept = np.flatnonzero(keep)
    # Exact filtered search: squared L2 (the built-in l2) over the kept ids only.
    d = ((queries[:, None, :] - base[None, kept, :]) ** 2).sum(axis=2)
    exact = kept[np.argsort(d, axis=1, kind="stable")[:, :k]]
    bad = short = 0
    hits = total = 0
    for q in range(len(queries)):
        row = ids[q]
        real = row[row >= 0]
        if np.any(real >= n) or not np.all(keep[real]):
            bad += 1
            if bad <= 5:
                print("query %d: ids the filter rejects: %s" % (q, [int(i) for i in real if i >= n or not keep[i]]))
            continue
        if len(real) < k:
            short += 1  # the probed lists held fewer than k kept vectors: padded with -1
        if np.any(row[len(real):] >= 0):
            bad += 1
            if bad <= 5:
                print("query %d: an id after the -1 padding: %s" % (q, row))
            continue
        want = ((queries[q] - base[real]) ** 2).sum(axis=1)
        if not np.allclose(dists[q, :len(real)], want, rtol=1e-3, atol=1e-3):
            bad += 1
            if bad <= 5:
                print("query %d: distances %s, expected %s" % (q, dists[q, :len(real)], want))
        hits += len(set(real.tolist()) & set(exact[q].tolist()))
        total += len(exact[q])
    print("%s: %d queries, every returned id passes the filter: %s; %d rows padded; recall@%d against a float64 "
          "brute force under the filter: %.3f" % (args.filter, len(queries), "yes" if bad == 0 else "NO (%d bad rows)" % bad,
                                                  short, k, hits / total if total else 1.0))
    return 1 if bad else 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--n", type=int, default=20000)
    m.add_argument("--dim", type=int, default=64)
    m.add_argument("--queries", type=int, default=200)
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("filter")
    c.add_argument("result")
    args = p.parse_args(argv)
    return make(args) if args.cmd == "make" else check(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

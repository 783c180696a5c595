#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (test/fuzz/corpus/<target>/).

Seeds come from the tests' own inputs (examples/, schemas/tests/, the lit
tests' split-file inputs) and from small files made here in each format
(containers, modules, index files, cache entries, .npy, TEXMEX).  With
--build DIR (a configured build with the examples, e.g. build/), the example
artifacts and the kernel pack's manifest are taken from it too.  Every seed
is a few KB at most.  Run from anywhere; rewrites only corpus/*/seed-* files.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def sha(b):
    return hashlib.sha256(b).digest()


# ---- the artifact/module container (include/udf/artifact/container.h)

def align16(x):
    return (x + 15) & ~15


def container(kind, sections):
    """kind: b"UDFART" / b"UDFMOD"; sections: [(kind, tag, bytes)], the manifest first."""
    n = len(sections)
    off = align16(64 + 64 * n)
    offsets = []
    for _, _, data in sections:
        offsets.append(off)
        off = align16(off + len(data))
    size = off + 32
    out = bytearray(size)
    out[0:8] = b"\x89" + kind + b"\n"
    struct.pack_into("<HHIQIIQ", out, 8, 1, 0, 64, size, n, 0, 64)
    for i, (k, tag, data) in enumerate(sections):
        e = 64 + 64 * i
        struct.pack_into("<IIQQ", out, e, k, tag, offsets[i], len(data))
        out[e + 24:e + 56] = sha(data)
        out[offsets[i]:offsets[i] + len(data)] = data
    out[size - 32:] = sha(bytes(out[:size - 32]))
    return bytes(out)


def canonical(doc):
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def fake_ltoir(arch):
    # Not real LTO-IR: the readers check sizes and hashes, not the payload.
    return b"\x7fNVVM-LTO-IR sm_%d " % arch + bytes(range(48))


def artifact_seeds():
    for path in ("good-weighted-l2.json", "good-i8-inner-product.json"):
        m = json.load(open(os.path.join(ROOT, "schemas", "tests", path)))
        payloads = []
        targets = []
        for t in m["targets"]:
            arch = int(t["arch"][3:])
            data = fake_ltoir(arch)
            payloads.append((2, arch, data))
            targets.append({"arch": t["arch"], "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        m["targets"] = targets
        man = canonical(m).encode()
        put("container", path.replace(".json", ".udfa"), container(b"UDFART", [(1, 0, man)] + payloads))
    # The smallest container of each kind, and one with an empty payload.
    put("container", "empty-manifest.udfa", container(b"UDFART", [(1, 0, b"{}")]))
    put("container", "module-kind.udfm", container(b"UDFMOD", [(1, 0, b"{}"), (4, 0, b"")]))
    put("container", "truncated.udfa", container(b"UDFART", [(1, 0, b"{}")])[:80])


def module_manifest(fatbin):
    return {
        "kind": "udf.module",
        "version": {"major": 1, "minor": 0},
        "abi": {"id": "ivf_flat.metric.v1", "version": 1},
        "kernel_pack": {"name": "ivf_flat_v1", "sha256": "1" * 64},
        "archs": ["sm_90", "sm_100"],
        "image": {"kind": "fatbin", "size": len(fatbin), "sha256": hashlib.sha256(fatbin).hexdigest()},
        "artifacts": [{
            "index": 0, "source_name": "weighted_l2.cu", "symbol": "weighted_l2", "finalize": None,
            "element_type": "f32", "accumulator_type": "f32", "order": "min", "initial": 0.0,
            "coarse_metric": "l2",
            "captures": [{"index": 0, "name": "weights", "type": "f32", "kind": "array"}],
            "cache_key": "7" * 64,
        }, {
            "index": 1, "source_name": "int8_l2.cu", "symbol": "int8_l2", "finalize": "root",
            "element_type": "i8", "accumulator_type": "i32", "order": "max", "initial": -7,
            "coarse_metric": "inner_product", "captures": [], "cache_key": "8" * 64,
        }],
        "entries": [{
            "artifact": 0, "name": "udf_ivf_scan_v1__weighted_l2__f32_f32_min_k32",
            "variant": "udf_ivf_scan_v1_f32_f32_min_k32",
            "launch": {"block_threads": 128, "elem_bytes": 4, "k_max": 32, "recommended_queries_per_item": 8,
                       "smem_constant": 0, "smem_per_query": 2576, "smem_per_query_dim_padded": 4,
                       "sort_capacity": 256, "veclen": 4},
        }, {
            "artifact": None, "name": "udf_ivf_merge_v1_min_k32", "variant": "udf_ivf_merge_v1_min_k32",
            "launch": {"block_threads": 128, "k_max": 32, "smem_constant": 2064, "sort_capacity": 256},
        }],
        "toolchain": {"udf_link": "0.1.0", "linker": "nvjitlink 13.0", "packager": "nvfatbin 13.0",
                      "options": ["-lto"]},
        "cache_key": "9" * 64,
    }


def module_seeds():
    fatbin = b"\x50\xed\x55\xba\x01\x00\x10\x00" + bytes(56)  # a fatbin header's start, then zeros
    man = module_manifest(fatbin)
    text = canonical(man)
    put("module_manifest", "two-artifacts.json", text)
    put("module", "two-artifacts.udfm", container(b"UDFMOD", [(1, 0, text.encode()), (4, 0, fatbin)]))
    man["artifacts"] = man["artifacts"][:1]
    man["entries"] = man["entries"][:1]
    man["archs"] = ["sm_75"]
    put("module_manifest", "one-artifact.json", canonical(man))
    put("module", "one-artifact.udfm", container(b"UDFMOD", [(1, 0, canonical(man).encode()), (4, 0, fatbin)]))
    # 1.7: one image an entry (images[], entries[].image).
    fatbin2 = fatbin[:8] + b"\x01" + bytes(55)
    man = module_manifest(fatbin)
    man["version"]["minor"] = 7
    del man["image"]
    man["images"] = [{"kind": "fatbin", "size": len(f), "sha256": hashlib.sha256(f).hexdigest()}
                     for f in (fatbin, fatbin2)]
    for i, e in enumerate(man["entries"]):
        e["image"] = i
    text = canonical(man)
    put("module_manifest", "two-images.json", text)
    put("module", "two-images.udfm", container(b"UDFMOD", [(1, 0, text.encode()), (4, 0, fatbin), (4, 0, fatbin2)]))
    for p in ("module-good-l2.json", "module-bad-extra-field.json", "module-bad-launch-float.json",
              "module-bad-no-archs.json", "module-bad-duplicate-arch.json"):
        path = os.path.join(ROOT, "schemas", "tests", p)
        if os.path.exists(path):
            put("module_manifest", p, open(path, "rb").read())


def manifest_seeds():
    for p in sorted(os.listdir(os.path.join(ROOT, "schemas", "tests"))):
        if not p.startswith("module-"):
            put("artifact_manifest", p, open(os.path.join(ROOT, "schemas", "tests", p), "rb").read())


def kernel_pack_seeds(build):
    pack = None
    if build:
        p = os.path.join(build, "share", "udf", "kernels", "ivf_flat_v1.json")
        if os.path.exists(p):
            pack = json.load(open(p))
    if pack is None:
        pack = {"abi": "ivf_flat.metric.v1", "kind": "udf.kernel-pack", "name": "ivf_flat_v1",
                "version": {"major": 1, "minor": 0},
                "files": [{"arch": "compute_75", "kind": "ltoir", "path": "ivf_flat_v1.ltoir",
                           "sha256": "c" * 64, "size": 292960}],
                "kernels": [], "scan_variants": []}
    # A few variants and kernels of each kind keep the seed small.
    seen = set()
    variants = []
    for v in pack.get("scan_variants", []):
        key = (v.get("elem"), v.get("order"))
        if key not in seen:
            seen.add(key)
            variants.append(v)
    if not variants:
        variants = [{"symbol": "udf_ivf_scan_v1_f32_f32_min_k32", "elem": "f32", "acc": "f32", "order": "min",
                     "k_max": 32, "block_threads": 128, "veclen": 4,
                     "dynamic_smem": {"constant": 0, "per_query": 2576, "per_query_dim_padded": 4}}]
    pack["scan_variants"] = variants[:4]
    pack["kernels"] = pack.get("kernels", [])[:2]
    put("kernel_pack", "trimmed.json", json.dumps(pack, indent=1, sort_keys=True))
    small = dict(pack)
    small["scan_variants"] = variants[:1]
    small["kernels"] = []
    put("kernel_pack", "one-variant.json", json.dumps(small, sort_keys=True))


# ---- the IVF index file (lib/runtime/index/index_file.h)

def index_file(elem, dim, lists, coarse=0, balance=2.0, symbol=b"weighted_l2", key=b"7" * 64, weights=None):
    esize = {0: 4, 1: 2, 2: 1, 3: 1}[elem]
    size = sum(len(l) for l in lists)
    b = bytearray(b"\x89UDFIVF\n")
    if weights is not None:
        coarse |= 0x200
    b += struct.pack("<IIIIIIqqd", 1, 0 if weights is None else 1, elem, dim, len(lists), coarse, size, size, balance)
    b += struct.pack("<I", len(symbol)) + symbol + struct.pack("<I", len(key)) + key
    if weights is not None:
        b += struct.pack("<%df" % dim, *weights)
    for l in range(len(lists)):
        b += struct.pack("<%df" % dim, *[float(l + d) for d in range(dim)])
    for l in lists:
        b += struct.pack("<Q", len(l))
    for l in lists:
        b += struct.pack("<%dq" % len(l), *l)
        b += bytes((i * 7 + 3) % 256 for i in range(len(l) * dim * esize))
    return bytes(b) + sha(bytes(b))


def index_seeds():
    put("index_file", "f32.udfi", index_file(0, 4, [[0, 2], [1], []]))
    put("index_file", "f16-cosine.udfi", index_file(1, 3, [[5], [6, 7]], coarse=0x101))
    put("index_file", "i8-ip.udfi", index_file(2, 8, [[0, 1, 2]], coarse=1, balance=0.0))
    put("index_file", "u8.udfi", index_file(3, 2, [[9], [8], [7], [6]]))
    put("index_file", "f32-coarse-weights.udfi", index_file(0, 3, [[0], [1, 2]], weights=[0.5, 0.0, 4.0]))


# ---- FAISS IndexIVFFlat files (lib/runtime/index/faiss_file.h; faiss::write_index's layout)

def faiss_ivf_flat(dim, lists, metric=1, direct_map=0):
    nlist, ntotal = len(lists), sum(len(l) for l in lists)

    def header(n):
        return struct.pack("<iqqqBi", dim, n, 1 << 20, 1 << 20, 1, metric)
    b = bytearray(b"IwFl") + header(ntotal) + struct.pack("<QQ", nlist, 1)
    b += (b"IxF2" if metric == 1 else b"IxFI") + header(nlist) + struct.pack("<Q", nlist * dim)
    b += struct.pack("<%df" % (nlist * dim), *[float(i) / 2 for i in range(nlist * dim)])
    ids = [i for l in lists for i in l] if direct_map else []
    b += struct.pack("<BQ", direct_map, len(ids)) + struct.pack("<%dq" % len(ids), *ids)
    b += b"ilar" + struct.pack("<QQ", nlist, 4 * dim)
    if sum(1 for l in lists if l) > nlist // 2:
        b += b"full" + struct.pack("<Q%dQ" % nlist, nlist, *[len(l) for l in lists])
    else:
        pairs = [v for i, l in enumerate(lists) if l for v in (i, len(l))]
        b += b"sprs" + struct.pack("<Q%dQ" % len(pairs), len(pairs), *pairs)
    for l in lists:
        if l:
            b += struct.pack("<%df" % (len(l) * dim), *[float(i % 13) for i in range(len(l) * dim)])
            b += struct.pack("<%dq" % len(l), *l)
    return bytes(b)


def faiss_seeds():
    put("faiss_file", "l2-full.faiss", faiss_ivf_flat(4, [[0, 2], [1], []]))
    put("faiss_file", "ip-full.faiss", faiss_ivf_flat(3, [[5], [6, 7]], metric=0))
    put("faiss_file", "l2-sparse.faiss", faiss_ivf_flat(2, [[], [9, -1], [], []]))
    put("faiss_file", "l2-direct-map.faiss", faiss_ivf_flat(2, [[3], [4]], direct_map=1))


# ---- cuVS IVF-Flat files (lib/runtime/index/cuvs_file.h; cuvs::neighbors::ivf_flat::serialize's
# layout, cpp/src/neighbors/ivf_flat/ivf_flat_serialize.cuh, with raft's .npy blocks)

def npy_block(descr, shape, data):
    """raft::numpy_serializer's write_header (detail/mdspan_numpy_serializer.hpp), then the data:
    the header is padded with spaces so that magic + version + length + dict + "\n" is a
    multiple of 64 (64 spaces more when it already is)."""
    tup = "()" if not shape else "(%d,)" % shape[0] if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s}" % (descr, tup)
    pad = 64 - (10 + len(d) + 1) % 64
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d) + pad + 1) + (d + " " * pad + "\n").encode() + data


CUVS_DTYPES = {"f32": ("<f4", "f", 4), "f16": ("<e2", "e", 2), "i8": ("|i1", "b", 1), "u8": ("|u1", "B", 1)}


def cuvs_ivf_flat(dtype, dim, centers, lists, metric=0, metric_descr="<i4", has_norms=True, adaptive=0, cma=1,
                  version=4):
    """The bytes ivf_flat::serialize writes for an index<T, int64_t>.  dtype: f32 f16 i8 u8;
    centers: n_lists * dim floats; lists: per list (ids, rows), rows a list of dim values;
    metric: a cuvs::distance::DistanceType value, written as metric_descr ('<i4' from cuVS
    25.12, '<u4' before).  Each list's data is padded to a multiple of 32 rows (zeros) and
    interleaved as build_index_kernel writes it (veclen 16 / sizeof(T) when it divides dim).
    version 4 (cuVS 25.02 to 26.08): the list's size scalar and its ids are padded too (ids -1);
    version 5 (cuVS 26.10): the size scalar is the list's size and only its ids are written."""
    descr, fmt, size = CUVS_DTYPES[dtype]
    veclen = max(1, 16 // size)
    veclen = veclen if dim % veclen == 0 else 1
    n_lists = len(lists)

    def scalar(d, f, x):
        return npy_block(d, (), struct.pack("<" + f, x))
    b = bytearray(descr.encode().ljust(4, b"\0"))
    b += scalar("<i4", "i", version) + scalar("<i8", "q", sum(len(ids) for ids, _ in lists))
    b += scalar("<u4", "I", dim) + scalar("<u4", "I", n_lists)
    b += scalar(metric_descr, "i" if metric_descr == "<i4" else "I", metric)
    b += scalar("|u1", "B", adaptive) + scalar("|u1", "B", cma)
    b += npy_block("<f4", (n_lists, dim), struct.pack("<%df" % len(centers), *centers))
    b += scalar("|u1", "B", int(has_norms))
    if has_norms:
        norms = [sum(c * c for c in centers[l * dim:(l + 1) * dim]) for l in range(n_lists)]
        b += npy_block("<f4", (n_lists,), struct.pack("<%df" % n_lists, *norms))
    b += npy_block("<u4", (n_lists,), struct.pack("<%dI" % n_lists, *[len(ids) for ids, _ in lists]))
    for ids, rows in lists:
        padded = (len(ids) + 31) // 32 * 32
        n = padded if version == 4 else len(ids)
        b += scalar("<u4", "I", n)
        if not n:
            continue
        data = [0] * (padded * dim)
        for i, row in enumerate(rows):
            for c in range(0, dim, veclen):
                for j in range(veclen):
                    data[(i // 32) * 32 * dim + c * 32 + (i % 32) * veclen + j] = row[c + j]
        b += npy_block(descr, (padded, dim), struct.pack("<%d%s" % (len(data), fmt), *data))
        b += npy_block("<i8", (n,), struct.pack("<%dq" % n, *(list(ids) + [-1] * (n - len(ids)))))
    return bytes(b)


def cuvs_seeds():
    def rows(ids, dim, base=0):
        return [[(i * 7 + c + base) % 11 for c in range(dim)] for i in ids]

    def centers(n, dim, scale=1.0):
        return [scale * ((i % 5) - 2) for i in range(n * dim)]
    put("cuvs_file", "f32-l2.cuvs", cuvs_ivf_flat("f32", 4, centers(3, 4), [([0, 2], rows([0, 2], 4)),
                                                                             ([1], rows([1], 4)), ([], [])]))
    put("cuvs_file", "f32-ip-u4-metric.cuvs", cuvs_ivf_flat("f32", 3, centers(2, 3), [([5], rows([5], 3)),
                                                            ([6, 7], rows([6, 7], 3))], metric=6,
                                                            metric_descr="<u4", has_norms=False))
    put("cuvs_file", "f16-cosine.cuvs", cuvs_ivf_flat("f16", 8, centers(2, 8), [([9, -1], rows([9, 1], 8, 1)),
                                                                               ([3], rows([3], 8, 1))], metric=2))
    put("cuvs_file", "i8-l2-veclen1.cuvs", cuvs_ivf_flat("i8", 5, centers(2, 5, 1 / 128), [([4], rows([4], 5, -5)),
                                                         ([], [])], metric=1))
    put("cuvs_file", "u8-ip.cuvs", cuvs_ivf_flat("u8", 16, centers(2, 16, 1 / 256), [([1, 2, 3], rows([1, 2, 3], 16)),
                                                 ([4], rows([4], 16))], metric=6, has_norms=False))
    put("cuvs_file", "f32-l2-v5.cuvs", cuvs_ivf_flat("f32", 4, centers(3, 4), [([0, 2], rows([0, 2], 4)),
                                                     (list(range(10, 43)), rows(range(10, 43), 4)), ([], [])],
                                                     version=5))


# ---- cache entries (lib/support/cache.cpp)

def cache_entry(key_hex, value):
    h = b"UDFCACHE" + struct.pack("<IIQ", 1, 0, len(value)) + bytes.fromhex(key_hex) + sha(value)
    return h + value


def cache_seeds():
    put("cache_entry", "fixed-key.bin", cache_entry("a" * 64, b"an artifact's bytes"))
    put("cache_entry", "other-key.bin", cache_entry("0123456789abcdef" * 4, bytes(range(64))))
    put("cache_entry", "empty-value.bin", cache_entry("a" * 64, b""))


# ---- .npy and TEXMEX (lib/data/vector_files.cpp)

def npy(descr, shape, data, version=1, fortran=False):
    shape_text = "(%d,)" % shape[0] if len(shape) == 1 else "(" + ", ".join(str(s) for s in shape) + ")"
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", shape_text)
    head = 10 if version == 1 else 12
    pad = (64 - (head + len(d) + 1) % 64) % 64
    d = (d + " " * pad + "\n").encode()
    out = b"\x93NUMPY" + bytes([version, 0])
    out += struct.pack("<H", len(d)) if version == 1 else struct.pack("<I", len(d))
    return out + d + data


def vector_seeds():
    put("npy", "f32-2d.npy", npy("<f4", (3, 4), struct.pack("<12f", *range(12))))
    put("npy", "f16-1d.npy", npy("<f2", (5,), bytes(10)))
    put("npy", "i8-v2.npy", npy("|i1", (2, 3), bytes(range(6)), version=2))
    put("npy", "u8-v3.npy", npy("|u1", (4, 1), bytes(4), version=3))
    put("npy", "i32.npy", npy("<i4", (2, 2), struct.pack("<4i", -1, 0, 1, 2)))
    put("npy", "i64.npy", npy("<i8", (1, 2), struct.pack("<2q", -5, 5)))
    put("npy", "f64.npy", npy("<f8", (2,), struct.pack("<2d", 0.5, -0.5)))
    put("npy", "fortran.npy", npy("<f4", (1, 1), bytes(4), fortran=True))
    put("npy", "empty-rows.npy", npy("<f4", (0, 7), b""))
    put("npy", "big-endian.npy", npy(">f4", (1,), bytes(4)))
    put("npy", "3d.npy", npy("<f4", (1, 1, 1), bytes(4)))
    put("vecs", "f32.fvecs", b"".join(struct.pack("<i4f", 4, *[float(r * 4 + d) for d in range(4)]) for r in range(3)))
    put("vecs", "u8.bvecs", b"".join(struct.pack("<i", 8) + bytes(range(r, r + 8)) for r in range(4)))
    put("vecs", "i32.ivecs", b"".join(struct.pack("<i3i", 3, r, -r, r * r) for r in range(3)))
    put("vecs", "mixed-dims.fvecs", struct.pack("<i2f", 2, 1, 2) + struct.pack("<i3f", 3, 1, 2, 3))
    put("vecs", "partial.fvecs", struct.pack("<i2f", 2, 1, 2) + b"\x02\x00")


# ---- command-line values and response files

def cli_seeds():
    put("cli_values", "weighted.txt", "--capture weights:f32[]\n--arch sm_80,sm_90\n--arch sm_100\n--initial 0\n")
    put("cli_values", "int8.txt", "--elem i8\n--acc i32\n--order max\n--initial -2147483648\n--arch compute_75,90\n"
                                  "--coarse-metric inner_product\n-D SCALE=2\n")
    put("cli_values", "floats.txt", "--initial -inf\n--capture p:f32\n--capture b:i32\n--capture h:f16[]\n--capture m:u8[]\n"
                                    "--arch sm_120\n--symbol metric\n--finalize root\n")
    put("cli_values", "bad.txt", "--capture 9x:f64\n--arch sm_91,,sm_90\n--initial 1e39\n-D =x\n-D -U\n--acc f64\n")
    put("cli_values", "values.txt", "w:f32[]\nsm_90\n3.5e38\n0x10\n+inf\n")
    text = open(os.path.join(ROOT, "test", "lit", "build-integration", "response-files.test")).read()
    for name, body in split_file(text):
        if name.endswith(".rsp"):
            put("cmdline", name, body)
    put("cmdline", "quotes.rsp", "a'b c'd \"e \\\" f\" \\\n g 'h\\'i' '' \"\"\n-MF out.d -MTtarget -MD -- -MP\n")


# ---- IR front ends

def split_file(text):
    """The `#--- NAME` chunks of a lit test (split-file)."""
    out = []
    parts = re.split(r"^#--- (\S+)\n", text, flags=re.M)
    for i in range(1, len(parts), 2):
        out.append((parts[i], parts[i + 1]))
    return out


# The flags each lit input is compiled with, as the fuzz targets read them.
FIRST_LINE = {
    "sig.ll": "--elem i8",
    "capture.mlir": "--capture w:f32[] --capture v:f32[]",
    "scalar.mlir": "--capture p:f32",
    "loop.mlir": "--symbol sum_pow --finalize root",
}


def ir_seeds():
    for name in sorted(os.listdir(os.path.join(ROOT, "examples"))):
        p = os.path.join(ROOT, "examples", name)
        if name.endswith(".ll"):
            put("llvm_ir", name, open(p, "rb").read())
        elif name.endswith(".mlir"):
            put("mlir", name, open(p, "rb").read())
    inputs = os.path.join(ROOT, "test", "lit", "frontends", "Inputs")
    put("llvm_ir", "int_l1.ll", "; udfc: --elem i8\n" + open(os.path.join(inputs, "int_l1.ll")).read())
    put("llvm_ir", "clang14_wl2.bc", open(os.path.join(inputs, "clang14_wl2.bc"), "rb").read())
    for test in ("errors.test", "mlir.test"):
        text = open(os.path.join(ROOT, "test", "lit", "frontends", test)).read()
        for name, body in split_file(text):
            flags = FIRST_LINE.get(name)
            prefix = ("; udfc: " if name.endswith(".ll") else "// udfc: ") + flags + "\n" if flags else ""
            if name.endswith(".ll"):
                put("llvm_ir", name, prefix + body)
            elif name.endswith(".mlir"):
                put("mlir", name, prefix + body)
    llvm_as = shutil.which("llvm-as-22") or shutil.which("llvm-as")
    if llvm_as:
        for name in ("int_l1.ll",):
            bc = subprocess.run([llvm_as, "-o", "-", os.path.join(inputs, name)], check=True, capture_output=True).stdout
            put("llvm_ir", name.replace(".ll", ".bc"), bc)


def build_seeds(build):
    ex = os.path.join(build, "examples")
    if not os.path.isdir(ex):
        return
    for name in ("weighted_l2.udfa", "int8_l2.udfa", "linf.ll.udfa"):
        p = os.path.join(ex, name)
        if os.path.exists(p) and os.path.getsize(p) <= 8192:
            put("container", "example-" + name, open(p, "rb").read())
            b = open(p, "rb").read()
            n, = struct.unpack_from("<I", b, 24)
            _, _, off, size = struct.unpack_from("<IIQQ", b, 64)
            put("artifact_manifest", "example-" + name.replace(".udfa", ".json"), b[off:off + size])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", help="a build folder with the examples (e.g. build/), read only")
    args = ap.parse_args()
    artifact_seeds()
    module_seeds()
    manifest_seeds()
    kernel_pack_seeds(args.build)
    index_seeds()
    faiss_seeds()
    cuvs_seeds()
    cache_seeds()
    vector_seeds()
    cli_seeds()
    ir_seeds()
    if args.build:
        build_seeds(args.build)
    total = 0
    for d in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, d))
        size = sum(os.path.getsize(os.path.join(CORPUS, d, f)) for f in files)
        total += size
        print("%-20s %3d files %7d bytes" % (d, len(files), size))
    print("total %d bytes" % total)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes the kernel pack manifest (schemas/udf-kernel-pack-v1.schema.json).

The variant and kernel lists are read from the X-macro lists in
include/udf/kernels/ivf_flat_v1.h, so the header stays the single source of
truth.  Output is deterministic: sorted keys, fixed order, no timestamps.

The pack is one LTO-IR file per family (pack_file.cuh): scan_v1_<elem>_<acc>_<order>
(the plain and prune ABI v1 variants), scan_v2_<shape>_<elem>_<acc>_<order>
(the ABI v2 variants) and merge_v1_<order>.  --list-files prints them, one
"FILE SOURCE" line each, for CMake; the manifest then reads them from
--pack-dir.
"""
import argparse
import hashlib
import json
import os
import re
import sys

BLOCK_THREADS = 128
ELEM_BYTES = {"f32": 4, "f16": 2, "i8": 1, "u8": 1}
ACC_C = {"f32": "float", "i32": "int32_t"}


def sort_capacity(kmax):
    # UDF_IVF_V1_SORT_CAPACITY: k_max 32's warp lists (minor version 8), else the block buffer
    return BLOCK_THREADS if kmax <= 32 else 2 * max(kmax, 128)


def macro_body(text, name):
    m = re.search(r"#define\s+" + name + r"\(X(?:,\s*\w+)*\)((?:[^\n]*\\\n)*[^\n]*)", text)
    if not m:
        sys.exit(f"gen_manifest: {name} not found in the header")
    return m.group(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--header", required=True)
    ap.add_argument("--list-files", action="store_true",
                    help="print each pack file and the source it is compiled from, and exit")
    ap.add_argument("--pack-dir", help="the folder with the pack's LTO-IR files")
    ap.add_argument("--arch")
    ap.add_argument("--version")
    ap.add_argument("--output")
    a = ap.parse_args()
    if not a.list_files and not (a.pack_dir and a.arch and a.version and a.output):
        ap.error("--pack-dir, --arch, --version and --output are required without --list-files")

    text = open(a.header, encoding="utf-8").read()
    variants = re.findall(r"X\((\w+),\s*(\w+),\s*(\w+),\s*(\d+)\)",
                          macro_body(text, "UDF_IVF_SCAN_V1_FOR_EACH_VARIANT"))
    prune = re.findall(r"X\((\w+),\s*(\w+),\s*(\w+),\s*(\d+)\)",
                       macro_body(text, "UDF_IVF_SCAN_V1_PRUNE_FOR_EACH_VARIANT"))
    merges = re.findall(r"X\((\w+),\s*(\d+)\)", macro_body(text, "UDF_IVF_MERGE_V1_FOR_EACH_KERNEL"))
    # ABI v2: the per-shape list, instantiated for each shape of the outer list.
    v2_each = re.findall(r"X\(shape,\s*(\w+),\s*(\w+),\s*(\w+),\s*(\d+)\)",
                         macro_body(text, "UDF_IVF_SCAN_V2_FOR_EACH_VARIANT_OF"))
    v2_shapes = re.findall(r"UDF_IVF_SCAN_V2_FOR_EACH_VARIANT_OF\(X,\s*(\w+)\)",
                           macro_body(text, "UDF_IVF_SCAN_V2_FOR_EACH_VARIANT"))
    if not v2_each or sorted(v2_shapes) != ["state", "vector"]:
        sys.exit("gen_manifest: bad ABI v2 variant lists")
    if not variants or not merges or not prune:
        sys.exit("gen_manifest: empty variant or kernel list")

    def v1_file(elem, acc, order):
        return f"scan_v1_{elem}_{acc}_{order}.ltoir"

    def v2_file(shape, elem, acc, order):
        return f"scan_v2_{shape}_{elem}_{acc}_{order}.ltoir"

    def merge_file(order):
        return f"merge_v1_{order}.ltoir"

    # Every file, in a fixed order: (name, source, ABI v2 scans).
    files = []
    for name, src, v2 in ([(v1_file(e, c, o), "ivf_flat_v1.cu", False) for e, c, o, _ in variants + prune] +
                          [(merge_file(o), "ivf_flat_v1.cu", False) for o, _ in merges] +
                          [(v2_file(sh, e, c, o), "ivf_flat_v1_metric_v2.cu", True)
                           for sh in v2_shapes for e, c, o, _ in v2_each]):
        if name not in [f[0] for f in files]:
            files.append((name, src, v2))
    if a.list_files:
        for name, src, _ in files:
            print(name, src)
        return

    def scan_variant(symbol, file, elem, acc, order, kmax, acc_words, **fields):
        """The fields every scan variant has; acc_words: 32-bit words of
        shared memory a (query, thread) keeps (v1 and vector 1; state 0 here,
        its words come with per_query_state_word)."""
        s = sort_capacity(kmax)
        v = {
            "symbol": symbol,
            "file": file,
            "elem": elem,
            "acc": acc,
            "order": order,
            "k_max": kmax,
            "filter_type": "udf_filter_v1_fn",
            "args_type": "udf_ivf_scan_args_v1",
            "block_threads": BLOCK_THREADS,
            "grid": "n_items",
            "veclen": 16 // ELEM_BYTES[elem],
            "elem_bytes": ELEM_BYTES[elem],
            "sort_capacity": s,
            # per_query: the top-k buffer, 16 bytes of state, the accumulators and 16
            # bytes for the query's stride above dim_padded (UDF_IVF_SCAN_QUERY_WORDS)
            "dynamic_smem": {"constant": 0, "per_query": 8 * s + 32 + 4 * acc_words * BLOCK_THREADS,
                             "per_query_dim_padded": 4, "filtered_extra": (BLOCK_THREADS // 32) * 64 * 12},
            "recommended_queries_per_item": 8 if kmax <= 256 else 2,
            # minor version 4: the variant merges a query's rows itself when
            # args.query_done is set (ivf_flat_v1.h, TAIL MERGE)
            "tail_merge": 1,
            # minor version 5: the variant prunes with and lowers args.query_bound
            # when set (ivf_flat_v1.h, QUERY BOUND)
            "query_bound": 1,
        }
        v.update(fields)
        return v

    scan = []
    for elem, acc, order, kmax in variants:
        kmax = int(kmax)
        scan.append(scan_variant(f"udf_ivf_scan_v1_{elem}_{acc}_{order}_k{kmax}", v1_file(elem, acc, order), elem, acc, order, kmax, 1,
                                 metric_type=f"udf_metric_v1_{acc}_fn", finalize_type=f"udf_finalize_v1_{acc}_fn"))
    # minor version 6: the variants for monotone metrics (ivf_flat_v1.h, PRUNE)
    # f32 ones ask for 7 blocks an SM (at most 72 registers: the plain f32
    # scans' occupancy then; the prune checks took the weighted-L2 entry from 72
    # to 80 registers, 6 blocks an SM, and cost uniform data 14% at batch 10k).
    # The plain f32 scans ask for nothing: their weighted-L2 entry has 84
    # registers since the constant-offset vector loads (5 blocks an SM), and
    # a cap for 6 or 7 blocks cost batch 100 more than it gave batch 10k
    # (docs/performance-log.md, "The scan's vector loads at constant offsets").
    for elem, acc, order, kmax in prune:
        kmax = int(kmax)
        extra = {"min_blocks_per_sm": 7} if elem == "f32" else {}
        scan.append(scan_variant(f"udf_ivf_scan_v1_prune_{elem}_{acc}_{order}_k{kmax}", v1_file(elem, acc, order), elem, acc, order, kmax, 1,
                                 metric_type=f"udf_metric_v1_{acc}_fn", finalize_type=f"udf_finalize_v1_{acc}_fn", prune=1,
                                 **extra))
    for shape in v2_shapes:
        for elem, acc, order, kmax in v2_each:
            kmax = int(kmax)
            symbol = f"udf_ivf_scan_v2_{shape}_{elem}_{acc}_{order}_k{kmax}"
            if shape == "state":
                # 8 state words a (query, thread) instead of one accumulator: at
                # 8 queries an item the shared memory halves the blocks an SM
                # holds (L2 as a state UDF: 1.30x v1 at batch 10k; at 4: 1.07x).
                # The state's words are the UDF's (args.state_words, 1..8): per
                # query, per_query_state_word bytes for each of them.
                v = scan_variant(symbol, v2_file(shape, elem, acc, order), elem, acc, order, kmax, 0,
                                 recommended_queries_per_item=4 if kmax <= 256 else 2,
                                 update_type=f"udf_update_v2_{acc}_fn", finalize_type="udf_finalize_v2_fn")
                v["dynamic_smem"]["per_query_state_word"] = 4 * BLOCK_THREADS
            else:
                v = scan_variant(symbol, v2_file(shape, elem, acc, order), elem, acc, order, kmax, 1,
                                 distance_type=f"udf_distance_v2_{acc}_fn")
                # + per_staged_row_word * stage_rows * UDF_IVF_SCAN_V2_ROW_WORDS(dim_padded): the staged rows
                v["dynamic_smem"]["per_staged_row_word"] = 4 * (BLOCK_THREADS // 32)
            v.update(abi="ivf_flat.metric.v2", shape=shape)
            scan.append(v)
    kernels = []
    for order, kmax in merges:
        kmax = int(kmax)
        s = sort_capacity(kmax)
        kernels.append({
            "symbol": f"udf_ivf_merge_v1_{order}_k{kmax}",
            "file": merge_file(order),
            "role": "merge",
            "order": order,
            "k_max": kmax,
            "args_type": "udf_ivf_merge_args_v1",
            "block_threads": BLOCK_THREADS,
            "grid": "n_queries",
            "sort_capacity": s,
            "dynamic_smem": {"constant": 8 * s + 16, "per_query": 0, "per_query_dim_padded": 0},
        })

    file_entries = []
    for name, _, v2 in files:
        data = open(os.path.join(a.pack_dir, name), "rb").read()
        e = {"path": name, "kind": "ltoir", "arch": a.arch, "size": len(data),
             "sha256": hashlib.sha256(data).hexdigest()}
        if v2:
            e["contents"] = "metric_v2"  # the ABI v2 scans: linked only into modules with a v2 metric
        file_entries.append(e)

    manifest = {
        "kind": "udf.kernel-pack",
        "version": {"major": 1, "minor": 8},
        "name": "ivf_flat_v1",
        "producer": f"udf {a.version}",
        "abi": "ivf_flat.metric.v1",
        "filter_abi": "ivf_flat.filter.v1",
        "metric_abis": ["ivf_flat.metric.v1", "ivf_flat.metric.v2"],
        "header": "udf/kernels/ivf_flat_v1.h",
        "layout": {"group_size": 32, "vector_bytes": 16, "alignment": 16, "padding": "zero"},
        "files": file_entries,
        "scan_variants": scan,
        "kernels": kernels,
    }
    out = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    tmp = a.output + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(out)
    os.replace(tmp, a.output)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the kernel pack manifest (schemas/udf-kernel-pack-v1.schema.json).

The variant and kernel lists are read from the X-macro lists in
include/udf/kernels/ivf_flat_v1.h, so the header stays the single source of
truth.  Output is deterministic: sorted keys, fixed order, no timestamps.

The pack is one LTO-IR file per family (pack_file.cuh): scan_v1_<elem>_<acc>_<order>
(the plain and prune ABI v1 variants), scan_v2_<shape>_<elem>_<acc>_<order>
(the ABI v2 variants), their rows twins rows_v1_* and rows_v2_* (exact search
and refine) and merge_v1_<order>, all for --arch.  With --copy-arch (compute_80
or newer) and an older --arch, the v1 and state rows families are built a
second time for it, as <family>.<copy arch>.ltoir: their copied row stage
(cp.async) needs sm_80, and a link for sm_80 or newer takes that file
(the variant's arch_files).  --list-files prints every file, one
"FILE SOURCE FAMILY SM" line each, for CMake; the manifest then reads them
from --pack-dir.

One function per stage: read the header's lists, name the pack's files, then
the scan variants (v1, prune, v2), the merge kernels and the file entries,
and write the manifest.
"""
import argparse
import hashlib
import json
import os
import re
import sys
from typing import NamedTuple

BLOCK_THREADS = 128
ELEM_BYTES = {"f32": 4, "f16": 2, "i8": 1, "u8": 1}
ACC_C = {"f32": "float", "i32": "int32_t"}


class Lists(NamedTuple):
    """The header's X-macro lists: (elem, acc, order, kmax) per scan variant,
    (order, kmax) per merge kernel, and the ABI v2 shapes."""
    variants: list
    prune: list
    merges: list
    v2_each: list
    v2_shapes: list


class PackFile(NamedTuple):
    name: str
    source: str
    v2: bool      # holds ABI v2 scans
    family: str   # UDF_PACK_FILE_<family> selects it in the source (pack_file.cuh)
    arch: str     # compute_NN


def copies_async(arch):
    """Whether LTO-IR for `arch` (compute_NN) copies rows to shared memory
    without registers (cp.async: sm_80 and newer, layout.cuh)."""
    return int(arch.split("_")[1]) >= 80


def sort_capacity(kmax):
    # UDF_IVF_V1_SORT_CAPACITY: k_max 32's warp lists, else the block buffer
    return BLOCK_THREADS if kmax <= 32 else 2 * max(kmax, 128)


def macro_body(text, name):
    m = re.search(r"#define\s+" + name + r"\(X(?:,\s*\w+)*\)((?:[^\n]*\\\n)*[^\n]*)", text)
    if not m:
        sys.exit(f"gen_manifest: {name} not found in the header")
    return m.group(1)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--header", required=True)
    ap.add_argument("--list-files", action="store_true",
                    help="print each pack file and the source it is compiled from, and exit")
    ap.add_argument("--pack-dir", help="the folder with the pack's LTO-IR files")
    ap.add_argument("--arch", required=True, help="the pack's arch, compute_NN")
    ap.add_argument("--copy-arch", default="",
                    help="compute_80 or newer: also build the v1 and state rows families for it when --arch is older")
    ap.add_argument("--version")
    ap.add_argument("--output")
    a = ap.parse_args()
    for name, arch in (("--arch", a.arch), ("--copy-arch", a.copy_arch)):
        if arch and not re.fullmatch(r"compute_\d+", arch):
            ap.error(f"{name} {arch}: expected compute_NN")
    if a.copy_arch and not copies_async(a.copy_arch):
        ap.error(f"--copy-arch {a.copy_arch}: the copied row stage needs compute_80 or newer")
    if not a.list_files and not (a.pack_dir and a.version and a.output):
        ap.error("--pack-dir, --version and --output are required without --list-files")
    return a


def read_lists(header):
    """The header's variant and kernel lists; exits on an empty or malformed one."""
    text = open(header, encoding="utf-8").read()
    variant = r"X\((\w+),\s*(\w+),\s*(\w+),\s*(\d+)\)"
    lists = Lists(
        variants=re.findall(variant, macro_body(text, "UDF_IVF_SCAN_V1_FOR_EACH_VARIANT")),
        prune=re.findall(variant, macro_body(text, "UDF_IVF_SCAN_V1_PRUNE_FOR_EACH_VARIANT")),
        merges=re.findall(r"X\((\w+),\s*(\d+)\)", macro_body(text, "UDF_IVF_MERGE_V1_FOR_EACH_KERNEL")),
        # ABI v2: the per-shape list, instantiated for each shape of the outer list.
        v2_each=re.findall(r"X\(shape,\s*(\w+),\s*(\w+),\s*(\w+),\s*(\d+)\)",
                           macro_body(text, "UDF_IVF_SCAN_V2_FOR_EACH_VARIANT_OF")),
        v2_shapes=re.findall(r"UDF_IVF_SCAN_V2_FOR_EACH_VARIANT_OF\(X,\s*(\w+)\)",
                             macro_body(text, "UDF_IVF_SCAN_V2_FOR_EACH_VARIANT")))
    if not lists.v2_each or sorted(lists.v2_shapes) != ["state", "vector"]:
        sys.exit("gen_manifest: bad ABI v2 variant lists")
    if not lists.variants or not lists.merges or not lists.prune:
        sys.exit("gen_manifest: empty variant or kernel list")
    return lists


def v1_file(elem, acc, order):
    return f"scan_v1_{elem}_{acc}_{order}.ltoir"


def v2_file(shape, elem, acc, order):
    return f"scan_v2_{shape}_{elem}_{acc}_{order}.ltoir"


def rows_v1_file(elem, acc, order):
    return f"rows_v1_{elem}_{acc}_{order}.ltoir"


def rows_v2_file(shape, elem, acc, order):
    return f"rows_v2_{shape}_{elem}_{acc}_{order}.ltoir"


def merge_file(order):
    return f"merge_v1_{order}.ltoir"


def copied_stage_file(name, copy_arch):
    """The name of a rows family's file built for copy_arch (copied_stage_archs)."""
    return name.replace(".ltoir", f".{copy_arch}.ltoir")


def copied_stage_archs(arch, copy_arch):
    """The archs a v1 or state rows family is built for beyond the pack's
    own: copy_arch where the pack's arch is too old to copy rows with cp.async."""
    return [copy_arch] if copy_arch and not copies_async(arch) else []


def has_copied_stage(file):
    """The v1 and state rows families have a row stage that can be copied
    (layout.cuh); the vector ones stage their rows otherwise."""
    return file.startswith("rows_") and not file.startswith("rows_v2_vector_")


def pack_files(lists, arch, copy_arch=""):
    """Every file of the pack, in a fixed order, each once: the families for
    arch, then the rows families with a copied stage for each of
    copied_stage_archs."""
    files = []
    for name, src, v2 in ([(v1_file(e, c, o), "ivf_flat_v1.cu", False) for e, c, o, _ in lists.variants + lists.prune] +
                          [(merge_file(o), "ivf_flat_v1.cu", False) for o, _ in lists.merges] +
                          [(v2_file(sh, e, c, o), "ivf_flat_v1_metric_v2.cu", True)
                           for sh in lists.v2_shapes for e, c, o, _ in lists.v2_each] +
                          [(rows_v1_file(e, c, o), "ivf_flat_v1.cu", False) for e, c, o, _ in lists.variants] +
                          [(rows_v2_file(sh, e, c, o), "ivf_flat_v1_metric_v2.cu", True)
                           for sh in lists.v2_shapes for e, c, o, _ in lists.v2_each]):
        if name not in [f.name for f in files]:
            files.append(PackFile(name, src, v2, name[:-len(".ltoir")], arch))
    for extra in copied_stage_archs(arch, copy_arch):
        files += [f._replace(name=copied_stage_file(f.name, extra), arch=extra) for f in list(files) if has_copied_stage(f.name)]
    return files


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
        # the variant merges a query's rows itself when args.query_done is set
        # (ivf_flat_v1.h, TAIL MERGE)
        "tail_merge": 1,
        # the variant prunes with and lowers args.query_bound when set
        # (ivf_flat_v1.h, QUERY BOUND)
        "query_bound": 1,
    }
    v.update(fields)
    return v


def v1_scans(lists):
    """The plain ABI v1 scan variants.  Their filtered entries fold four
    (then two) queries at a time, as unfiltered ones (ivf_flat_v1.h,
    FILTER); the f32 ones ask for 6 blocks an SM there, which the grouped
    folds' registers would otherwise cost them (docs/performance-log.md,
    "Filtered scans fold queries in groups")."""
    scan = []
    for elem, acc, order, kmax in lists.variants:
        kmax = int(kmax)
        extra = {"filtered_min_blocks_per_sm": 6} if elem == "f32" else {}
        scan.append(scan_variant(f"udf_ivf_scan_v1_{elem}_{acc}_{order}_k{kmax}", v1_file(elem, acc, order), elem, acc, order, kmax, 1,
                                 metric_type=f"udf_metric_v1_{acc}_fn", finalize_type=f"udf_finalize_v1_{acc}_fn", **extra))
    return scan


def prune_scans(lists):
    """The ABI v1 variants for monotone metrics (ivf_flat_v1.h, PRUNE).  The
    f32 ones ask for 7 blocks an SM, the plain f32 scans' occupancy: the
    prune checks would otherwise take registers enough to lose a block.  The
    plain scans ask for nothing: a cap costs small batches more than it gives
    large ones (docs/performance-log.md, "The scan's vector loads at constant
    offsets").  The f32 and f16 ones prune filtered launches too
    (filtered_prune, minor 16), the f32 entries at the plain filtered scans'
    6 blocks an SM; the integer ones do not: their filtered pruning fold
    needs more registers than the pruning saves (docs/performance-log.md,
    "Filtered scans prune")."""
    scan = []
    for elem, acc, order, kmax in lists.prune:
        kmax = int(kmax)
        extra = {"min_blocks_per_sm": 7, "filtered_min_blocks_per_sm": 6} if elem == "f32" else {}
        if elem in ("f32", "f16"):
            extra["filtered_prune"] = 1
        scan.append(scan_variant(f"udf_ivf_scan_v1_prune_{elem}_{acc}_{order}_k{kmax}", v1_file(elem, acc, order), elem, acc, order, kmax, 1,
                                 metric_type=f"udf_metric_v1_{acc}_fn", finalize_type=f"udf_finalize_v1_{acc}_fn", prune=1,
                                 **extra))
    return scan


def v2_scans(lists):
    """The ABI v2 scan variants, by shape."""
    scan = []
    for shape in lists.v2_shapes:
        for elem, acc, order, kmax in lists.v2_each:
            kmax = int(kmax)
            symbol = f"udf_ivf_scan_v2_{shape}_{elem}_{acc}_{order}_k{kmax}"
            if shape == "state":
                # Up to 8 state words a (query, thread) instead of one
                # accumulator: fewer queries an item keep the blocks an SM
                # holds.  The state's words are the UDF's (args.state_words,
                # 1..8): per query, per_query_state_word bytes for each of them.
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
    return scan


# UDF_IVF_SCAN_ROWS_STAGE_BYTES: each warp's stage of 16 rows' batches of 8 16-byte chunks (and one of padding);
# UDF_IVF_SCAN_ROWS_STAGE_COPIED_BYTES: the copied stage, 32 rows' batches.
ROWS_STAGE_BYTES = (BLOCK_THREADS // 32) * 16 * 9 * 16
# UDF_IVF_SCAN_ROWS_TILE_QUERIES: the queries of an item that the v1 f32 rows twins fold as a tile.
TILE_QUERIES = 16
ROWS_STAGE_COPIED_BYTES = (BLOCK_THREADS // 32) * 32 * 9 * 16


def rows_scans(lists, arch, copy_arch):
    """The rows twin of every plain v1 and v2 scan variant (ivf_flat_v1.h,
    ROWS LAYOUT): the same fields, its own symbol and file, and rows = 1.
    The v1 and state twins' dynamic_smem.constant is their row stage; where
    a file of theirs copies rows with cp.async (a pack for compute_80 or
    newer, or the family's file for copy_arch, named in arch_files),
    copied_stage is the copied one's bytes (in constant's place when
    args.stage_rows asks for it, on sm_80 or newer), and the v1 f32 twins'
    tile_queries the item size their tiled fold takes with it."""
    scan = []
    for v in v1_scans(lists) + v2_scans(lists):
        r = dict(v)
        r["dynamic_smem"] = dict(v["dynamic_smem"])
        r["symbol"] = v["symbol"].replace("udf_ivf_scan_", "udf_ivf_rows_", 1)
        r["file"] = v["file"].replace("scan_", "rows_", 1)
        r["rows"] = 1
        if has_copied_stage(r["file"]):
            r["dynamic_smem"]["constant"] = ROWS_STAGE_BYTES
            extra = copied_stage_archs(arch, copy_arch)
            if extra:
                r["arch_files"] = [copied_stage_file(r["file"], a) for a in extra]
            if copies_async(arch) or extra:
                r["dynamic_smem"]["copied_stage"] = ROWS_STAGE_COPIED_BYTES
                # The v1 f32 twins fold items of exactly TILE_QUERIES queries
                # as a tile when given the copied stage (fold_v1.cuh, TILED FOLD).
                if "shape" not in v and v["elem"] == "f32":
                    r["tile_queries"] = TILE_QUERIES
        scan.append(r)
    return scan


def merge_kernels(lists):
    """The merge kernels, one per (order, k_max)."""
    kernels = []
    for order, kmax in lists.merges:
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
    return kernels


def file_entries(files, pack_dir):
    """Each pack file's arch, size and digest, read from pack_dir."""
    entries = []
    for f in files:
        data = open(os.path.join(pack_dir, f.name), "rb").read()
        e = {"path": f.name, "kind": "ltoir", "arch": f.arch, "size": len(data),
             "sha256": hashlib.sha256(data).hexdigest()}
        if f.v2:
            e["contents"] = "metric_v2"  # the ABI v2 scans: linked only into modules with a v2 metric
        entries.append(e)
    return entries


def write_manifest(path, manifest):
    """Writes the manifest through a temporary file, so a reader never sees half of it."""
    out = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(out)
    os.replace(tmp, path)


def main():
    a = parse_args()
    lists = read_lists(a.header)
    files = pack_files(lists, a.arch, a.copy_arch)
    if a.list_files:
        for f in files:
            print(f.name, f.source, f.family, f.arch.split("_")[1])
        return
    manifest = {
        "kind": "udf.kernel-pack",
        "version": {"major": 1, "minor": 16},
        "name": "ivf_flat_v1",
        "producer": f"udf {a.version}",
        "abi": "ivf_flat.metric.v1",
        "filter_abi": "ivf_flat.filter.v1",
        "metric_abis": ["ivf_flat.metric.v1", "ivf_flat.metric.v2"],
        "header": "udf/kernels/ivf_flat_v1.h",
        "layout": {"group_size": 32, "vector_bytes": 16, "alignment": 16, "padding": "zero"},
        "files": file_entries(files, a.pack_dir),
        "scan_variants": v1_scans(lists) + prune_scans(lists) + v2_scans(lists) + rows_scans(lists, a.arch, a.copy_arch),
        "kernels": merge_kernels(lists),
    }
    write_manifest(a.output, manifest)


if __name__ == "__main__":
    main()

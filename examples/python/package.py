"""Packages LTO-IR into a UDF artifact (.udfa) without udfc: the fallback for
machines where udfc cannot run (udfc links LLVM for its IR front ends; the
runtime and this script need neither).  It writes what `udfc X.ltoir --symbol
S --capture ... --arch sm_XX` writes for LTO-IR input: the container of
include/udf/artifact/container.h and an artifact manifest (schemas/
udf-artifact-v1.schema.json).  udfc also checks the symbol and signature in the
LTO-IR; here nvJitLink's link (udf_module_link) is the check.

    python3 package.py X.ltoir --symbol py_wl2 --capture weights:f32[] --arch sm_90 -o X.udfa
"""
import argparse
import hashlib
import json
import os
import struct

MAGIC = b"\x89UDFART\n"
HEADER, ENTRY, TRAILER = 64, 64, 32
SECTION_MANIFEST, SECTION_LTOIR = 1, 2


def container(sections):
    data_start = HEADER + ENTRY * len(sections)
    offsets, pos = [], data_start
    for _kind, _tag, d in sections:
        pos = (pos + 15) // 16 * 16
        offsets.append(pos)
        pos += len(d)
    total = pos + TRAILER
    out = bytearray(total - TRAILER)
    out[:8] = MAGIC
    struct.pack_into("<HHIQIIQ", out, 8, 1, 0, HEADER, total, len(sections), 0, HEADER)
    for i, (kind, tag, d) in enumerate(sections):
        struct.pack_into("<IIQQ", out, HEADER + ENTRY * i, kind, tag, offsets[i], len(d))
        out[HEADER + ENTRY * i + 24:HEADER + ENTRY * i + 56] = hashlib.sha256(d).digest()
        out[offsets[i]:offsets[i] + len(d)] = d
    return bytes(out) + hashlib.sha256(out).digest()


def parse_capture(spec, index):
    name, _, ty = spec.partition(":")
    array = ty.endswith("[]")
    return {"index": index, "kind": "array" if array else "scalar", "name": name, "type": ty.removesuffix("[]")}


def package(ltoir: bytes, name: str, symbol: str, captures, arch: int, elem="f32", acc="f32", order="min",
            initial=0.0, coarse="l2") -> bytes:
    sha = hashlib.sha256(ltoir).hexdigest()
    m = {
        "abi": {"id": "ivf_flat.metric.v1", "version": 1},
        "accumulator_type": acc,
        "captures": [parse_capture(c, i) for i, c in enumerate(captures)],
        "coarse_metric": coarse,
        "element_type": elem,
        "finalize": None,
        "initial": initial,
        "kind": "udf.artifact",
        "order": order,
        "payload_kind": "lto-ir",
        "source": {"kind": "lto-ir", "name": os.path.basename(name), "sha256": sha},
        "symbol": symbol,
        "targets": [{"arch": f"sm_{arch}", "sha256": sha, "size": len(ltoir)}],
        "toolchain": {"compiler": f"prebuilt lto-ir sm_{arch} (examples/python/package.py)", "options": [],
                      "udfc": "0.1.0"},
        "version": {"major": 1, "minor": 0},
    }
    key = hashlib.sha256(json.dumps(m, sort_keys=True).encode()).hexdigest()
    m["cache_key"] = key
    text = (json.dumps(m, indent=2, sort_keys=True) + "\n").encode()
    return container([(SECTION_MANIFEST, 0, text), (SECTION_LTOIR, arch, ltoir)])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("--symbol", required=True)
    ap.add_argument("--capture", action="append", default=[])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    data = open(a.input, "rb").read()
    out = package(data, a.input, a.symbol, a.capture, int(a.arch.removeprefix("sm_")))
    with open(a.output, "wb") as f:
        f.write(out)

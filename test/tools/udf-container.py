#!/usr/bin/env python3
"""Rewrites the JSON manifest of a udf container (.udfa / .udfm) and makes the
file consistent again, to craft inputs that only the manifest checks reject.

    udf-container.py IN OUT PATH=JSON [PATH=JSON...]

PATH is a dotted path into the manifest (`abi.version`, `targets.0.arch`);
JSON is the new value as JSON (`2`, `"sm_80"`, `null`).  The manifest is
written back canonically (keys sorted, 2-space indent, final newline), the
sections are laid out again (16-byte aligned), and every section SHA-256 and
the trailing checksum are recomputed, following include/udf/artifact/container.h.
"""
import hashlib
import json
import struct
import sys

HEADER = 64
ENTRY = 64
TRAILER = 32


def read(b):
    magic = b[:8]
    major, minor, hsize, _fsize, count, _r, table = struct.unpack_from("<HHIQIIQ", b, 8)
    sections = []
    for i in range(count):
        kind, tag, off, size = struct.unpack_from("<IIQQ", b, table + ENTRY * i)
        sections.append([kind, tag, b[off:off + size]])
    return magic, major, minor, sections


def write(magic, major, minor, sections):
    data_start = HEADER + ENTRY * len(sections)
    offsets, pos = [], data_start
    for _k, _t, d in sections:
        pos = (pos + 15) // 16 * 16
        offsets.append(pos)
        pos += len(d)
    total = pos + TRAILER
    out = bytearray(total - TRAILER)
    out[:8] = magic
    struct.pack_into("<HHIQIIQ", out, 8, major, minor, HEADER, total, len(sections), 0, HEADER)
    for i, (kind, tag, d) in enumerate(sections):
        struct.pack_into("<IIQQ", out, HEADER + ENTRY * i, kind, tag, offsets[i], len(d))
        out[HEADER + ENTRY * i + 24:HEADER + ENTRY * i + 56] = hashlib.sha256(d).digest()
        out[offsets[i]:offsets[i] + len(d)] = d
    return bytes(out) + hashlib.sha256(out).digest()


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    src, dst, edits = argv[0], argv[1], argv[2:]
    with open(src, "rb") as f:
        magic, major, minor, sections = read(f.read())
    manifest = json.loads(sections[0][2])
    for e in edits:
        path, value = e.split("=", 1)
        keys = path.split(".")
        node = manifest
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = json.loads(value)
        else:
            node[last] = json.loads(value)
    sections[0][2] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    with open(dst, "wb") as f:
        f.write(write(magic, major, minor, sections))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Compares two udf containers (.udfa / .udfm) section by section
(include/udf/artifact/container.h): prints each section's kind, size and
whether its bytes are the same, then the manifests' differing lines.

    sections.py OLD NEW
"""
import difflib
import struct
import sys


def sections(path):
    b = open(path, "rb").read()
    count, table = struct.unpack_from("<I", b, 24)[0], struct.unpack_from("<Q", b, 32)[0]
    out = []
    for i in range(count):
        kind, tag, off, size = struct.unpack_from("<IIQQ", b, table + 64 * i)
        out.append((kind, tag, b[off:off + size]))
    return out


old, new = sections(sys.argv[1]), sections(sys.argv[2])
print(f"sections: {len(old)} / {len(new)}")
same = sum(1 for a, b in zip(old[1:], new[1:]) if a == b)
print(f"code sections byte for byte the same: {same} of {len(new) - 1}")
for i, (a, b) in enumerate(zip(old, new)):
    if a != b and i > 0:
        print(f"section {i} (kind {b[0]}, tag {b[1]}) differs: {len(a[2])} / {len(b[2])} bytes")
print("manifest diff:")
for line in difflib.unified_diff(old[0][2].decode().splitlines(), new[0][2].decode().splitlines(), lineterm="", n=0):
    if not line.startswith(("---", "+++", "@@")):
        print(" ", line)

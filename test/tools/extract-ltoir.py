#!/usr/bin/env python3
"""Writes the LTO-IR payload for one arch of a udf artifact (.udfa) to a file.

    extract-ltoir.py ARTIFACT ARCH OUT        (ARCH: sm_90 or 90)

The payload is found by its LTO-IR header (magic ed 43 4e 7f, the arch times
ten as a little-endian u16 at offset 26).  Exit status 1 if there is none.
"""
import struct
import sys


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    data = open(argv[0], "rb").read()
    arch = int(argv[1].replace("sm_", ""))
    count, table = struct.unpack_from("<I", data, 24)[0], struct.unpack_from("<Q", data, 32)[0]
    for i in range(count):
        _kind, _tag, off, size = struct.unpack_from("<IIQQ", data, table + 64 * i)
        payload = data[off:off + size]
        if payload[:4] == b"\xed\x43\x4e\x7f" and struct.unpack_from("<H", payload, 26)[0] == arch * 10:
            open(argv[2], "wb").write(payload)
            return 0
    sys.stderr.write("extract-ltoir: no sm_%d LTO-IR in %s\n" % (arch, argv[0]))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

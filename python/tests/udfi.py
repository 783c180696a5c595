"""This runtime's index file (lib/runtime/index/index_file.h) read with numpy, for the tests of
indexes made elsewhere (test_faiss.py, test_cuvs.py)."""
from __future__ import annotations

import struct

import numpy as np

ELEM = {0: np.float32, 1: np.float16, 2: np.int8, 3: np.uint8}


def read_index_file(path) -> dict:
    """The header's fields, the centroids (n_lists x dim float32), the list sizes, and per list
    the ids and the vectors (size x dim of the element type)."""
    b = open(path, "rb").read()
    assert b[:8] == b"\x89UDFIVF\n"
    major, minor, elem, dim, n_lists, coarse, size, next_id, balance = struct.unpack_from("<6Iqqd", b, 8)
    at = 8 + struct.calcsize("<6Iqqd")
    strings = []
    for _ in range(2):
        (n,) = struct.unpack_from("<I", b, at)
        strings.append(b[at + 4:at + 4 + n].decode())
        at += 4 + n
    centroids = np.frombuffer(b, np.float32, n_lists * dim, at).reshape(n_lists, dim)
    at += centroids.nbytes
    sizes = np.frombuffer(b, np.uint64, n_lists, at)
    at += sizes.nbytes
    dtype = np.dtype(ELEM[elem])
    ids, vecs = [], []
    for s in sizes.tolist():
        ids.append(np.frombuffer(b, np.int64, s, at))
        at += 8 * s
        vecs.append(np.frombuffer(b, dtype, s * dim, at).reshape(s, dim))
        at += dtype.itemsize * s * dim
    assert at + 32 == len(b)
    return dict(major=major, elem=elem, dim=dim, n_lists=n_lists, coarse=coarse, size=size, next_id=next_id,
                balance=balance, symbol=strings[0], cache_key=strings[1], centroids=centroids, sizes=sizes,
                ids=ids, vecs=vecs)

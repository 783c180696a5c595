"""Writes <file>.rows.npy beside each cuVS file here: the rows make_files.py built it from.

NumPy only, no GPU:  python3 make_rows.py test/data/cuvs_26_10

make_files.py's rows drawn again (numpy.random.default_rng(0).normal(size=(300, 12)), one
generator for the six files in its loop's order, int8 / uint8 scaled and clipped and cast with
astype), row i the vector of id i, in the element type of the index (<f4, <f2, |i1, |u1), so that
test/unit/cuvs_file_test.cpp compares the vectors it reads with them bit for bit.
"""
import sys

import numpy as np

FILES = (("float32", "sqeuclidean"), ("float32", "inner_product"), ("float16", "sqeuclidean"),
         ("int8", "sqeuclidean"), ("uint8", "sqeuclidean"), ("float32", "cosine"))


def rows():
    """{file name: the rows as make_files.py cast them}."""
    rng = np.random.default_rng(0)
    out = {}
    for dt, metric in FILES:
        x = rng.normal(size=(300, 12))
        if dt == "int8":
            x = np.clip(x * 40, -127, 127)
        if dt == "uint8":
            x = np.clip(128 + x * 40, 0, 255)
        out[f"{dt}-{metric}.cuvs"] = x.astype(dt)
    return out


if __name__ == "__main__":
    for name, x in rows().items():
        np.save(f"{sys.argv[1]}/{name[:-5]}.rows.npy", x)

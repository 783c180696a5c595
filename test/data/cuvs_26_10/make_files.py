"""Writes the cuVS IVF-Flat files in this folder (serialization version 5).

They were written on an NVIDIA H200 with the cuvs-cu13 26.10.0 wheels (cuVS
26.10, whose IVF-Flat serialization version is 5) by

    python3 make_files.py test/data/cuvs_26_10

Each file is ivf_flat.save of an index built with n_lists=4 and
add_data_on_build=True over 300 rows of dim 12 (ids 0..299): the rows of
numpy.random.default_rng(0).normal(size=(300, 12)), one generator shared by
the six files and drawn in the loop's order, int8 / uint8 scaled and clipped
as below and then cast with astype (truncation toward zero).  The reader's
tests (test/unit/cuvs_file_test.cpp, python/tests/test_cuvs.py) regenerate
the rows with NumPy on the CPU and compare.  Needs cuVS and a GPU.
"""
import os
import sys

import cupy as cp
import numpy as np
from cuvs.neighbors import ivf_flat

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
for dt, metric in (("float32", "sqeuclidean"), ("float32", "inner_product"), ("float16", "sqeuclidean"),
                   ("int8", "sqeuclidean"), ("uint8", "sqeuclidean"), ("float32", "cosine")):
    x = rng.normal(size=(300, 12))
    if dt == "int8":
        x = np.clip(x * 40, -127, 127)
    if dt == "uint8":
        x = np.clip(128 + x * 40, 0, 255)
    x = cp.asarray(x.astype(dt))
    idx = ivf_flat.build(ivf_flat.IndexParams(n_lists=4, metric=metric, add_data_on_build=True), x)
    ivf_flat.save(f"{out}/{dt}-{metric}.cuvs", idx)

#!/usr/bin/env python3
"""Writes the vector files the udf-run tests read into the folder argv[1]."""
import os
import struct
import sys

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
x = rng.random((200, 16), dtype=np.float32)


def fvecs(path, a, dims=None):
    with open(path, "wb") as f:
        for i, row in enumerate(a):
            d = a.shape[1] if dims is None else dims[i]
            f.write(struct.pack("<i", d))
            f.write(row[:d].astype("<f4").tobytes())


fvecs(f"{out}/base.fvecs", x)
fvecs(f"{out}/q.fvecs", x[:5])
np.save(f"{out}/q.npy", x[:5])
np.save(f"{out}/q8.npy", x[:5, :8])
np.save(f"{out}/w.npy", np.ones(16, np.float32))
np.save(f"{out}/f.npy", np.asfortranarray(x[:5]))
np.save(f"{out}/c.npy", x[:5].astype(np.complex64))
np.save(f"{out}/big.npy", x[:5].astype(">f4"))
np.save(f"{out}/q3d.npy", x[:8].reshape(2, 4, 16))
with open(f"{out}/base.fvecs", "rb") as f:
    b = f.read()
open(f"{out}/trunc.fvecs", "wb").write(b[:-6])
fvecs(f"{out}/mixed.fvecs", x[:4], dims=[16, 16, 15, 16])
open(f"{out}/trunc.npy", "wb").write(open(f"{out}/q.npy", "rb").read()[:-10])
open(f"{out}/junk.npy", "wb").write(b"not numpy at all")
open(f"{out}/junk.udfm", "wb").write(b"not a module")

"""What udfc needs to package py_wl2 (the metadata LTO-IR cannot carry).

Kept apart from metric.py so that search.py can package a precompiled LTO-IR
on a machine without numba.
"""
SYMBOL = "py_wl2"
UDFC_FLAGS = ["--symbol", SYMBOL, "--capture", "weights:f32[]"]

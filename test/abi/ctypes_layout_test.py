#!/usr/bin/env python3
"""Checks every ctypes declaration of a public C struct against the C layout.

    ctypes_layout_test.py --cc CC --include DIR [--include DIR ...] MODULE.py ...

Each MODULE is imported (its folder first on sys.path) and every
ctypes.Structure subclass it defines is matched, by the name table below, to
the C struct it declares.  A C program that includes udf/runtime.h and
udf/runtime_interop.h prints sizeof and the offsetof of every field the
ctypes class names; the test fails when a class declares a struct the table
does not know, when a field is missing from the C struct (the program does
not compile), or when a size or an offset differs: a ctypes struct smaller
than the C one is how udf_search_params_default once wrote 24 bytes past a
Python object (examples/python/search.py lacked the filter fields).  The
nanobind extension (python/src/udf_ext.cpp) is compiled against the header,
so it has no declaration of its own to check.
"""
import argparse
import ctypes
import importlib.util
import os
import subprocess
import sys
import tempfile

# ctypes class name -> the C struct it declares.
C_NAMES = {
    "Tensor": "udf_tensor",
    "DeviceInfo": "udf_device_info",
    "ArtifactSource": "udf_artifact_source",
    "LinkOptions": "udf_link_options",
    "IndexParams": "udf_index_params",
    "CaptureBinding": "udf_capture_binding",
    "SearchParams": "udf_search_params",
    "IndexInfo": "udf_index_info",
    "SearchStats": "udf_search_stats",
    "SearchWork": "udf_search_work",
    "MetricInfo": "udf_metric_info",
    "CaptureInfo": "udf_capture_info",
    "FilterInfo": "udf_filter_info",
    "DLDevice": "DLDevice",
    "DLDataType": "DLDataType",
    "DLTensor": "DLTensor",
    "DLManagedTensor": "DLManagedTensor",
}


def structs_of(path):
    """The ctypes.Structure subclasses defined in the file at `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        name = "layout_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(folder)
    return [v for v in vars(mod).values()
            if isinstance(v, type) and issubclass(v, ctypes.Structure) and v.__module__ == mod.__name__]


def c_layout(cc, includes, wanted):
    """{c_name: (sizeof, {field: offset})} from a compiled C program."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "udf/runtime.h"',
             '#include "udf/runtime_interop.h"', "int main(void) {"]
    for c_name, fields in sorted(wanted.items()):
        lines.append(f'  printf("{c_name} sizeof() %zu\\n", sizeof({c_name}));')
        for f in fields:
            lines.append(f'  printf("{c_name} {f} %zu\\n", offsetof({c_name}, {f}));')
    lines += ["  return 0;", "}"]
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        cmd = [cc, "-std=c99", *[f"-I{d}" for d in includes], src, "-o", exe]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"FAIL: the layout program does not compile (a declared field the C struct lacks?):\n"
                     f"{' '.join(cmd)}\n{r.stderr}")
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    layout = {}
    for line in out.splitlines():
        c_name, what, value = line.split()
        size, offsets = layout.setdefault(c_name, (None, {}))
        if what == "sizeof()":
            layout[c_name] = (int(value), offsets)
        else:
            offsets[what] = int(value)
    return layout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--include", action="append", default=[])
    ap.add_argument("modules", nargs="+")
    args = ap.parse_args()

    failures = []
    declared = []  # (module, class, c_name)
    wanted = {}
    for path in args.modules:
        classes = structs_of(path)
        if not classes:
            failures.append(f"{path}: no ctypes.Structure found (is the table of modules stale?)")
        for cls in classes:
            c_name = C_NAMES.get(cls.__name__)
            if c_name is None:
                failures.append(f"{path}: class {cls.__name__} declares a struct this test does not know: "
                                "add it to C_NAMES")
                continue
            declared.append((path, cls, c_name))
            wanted.setdefault(c_name, set()).update(name for name, *_ in cls._fields_)
    layout = c_layout(args.cc, args.include, wanted) if wanted else {}
    for path, cls, c_name in declared:
        size, offsets = layout[c_name]
        where = f"{os.path.basename(path)}: {cls.__name__} ({c_name})"
        if ctypes.sizeof(cls) != size:
            failures.append(f"{where}: sizeof {ctypes.sizeof(cls)}, C has {size}")
        for name, *_ in cls._fields_:
            off = getattr(cls, name).offset
            if off != offsets[name]:
                failures.append(f"{where}: field {name} at offset {off}, C has it at {offsets[name]}")
        print(f"ok {where}: {size} bytes, {len(cls._fields_)} fields" if not any(f.startswith(where) for f in failures)
              else f"FAIL {where}")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(declared)} declarations checked, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

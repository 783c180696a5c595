#!/usr/bin/env python3
"""Builds the sdist and the manylinux wheels of the udf Python package.

    scripts/build_wheels.py [--out DIR] [--python PY]... [--from-tree] [--no-isolation]

1. The sdist (`python -m build --sdist`): every file the build needs, DIR/udf-VERSION.tar.gz.
2. For each CPython (default: every 3.10 .. 3.13 found on PATH as python3.X or under
   ~/.pyenv/versions), a wheel built *from that sdist* (unpacked in build/sdist-src; each
   interpreter's CMake build folder is build/wheel-sdist/<wheel tag>, so a second run only
   rebuilds what changed), with `pip wheel` (build isolation: scikit-build-core and nanobind
   come from the package registry; --no-isolation uses the interpreter's own).
   --from-tree builds from the source tree instead (its build folder build-wheel-<tag>, as
   pyproject.toml says), which is what CI's wheel test does: ccache then serves most of it.
3. `auditwheel repair` to the manylinux_2_34_x86_64 policy: the binaries need glibc 2.34
   (GLIBC_2.34, GLIBCXX_3.4.29, CXXABI_1.3.13: AlmaLinux/RHEL 9, Ubuntu 22.04, Debian 12 and
   newer) and nothing outside the policy but libLLVM.so.22.1 and libMLIR.so.22.1, which only
   the optional IR front end (lib/libudf_frontend_ir.so) links and which are left out on
   purpose (--exclude): the CUDA libraries are the nvidia-* wheels the package depends on,
   loaded with dlopen, and the driver is the user's.

Prints a table (wheel, size, build and repair time) and writes DIR/wheels.json.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICY = "manylinux_2_34_x86_64"
# Needed only by the optional IR front end; never grafted into the wheel.
EXCLUDE = ["libLLVM.so.22.1", "libMLIR.so.22.1"]
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]


def log(msg):
    print("build_wheels: " + msg, flush=True)


def run(cmd, **kw):
    log("$ " + " ".join(cmd))
    r = subprocess.run(cmd, **kw)
    if r.returncode != 0:
        sys.exit("build_wheels: failed (exit %d): %s" % (r.returncode, " ".join(cmd)))
    return r


def works(exe):
    # pyenv's shims are on PATH for every version but run only the selected ones.
    return subprocess.run([exe, "-c", "pass"], capture_output=True).returncode == 0


def find_pythons():
    found = []
    for v in PYTHONS:
        cands = [shutil.which("python" + v)]
        cands += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/%s.*/bin/python%s" % (v, v))), reverse=True)
        exe = next((c for c in cands if c and works(c)), None)
        if exe:
            found.append(exe)
        else:
            log("no CPython %s found (python%s on PATH or ~/.pyenv/versions): its wheel is skipped" % (v, v))
    return found


def python_tag(py):
    out = subprocess.run([py, "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"], capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def make_sdist(out):
    before = set(glob.glob(os.path.join(out, "udf-*.tar.gz")))
    for f in before:
        os.remove(f)
    run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", out, ROOT])
    made = glob.glob(os.path.join(out, "udf-*.tar.gz"))
    if len(made) != 1:
        sys.exit("build_wheels: expected one sdist in %s, found %s" % (out, made))
    return made[0]


def unpack_sdist(sdist):
    # A fixed folder, so that each interpreter's CMake build folder stays valid.
    dest = os.path.join(ROOT, "build", "sdist-src")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    with tarfile.open(sdist) as t:
        t.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(dest)
    (top,) = os.listdir(dest)
    return os.path.join(dest, top)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "dist"), help="where the sdist and wheels go (default dist/)")
    ap.add_argument("--python", action="append", help="an interpreter to build for (repeatable)")
    ap.add_argument("--from-tree", action="store_true", help="build from the source tree, not from the sdist")
    ap.add_argument("--no-isolation", action="store_true", help="use each interpreter's scikit-build-core/nanobind")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    raw = os.path.join(out, "raw")
    shutil.rmtree(raw, ignore_errors=True)
    pythons = args.python or find_pythons()
    if not pythons:
        sys.exit("build_wheels: no CPython 3.10 .. 3.13 to build for")

    rows = []
    sdist = None
    if args.from_tree:
        src = ROOT
    else:
        t0 = time.monotonic()
        sdist = make_sdist(out)
        rows.append({"file": os.path.basename(sdist), "bytes": os.path.getsize(sdist), "build_s": time.monotonic() - t0,
                     "repair_s": 0.0})
        src = unpack_sdist(sdist)

    for py in pythons:
        tag = python_tag(py)
        t0 = time.monotonic()
        dest = os.path.join(raw, tag)
        cmd = [py, "-m", "pip", "wheel", src, "--no-deps", "--disable-pip-version-check", "-w", dest]
        if args.no_isolation:
            cmd.append("--no-build-isolation")
        if not args.from_tree:
            # (the long form: pip < 23.1 has no -C)
            cmd.append("--config-settings=build-dir=" + os.path.join(ROOT, "build", "wheel-sdist", "{wheel_tag}"))
        run(cmd)
        built = glob.glob(os.path.join(dest, "udf-*.whl"))
        if len(built) != 1:
            sys.exit("build_wheels: pip wheel made %s for %s" % (built, py))
        build_s = time.monotonic() - t0
        t0 = time.monotonic()
        for old in glob.glob(os.path.join(out, "udf-*-%s-%s-*.whl" % (tag, tag))):
            os.remove(old)
        cmd = [sys.executable, "-m", "auditwheel", "repair", "--plat", POLICY, "-w", out, built[0]]
        for lib in EXCLUDE:
            cmd += ["--exclude", lib]
        run(cmd)
        fixed = glob.glob(os.path.join(out, "udf-*-%s-%s-%s.whl" % (tag, tag, POLICY)))
        if len(fixed) != 1:
            sys.exit("build_wheels: auditwheel made %s for %s" % (fixed, py))
        rows.append({"file": os.path.basename(fixed[0]), "python": py, "bytes": os.path.getsize(fixed[0]),
                     "build_s": build_s, "repair_s": time.monotonic() - t0})
    shutil.rmtree(raw, ignore_errors=True)

    print("\n| file | size | build | repair |\n|---|---:|---:|---:|")
    for r in rows:
        print("| %s | %.1f MB | %.0f s | %.1f s |" % (r["file"], r["bytes"] / 1e6, r["build_s"], r["repair_s"]))
    with open(os.path.join(out, "wheels.json"), "w") as f:
        json.dump({"policy": POLICY, "sdist": os.path.basename(sdist) if sdist else None, "files": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Tests cmake/pinned_sources.py, which compiles the kernel pack in a copy of its sources at a
path that depends on their content only.

    pinned_sources_test.py [--pinned PATH] [--source-root ROOT] [--nvcc NVCC]

With a stand-in command that records its working directory, $PWD and the files it sees: two
folders with the same sources run in one copy; an edit gets another; a damaged copy is made
again; a shared or foreign stage folder and an empty one run in the source folder; the exit
status comes back; concurrent runs make one copy and leave no temporary one.  With --nvcc and
--source-root: one kernel-pack file compiled from two clones in folders of different depth is
the same, byte for byte.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDER = r'''import os, sys, time
out = sys.argv[1]
time.sleep(0.3)  # a compile's while: its copy must stay
seen = []
for folder, dirs, files in os.walk(".."):
    dirs.sort()
    for name in sorted(files):
        path = os.path.join(folder, name)
        with open(path) as f:
            seen.append(os.path.relpath(path, "..") + "=" + f.read())
with open(out, "w") as f:
    f.write("\n".join([os.getcwd(), os.environ.get("PWD", "")] + seen) + "\n")
dep = os.environ.get("RECORDER_DEPFILE")
if dep:  # as nvcc writes one: relative paths, and absolute ones in the copy and outside it
    with open(dep, "w") as f:
        f.write(out + " : a.cu \\\n  ../include/udf/c.h \\\n  " + os.path.join(os.getcwd(), "part", "b.cuh")
                + " \\\n  /usr/include/stdio.h\n")
sys.exit(int(os.environ.get("RECORDER_EXIT", "0")))
'''

failures = 0


def check(ok: bool, what: str) -> None:
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures += 1


def make_tree(root: str, kernel_text: str = "kernel 1") -> str:
    for rel, text in (("kernels/a.cu", kernel_text), ("kernels/part/b.cuh", "part"), ("include/udf/c.h", "header"),
                      ("kernels/CMakeLists.txt", "not a source"), ("kernels/gen.py", "not a source either")):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return root


def run(pinned: str, root: str, stage: str, out: str, env: dict | None = None,
        depfile: str = "") -> subprocess.CompletedProcess:
    recorder = os.path.join(os.path.dirname(out), "recorder.py")
    if not os.path.exists(recorder):
        with open(recorder, "w") as f:
            f.write(RECORDER)
    dep = ["--depfile", depfile] if depfile else []
    return subprocess.run([sys.executable, pinned, "--source-root", root, f"--stage-root={stage}", *dep, "--",
                           sys.executable, recorder, out], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))


def record(out: str) -> list[str]:
    with open(out) as f:
        return f.read().splitlines()


def stand_in_cases(pinned: str, tmp: str) -> None:
    one = make_tree(os.path.join(tmp, "one"))
    two = make_tree(os.path.join(tmp, "deeper", "two"))
    stage = os.path.join(tmp, "stage")
    r1 = run(pinned, one, stage, os.path.join(tmp, "r1"))
    r2 = run(pinned, two, stage, os.path.join(tmp, "r2"))
    check(r1.returncode == 0 and r2.returncode == 0 and not r1.stderr and not r2.stderr,
          f"two clones run without a warning ({r1.stderr.strip()}{r2.stderr.strip()})")
    a, b = record(os.path.join(tmp, "r1")), record(os.path.join(tmp, "r2"))
    copies = [n for n in os.listdir(stage)]
    check(len(copies) == 1 and a[0] == b[0] == os.path.join(stage, copies[0], "kernels"),
          f"they run in one copy's kernels folder ({a[0]}, {b[0]})")
    check(a[1] == a[0], "with PWD set to it")
    check(a[2:] == b[2:] == ["include/udf/c.h=header", "kernels/a.cu=kernel 1", "kernels/part/b.cuh=part"],
          f"the copy holds the sources and nothing else ({a[2:]})")

    make_tree(two, "kernel 2")
    run(pinned, two, stage, os.path.join(tmp, "r3"))
    c = record(os.path.join(tmp, "r3"))
    check(c[0] != a[0] and "kernels/a.cu=kernel 2" in c and len(os.listdir(stage)) == 2,
          "an edited source runs in another copy")

    first = os.path.dirname(a[0])
    with open(os.path.join(first, "kernels", "a.cu"), "w") as f:
        f.write("tampered")
    with open(os.path.join(first, "include", "extra.h"), "w") as f:
        f.write("extra")
    run(pinned, one, stage, os.path.join(tmp, "r4"))
    d = record(os.path.join(tmp, "r4"))
    check(d[0] == a[0] and d[2:] == a[2:], f"a damaged copy is made again ({d[2:]})")

    r5 = run(pinned, one, stage, os.path.join(tmp, "r5"), {"RECORDER_EXIT": "3"})
    check(r5.returncode == 3, f"the command's exit status comes back ({r5.returncode})")

    for where, stage_root in (("the copy", stage), ("the source folder", "")):
        dep = os.path.join(tmp, "out.d")
        rd = run(pinned, two, stage_root, os.path.join(tmp, "rd"), {"RECORDER_DEPFILE": dep}, depfile=dep)
        with open(dep) as f:
            text = f.read()
        want = [os.path.join(two, "kernels", "a.cu"), os.path.join(two, "include", "udf", "c.h"),
                os.path.join(two, "kernels", "part", "b.cuh"), "/usr/include/stdio.h"]
        check(rd.returncode == 0 and text.split(":", 1)[0].strip() == os.path.join(tmp, "rd")
              and text.split(":", 1)[1].replace("\\", " ").split() == want,
              f"run in {where}: the depfile names the source folder's files ({text!r})")

    r6 = run(pinned, one, "", os.path.join(tmp, "r6"))
    check(r6.returncode == 0 and not r6.stderr and record(os.path.join(tmp, "r6"))[0] == os.path.join(one, "kernels"),
          "an empty stage folder: runs in the source folder")

    shared = os.path.join(tmp, "shared")
    os.makedirs(shared)
    os.chmod(shared, 0o777)
    r7 = run(pinned, one, shared, os.path.join(tmp, "r7"))
    check(r7.returncode == 0 and "writable by others" in r7.stderr and not os.listdir(shared)
          and record(os.path.join(tmp, "r7"))[0] == os.path.join(one, "kernels"),
          f"a stage folder others can write: a warning, runs in the source folder ({r7.stderr.strip()})")

    stale = os.path.join(stage, ".tmp-left")
    os.makedirs(stale)
    old = time.time() - 7200
    os.utime(stale, (old, old))
    used = os.path.dirname(c[0])  # "kernel 2"'s copy: used an hour ago (kept)
    os.utime(used, (old, old))
    unused = os.path.dirname(a[0])  # "kernel 1"'s copy: used two days ago
    os.utime(unused, (old - 2 * 86400, old - 2 * 86400))
    make_tree(one, "kernel 3")
    run(pinned, one, stage, os.path.join(tmp, "r8"))
    check(not os.path.exists(stale), "a killed build's temporary copy is removed once it is an hour old")
    check(not os.path.exists(unused) and os.path.isdir(used),
          "a copy no build used for a day is removed when another is made; one used an hour ago is kept")
    run(pinned, two, stage, os.path.join(tmp, "r9"))
    check(time.time() - os.stat(used).st_mtime < 600, "using a copy touches it")

    # A tree the size of the real one (about 80 files, 700 KB), so that copies overlap.
    big = make_tree(os.path.join(tmp, "big"))
    for i in range(80):
        with open(os.path.join(big, "include", "udf", f"h{i}.h"), "w") as f:
            f.write(f"// {i}\n" * 1000)
    for round_ in range(4):
        fresh = os.path.join(tmp, f"fresh{round_}")
        with ThreadPoolExecutor(12) as pool:
            rs = list(pool.map(lambda i: run(pinned, big, fresh, os.path.join(tmp, f"c{i}")), range(12)))
        ok = all(r.returncode == 0 and not r.stderr for r in rs)
        dirs = {record(os.path.join(tmp, f"c{i}"))[0] for i in range(12)} if ok else set()
        check(ok and len(dirs) == 1 and os.listdir(fresh) == [os.path.basename(os.path.dirname(dirs.pop()))],
              f"twelve concurrent runs on a new stage folder (round {round_ + 1}): each sees the whole copy, one "
              f"copy, no temporary one left ({[r.stderr.strip()[-200:] for r in rs if r.returncode or r.stderr]})")


def nvcc_case(pinned: str, source_root: str, nvcc: str, tmp: str) -> None:
    outs = []
    for name in ("a", os.path.join("b", "deeper", "clone")):
        clone = os.path.join(tmp, "clones", name)
        for tree in ("kernels", "include"):
            shutil.copytree(os.path.join(source_root, tree), os.path.join(clone, tree))
        out = os.path.join(tmp, f"merge_{len(outs)}.ltoir")
        r = subprocess.run([sys.executable, pinned, "--source-root", clone, f"--stage-root={tmp}/nvcc-stage", "--",
                            nvcc, "-arch=lto_75", "-dlto", "-rdc=true", "-ltoir", "-std=c++17", "-I../include",
                            "-DUDF_PACK_FILE_merge_v1_min=UDF_PACK_PROBE", "-o", out, "-c", "ivf_flat_v1.cu"],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"nvcc compiles merge_v1_min in {clone} ({r.stderr.strip()[-300:]})")
        outs.append(out)
    with open(outs[0], "rb") as f0, open(outs[1], "rb") as f1:
        check(f0.read() == f1.read(), "two clones' merge_v1_min LTO-IR is the same, byte for byte")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pinned", default=os.path.join(HERE, "..", "..", "cmake", "pinned_sources.py"))
    ap.add_argument("--source-root", default="")
    ap.add_argument("--nvcc", default="")
    a = ap.parse_args()
    pinned = os.path.abspath(a.pinned)
    with tempfile.TemporaryDirectory(prefix="pinned-sources-test-") as tmp:
        stand_in_cases(pinned, tmp)
        if a.nvcc and a.source_root:
            nvcc_case(pinned, os.path.abspath(a.source_root), a.nvcc, tmp)
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Tests cmake/nvcc_cache.py, the cache of the build's nvcc outputs, with a stand-in nvcc.

    nvcc_cache_test.py [--nvcc-cache PATH]

The stand-in reads the source named last and the files it `#include`s, and writes
an output that holds their text and its arguments, a depfile for -MD -MF, and a
line to a log per compile (so a test sees whether the cache compiled or copied).
The output does not depend on the output's or the depfile's path, as nvcc's.  A source holding
`#error` fails; `#sleep` makes it wait (for the killed build).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_NVCC = r'''#!/usr/bin/env python3
import os, re, sys, time
args = sys.argv[1:]
if args == ["--version"]:
    print("stand-in nvcc, release 0.0")
    sys.exit(0)
with open(os.environ["FAKE_NVCC_LOG"], "a") as log:
    log.write(" ".join(args) + "\n")
out = args[args.index("-o") + 1]
dep = args[args.index("-MF") + 1] if "-MF" in args else None
src = next(a for a in args if a.endswith(".cu"))
read, text = [], []
def take(path):
    read.append(path)
    with open(path) as f:
        for line in f:
            if line.startswith("#error"):
                sys.stderr.write(f"{path}: error: {line[7:]}")
                sys.exit(2)
            if line.startswith("#sleep"):
                time.sleep(float(line.split()[1]))
            m = re.match(r'#include "(.*)"', line)
            if m:
                take(os.path.join(os.path.dirname(path), m.group(1)))
            else:
                text.append(line)
take(src)
sys.stderr.write("stand-in nvcc: a warning\n")
with open(out, "w") as f:
    f.write("".join(text) + "args: " + " ".join(a for a in args if a not in (out, dep, "-o", "-MD", "-MF")) + "\n")
if dep:
    with open(dep, "w") as f:
        f.write(out + " : " + " \\\n    ".join(r.replace(" ", "\\ ") for r in read) + "\n")
'''

failures = 0


def check(cond: bool, what: str) -> None:
    global failures
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures += 1


class Env:
    def __init__(self, root: str, cache_py: str):
        self.root = root
        self.cache_py = cache_py
        self.nvcc = os.path.join(root, "nvcc")
        with open(self.nvcc, "w") as f:
            f.write(FAKE_NVCC)
        os.chmod(self.nvcc, 0o755)
        self.log = os.path.join(root, "compiles.log")
        self.cache = os.path.join(root, "cache")
        self.src = os.path.join(root, "src")
        os.makedirs(self.src)
        self.write("src/k.cu", '#include "parts/a.cuh"\nkernel\n')
        self.write("src/parts/a.cuh", "part a, first\n")

    def write(self, rel: str, text: str) -> None:
        p = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)

    def compiles(self) -> int:
        try:
            with open(self.log) as f:
                return len(f.readlines())
        except FileNotFoundError:
            return 0

    def cmd(self, out: str, extra=(), dep: str | None = None, cache: str | None = None, max_size=None):
        c = [sys.executable, self.cache_py, "--dir", self.cache if cache is None else cache]
        if max_size is not None:
            c += ["--max-size", str(max_size)]
        c += ["--", self.nvcc, "-arch=x", *extra, "-o", out]
        if dep:
            c += ["-MD", "-MF", dep]
        return c + ["k.cu"]

    def run(self, out: str, cwd: str | None = None, **kw) -> subprocess.CompletedProcess:
        env = dict(os.environ, FAKE_NVCC_LOG=self.log)
        return subprocess.run(self.cmd(out, **kw), cwd=cwd or self.src, env=env, capture_output=True, text=True)


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvcc-cache", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "cmake", "nvcc_cache.py"))
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="nvcc-cache-test-")
    try:
        e = Env(root, os.path.abspath(a.nvcc_cache))
        out1, out2 = os.path.join(root, "b1", "k.ltoir"), os.path.join(root, "b2", "k.ltoir")
        dep1, dep2 = out1 + ".d", out2 + ".d"

        r1 = e.run(out1, dep=dep1)
        check(r1.returncode == 0 and e.compiles() == 1, "a first build compiles (rc %d)" % r1.returncode)
        r2 = e.run(out2, dep=dep2)
        check(r2.returncode == 0 and e.compiles() == 1, "a second build folder's same command is copied, not compiled")
        check(read(out1) == read(out2), "the copy is the compile's output byte for byte")
        check("stand-in nvcc: a warning" in r2.stderr, "a copy replays the compile's stderr")
        part = os.path.join(e.src, "parts", "a.cuh")
        d1, d2 = read(dep1), read(dep2)
        check(part in d1 and part in d2 and os.path.join(e.src, "k.cu") in d2,
              "both depfiles name every input by its absolute path")
        check(d1.startswith(out1 + " :") and d2.startswith(out2 + " :"), "each depfile's target is its own output")
        check(not [n for n in os.listdir(os.path.dirname(out1)) if n.startswith(".")],
              "no temporary file is left beside the output")
        mask = os.umask(0)
        os.umask(mask)
        check(os.stat(out1).st_mode & 0o777 == 0o666 & ~mask and os.stat(out2).st_mode & 0o777 == 0o666 & ~mask,
              "the output and its copy have the umask's mode (%o, %o)" % (os.stat(out1).st_mode, os.stat(out2).st_mode))

        e.write("src/parts/a.cuh", "part a, second\n")
        e.run(out2, dep=dep2)
        check(e.compiles() == 2 and "part a, second" in read(out2), "an edit of an included file compiles again")
        e.write("src/parts/a.cuh", "part a, first\n")
        e.run(out2, dep=dep2)
        check(e.compiles() == 2 and read(out2) == read(out1), "the edit undone is the first entry again, copied")

        e.run(out2, extra=["-DX=1"])
        check(e.compiles() == 3 and "-DX=1" in read(out2), "other arguments are another key")
        other = os.path.join(root, "src2")
        shutil.copytree(e.src, other)
        e.run(out2, cwd=other)
        check(e.compiles() == 4, "another working directory is another key (nvcc writes it into LTO-IR)")

        # Another version of the host compiler of the same name (g++ on PATH) is another key.
        gxx_dir = os.path.join(root, "gxx")
        os.makedirs(gxx_dir)
        with open(os.path.join(gxx_dir, "g++"), "w") as f:
            f.write("#!/bin/sh\necho \"g++ (stand-in) $FAKE_GXX\"\n")
        os.chmod(os.path.join(gxx_dir, "g++"), 0o755)
        n = e.compiles()
        for version in ("12.2", "12.2", "13.1"):
            env = dict(os.environ, FAKE_NVCC_LOG=e.log, FAKE_GXX=version, PATH=gxx_dir + os.pathsep + os.environ["PATH"])
            subprocess.run(e.cmd(out2), cwd=e.src, env=env, capture_output=True, check=True)
        check(e.compiles() == n + 2, "another version of the host compiler is another key")

        # A folder with a space in its name (nvcc's depfile writes it as "\ "): copied, and an
        # edit of its header seen.
        spaced = os.path.join(root, "with space")
        shutil.copytree(e.src, spaced)
        with open(os.path.join(spaced, "k.cu"), "w") as f:
            f.write('#include "parts/a b.cuh"\nkernel\n')
        shutil.copy(os.path.join(spaced, "parts", "a.cuh"), os.path.join(spaced, "parts", "a b.cuh"))
        n = e.compiles()
        outs = [os.path.join(root, "b7", "k%d.ltoir" % i) for i in range(3)]
        os.makedirs(os.path.dirname(outs[0]))
        e.run(outs[0], cwd=spaced, dep=outs[0] + ".d")
        e.run(outs[1], cwd=spaced, dep=outs[1] + ".d")
        check(e.compiles() == n + 1 and os.path.join(spaced, "parts", "a b.cuh").replace(" ", "\\ ") in read(outs[1] + ".d"),
              "a folder with a space in its name is copied, its depfile escaping the space")
        with open(os.path.join(spaced, "parts", "a b.cuh"), "w") as f:
            f.write("part a, spaced\n")
        e.run(outs[2], cwd=spaced)
        check(e.compiles() == n + 2 and "part a, spaced" in read(outs[2]), "and an edit of its header compiles again")

        # A failed compile: its error shown, a non-zero status, no output, nothing stored.
        e.write("src/k.cu", '#include "parts/a.cuh"\n#error broken kernel\n')
        bad = os.path.join(root, "b3", "k.ltoir")
        r = e.run(bad, dep=bad + ".d")
        check(r.returncode != 0 and "broken kernel" in r.stderr, "a failed compile fails, with nvcc's error")
        check(not os.path.exists(bad) and not os.path.exists(bad + ".d"), "a failed compile writes no output or depfile")
        n = e.compiles()
        e.run(bad)
        check(e.compiles() == n + 1, "a failed compile is not stored")
        e.write("src/k.cu", '#include "parts/a.cuh"\nkernel\n')

        # A lost or damaged output in the cache is a miss, never a wrong copy.
        outputs = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(e.cache, "outputs")) for f in fs]
        for p in outputs:
            with open(p, "r+b") as f:
                f.write(b"X")
        n = e.compiles()
        e.run(out2, dep=dep2)
        check(e.compiles() == n + 1 and read(out2) == read(out1), "a damaged cached output is compiled again")
        shutil.rmtree(os.path.join(e.cache, "outputs"))
        e.run(out2)
        check(e.compiles() == n + 2 and read(out2) == read(out1), "a removed cached output is compiled again")

        # Concurrent builds of one command: every one succeeds with the same bytes.
        shutil.rmtree(e.cache)
        env = dict(os.environ, FAKE_NVCC_LOG=e.log)
        outs = [os.path.join(root, "par%d" % i, "k.ltoir") for i in range(8)]
        procs = [subprocess.Popen(e.cmd(o, dep=o + ".d"), cwd=e.src, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for o in outs]
        rcs = [p.wait() for p in procs]
        check(rcs == [0] * 8 and len({read(o) for o in outs}) == 1 and read(outs[0]) == read(out1),
              "eight concurrent builds all succeed with the same output")
        n = e.compiles()
        e.run(out2)
        check(e.compiles() == n, "and leave an entry the next build copies")

        # A killed build leaves no output and no entry; the next one compiles.
        shutil.rmtree(e.cache)
        e.write("src/k.cu", '#include "parts/a.cuh"\n#sleep 30\nkernel\n')
        killed = os.path.join(root, "b4", "k.ltoir")
        os.makedirs(os.path.dirname(killed))
        p = subprocess.Popen(e.cmd(killed, dep=killed + ".d"), cwd=e.src, env=env, start_new_session=True)
        deadline = time.time() + 20
        while e.compiles() == n and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        check(not os.path.exists(killed) and not os.path.exists(killed + ".d"), "a killed build leaves no output")
        # SIGTERM (ninja stopping a build) also stops nvcc and removes the temporary files.
        stopped = os.path.join(root, "b6", "k.ltoir")
        os.makedirs(os.path.dirname(stopped))
        n = e.compiles()
        p = subprocess.Popen(e.cmd(stopped, dep=stopped + ".d"), cwd=e.src, env=env)
        deadline = time.time() + 20
        while e.compiles() == n and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=20)
        check(rc != 0 and os.listdir(os.path.dirname(stopped)) == [],
              "a build stopped by SIGTERM fails and leaves nothing beside its output (rc %d, %s)"
              % (rc, os.listdir(os.path.dirname(stopped))))
        entries = [f for d, _, fs in os.walk(os.path.join(e.cache, "entries")) for f in fs if f.endswith(".json")]
        check(not entries, "and no entry in the cache")
        e.write("src/k.cu", '#include "parts/a.cuh"\nkernel\n')
        r = e.run(killed, dep=killed + ".d")
        check(r.returncode == 0 and read(killed) == read(out1), "the next build after a killed one succeeds")

        # Past --max-size the least recently used outputs go.
        for i in range(6):
            e.write("src/parts/a.cuh", "part a, version %d\n%s\n" % (i, "x" * 400_000))
            e.run(out2, max_size=1)
        sizes = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(e.cache, "outputs"))
                 for f in fs]
        check(sum(sizes) <= 1 << 20 and len(sizes) >= 1, "the outputs are trimmed to --max-size (%d bytes in %d files)"
              % (sum(sizes), len(sizes)))
        check("version 5" in read(out2), "and the newest output is kept")

        # An empty --dir runs nvcc alone; a command without -o is refused.
        n = e.compiles()
        listing = lambda: sorted(os.path.join(d, f) for d, _, fs in os.walk(e.cache) for f in fs)
        before = listing()
        os.makedirs(os.path.join(root, "b5"))
        r = e.run(os.path.join(root, "b5", "k.ltoir"), cache="")
        r2 = e.run(os.path.join(root, "b5", "k.ltoir"), cache="")
        check(r.returncode == 0 and r2.returncode == 0 and e.compiles() == n + 2 and listing() == before,
              "an empty --dir compiles every time and stores nothing")
        r = subprocess.run([sys.executable, e.cache_py, "--dir", e.cache, "--", e.nvcc, "k.cu"], cwd=e.src,
                           env=env, capture_output=True, text=True)
        check(r.returncode != 0 and "-o FILE" in r.stderr, "a command without '-o FILE' is refused: " + r.stderr.strip())
        entry = next(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(e.cache, "entries")) for f in fs)
        check(json.load(open(entry))["format"] == "udf-nvcc-cache 1", "entries say their format")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

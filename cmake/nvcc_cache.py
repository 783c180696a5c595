#!/usr/bin/env python3
"""Runs one nvcc command through a cache of its output, keyed by content.

    nvcc_cache.py --dir DIR [--max-size MB] -- NVCC ARG...

The build's nvcc runs (the kernel pack's LTO-IR, the runtime's index-kernel
fatbin) are minutes of a cold build, and ccache does not take -ltoir or
-fatbin.  A build folder, the ASan build and the Python wheel's build compile
the same files with the same arguments in the same working directory, so the
second and later builds copy the first one's outputs instead.

The command must name its output with `-o FILE` and compile one file.  The
key is, as ccache's direct mode: nvcc's and its host compiler's identity
(`--version`, the real path), the working directory (nvcc writes it into
LTO-IR), NVCC_* flag variables, the arguments but the output's path and the
depfile's, and the content of every file the compile read (nvcc's depfile:
the sources, the project's headers and the toolkit's and system's).  An
entry is stored only for a compile that succeeded; a hit replays the
compile's stdout and stderr.  As in ccache's direct mode, a new file that
would shadow an included one (the same name earlier on the include path) is
not seen: remove the folder, or configure with -DUDF_NVCC_CACHE_DIR=.

A `-MD -MF FILE` in the command gets its depfile on a hit too, written with
absolute paths (so a build folder can read it whatever nvcc's working
directory was); on a miss the depfile nvcc wrote is rewritten the same way.

The cache survives concurrent builds and a killed one: every file is written
to a temporary name and renamed (a build stopped by SIGTERM, SIGHUP or SIGINT
removes its temporary files), an entry names its output by the output's
hash, and an entry whose output is missing or unreadable is a miss.  Past
--max-size (default 2048 MB) the least recently used outputs are removed.
An empty --dir runs nvcc alone.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FORMAT = "udf-nvcc-cache 1"
FLAG_VARS = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")


def _file_mode() -> int:
    """A new file's mode under the umask (mkstemp's files are 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


FILE_MODE = _file_mode()


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_atomic(path: str, data: bytes) -> None:
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def split_command(args: list[str]) -> tuple[str, str | None, list[str]]:
    """(the output, the depfile or None, the arguments the key hashes) of nvcc's command line."""
    out = dep = None
    keyed: list[str] = []
    i = 1
    while i < len(args):
        a = args[i]
        if a in ("-o", "-MF") and i + 1 < len(args):
            if a == "-o":
                out = args[i + 1]
                keyed += [a, "<path>"]
            else:
                dep = args[i + 1]  # the depfile does not change the output
            i += 2
            continue
        for flag in ("-MF", "-o"):
            if a.startswith(flag) and len(a) > len(flag):
                sys.exit(f"nvcc_cache.py: give '{flag}' and its path as two arguments ('{a}')")
        if a != "-MD":
            keyed.append(a)
        i += 1
    if out is None:
        sys.exit("nvcc_cache.py: the nvcc command has no '-o FILE'")
    if dep is not None and "-MD" not in args and "-M" not in args:
        sys.exit("nvcc_cache.py: '-MF' without '-MD'")
    return out, dep, keyed


def parse_depfile(path: str) -> list[str]:
    """The prerequisites of a make rule nvcc wrote (`out : a b \\` lines, a space in a path as `\\ `)."""
    return read_depfile(path)[1]


def read_depfile(path: str) -> tuple[str, list[str]]:
    """The target and the prerequisites of a make rule nvcc wrote (parse_depfile's format)."""
    with open(path, encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    target, sep, deps = text.partition(": ")
    if not sep:
        raise ValueError(f"{path}: not a depfile")
    seen, order = set(), []
    for d in re.split(r"(?<!\\)\s+", deps.strip()):
        d = d.replace("\\ ", " ")
        if d and d not in seen:
            seen.add(d)
            order.append(d)
    return target.strip().replace("\\ ", " "), order


def write_depfile(path: str, target: str, deps: list[str]) -> None:
    esc = lambda p: p.replace(" ", "\\ ")
    lines = [f"{esc(target)} :"] + [f"  {esc(d)}" for d in deps]
    write_atomic(path, (" \\\n".join(lines) + "\n").encode())


class Cache:
    def __init__(self, root: str, max_bytes: int):
        self.root = root
        self.max_bytes = max_bytes
        self.hashes: dict[str, str | None] = {}

    def file_hash(self, path: str) -> str | None:
        if path not in self.hashes:
            try:
                self.hashes[path] = sha256_file(path)
            except OSError:
                self.hashes[path] = None
        return self.hashes[path]

    def entries(self, base: str) -> str:
        return os.path.join(self.root, "entries", base[:2], base)

    def output(self, digest: str) -> str:
        return os.path.join(self.root, "outputs", digest[:2], digest)

    def lookup(self, base: str) -> dict | None:
        """The newest entry of this command whose inputs all match and whose output is readable."""
        folder = self.entries(base)
        try:
            names = [n for n in os.listdir(folder) if n.endswith(".json")]
        except OSError:
            return None
        found = []
        for n in names:
            p = os.path.join(folder, n)
            try:
                with open(p, encoding="utf-8") as f:
                    e = json.load(f)
                found.append((os.stat(p).st_mtime_ns, n, e))
            except (OSError, ValueError):
                continue
        for _, _, e in sorted(found, key=lambda t: t[:2], reverse=True):
            if e.get("format") != FORMAT:
                continue
            if all(self.file_hash(d) == h for d, h in e["inputs"]):
                try:
                    with open(self.output(e["output"]), "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                if hashlib.sha256(data).hexdigest() != e["output"]:
                    continue
                e["data"] = data
                return e
        return None

    def store(self, base: str, inputs: list[tuple[str, str]], data: bytes, stdout: bytes, stderr: bytes) -> None:
        digest = hashlib.sha256(data).hexdigest()
        write_atomic(self.output(digest), data)
        entry = {"format": FORMAT, "inputs": inputs, "output": digest,
                 "stdout": stdout.decode(errors="replace"), "stderr": stderr.decode(errors="replace")}
        name = hashlib.sha256(json.dumps(inputs).encode()).hexdigest() + ".json"
        write_atomic(os.path.join(self.entries(base), name), json.dumps(entry, indent=1).encode())
        self.trim()

    def trim(self) -> None:
        """Removes the least recently used outputs past max_bytes, down to 80% of it."""
        files = []
        for dirpath, _, names in os.walk(os.path.join(self.root, "outputs")):
            for n in names:
                p = os.path.join(dirpath, n)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                files.append((st.st_mtime_ns, st.st_size, p))
        total = sum(f[1] for f in files)
        if total <= self.max_bytes:
            return
        for _, size, p in sorted(files):
            if total <= self.max_bytes * 0.8:
                break
            try:
                os.unlink(p)
                total -= size
            except OSError:
                pass


def host_compiler(keyed: list[str]) -> str | None:
    """The host compiler nvcc runs (its preprocessor reads the sources): -ccbin, NVCC_CCBIN or g++."""
    name = os.environ.get("NVCC_CCBIN") or "g++"
    for i, a in enumerate(keyed):
        if a in ("-ccbin", "--compiler-bindir") and i + 1 < len(keyed):
            name = keyed[i + 1]
    if os.path.isdir(name):
        name = os.path.join(name, "g++")
    return shutil.which(name)


def tool_identity(path: str | None) -> str:
    if path is None:
        return "none"
    r = subprocess.run([path, "--version"], capture_output=True, check=True)
    return os.path.realpath(path) + "\n" + r.stdout.decode(errors="replace")


def command_key(nvcc: str, keyed: list[str]) -> str:
    h = hashlib.sha256()
    for part in [FORMAT, tool_identity(nvcc), tool_identity(host_compiler(keyed)), os.getcwd(),
                 *(f"{v}={os.environ.get(v, '')}" for v in FLAG_VARS), *keyed]:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def main(argv: list[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="the cache folder; empty: run nvcc alone")
    ap.add_argument("--max-size", type=int, default=2048, help="MB of outputs kept (default 2048)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- nvcc and its arguments")
    a = ap.parse_args(argv)
    # A build stopped by a signal (ninja's SIGTERM, a terminal's SIGHUP) stops
    # nvcc and removes the temporary files: subprocess.run kills its child on
    # the exception, and the `finally` below runs.
    def stop(signum, _frame):
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no nvcc command after '--'")
    if not a.dir:
        return subprocess.run(cmd).returncode
    out, dep, keyed = split_command(cmd)
    cache = Cache(os.path.abspath(a.dir), a.max_size << 20)
    base = command_key(cmd[0], keyed)

    hit = cache.lookup(base)
    if hit is not None:
        write_atomic(out, hit["data"])
        if dep is not None:
            write_depfile(dep, out, [d for d, _ in hit["inputs"]])
        try:
            os.utime(cache.output(hit["output"]))
        except OSError:
            pass
        sys.stdout.write(hit["stdout"])
        sys.stderr.write(hit["stderr"])
        return 0

    # nvcc writes a temporary output and depfile beside the real ones, renamed
    # into place once it succeeded: a failed or killed compile leaves neither.
    folder = os.path.dirname(os.path.abspath(out))
    os.makedirs(folder, exist_ok=True)
    tmp_out = tempfile.mkstemp(dir=folder, prefix=".nvcc-out-")[1]
    tmp_dep = tempfile.mkstemp(dir=folder, prefix=".nvcc-dep-", suffix=".d")[1]
    run_cmd = [tmp_out if k > 0 and cmd[k - 1] == "-o" else tmp_dep if k > 0 and cmd[k - 1] == "-MF" else c
               for k, c in enumerate(cmd)]
    if dep is None:
        run_cmd += ["-MD", "-MF", tmp_dep]
    try:
        started = time.time_ns()
        r = subprocess.run(run_cmd, capture_output=True)
        sys.stdout.buffer.write(r.stdout)
        sys.stderr.buffer.write(r.stderr)
        if r.returncode != 0:
            return r.returncode
        deps = [os.path.abspath(d) for d in parse_depfile(tmp_dep)]
        with open(tmp_out, "rb") as f:
            data = f.read()
        os.chmod(tmp_out, FILE_MODE)
        os.replace(tmp_out, out)
        if dep is not None:
            write_depfile(dep, out, deps)
        # An input edited or removed during the compile: the output may not be
        # its content's, so it is not stored.
        try:
            if any(os.stat(d).st_mtime_ns >= started for d in deps):
                return 0
        except OSError:
            return 0
        inputs = [(d, cache.file_hash(d)) for d in deps]
        if any(h is None for _, h in inputs):
            return 0
        try:
            cache.store(base, inputs, data, r.stdout, r.stderr)
        except OSError as e:
            print(f"nvcc_cache.py: warning: could not store {out} in {cache.root}: {e}", file=sys.stderr)
        return 0
    finally:
        for t in (tmp_out, tmp_dep):
            try:
                os.unlink(t)
            except OSError:
                pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

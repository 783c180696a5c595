#!/usr/bin/env python3
"""Runs a command in a copy of the kernel sources at a path that depends on their content only.

    pinned_sources.py --source-root ROOT --stage-root DIR [--subdir kernels] [--depfile FILE] -- COMMAND...

nvcc writes its working directory and the real path of the file it compiles
into LTO-IR and PTX, so a pack compiled in one clone differs, byte for byte, from the
same pack compiled in another folder, and so do the modules that name its
hash (a Debian package built twice in two folders would not be reproducible).
This copies the compile's inputs -- the C/C++/CUDA sources and headers under
ROOT/kernels and ROOT/include -- to DIR/<key>, where <key> is a hash of their
relative paths and contents, and runs COMMAND in DIR/<key>/<subdir> (with PWD
set to it): every folder holding the same sources then compiles the same
bytes.  COMMAND names its inputs relative to that folder and its outputs by
absolute paths.  --depfile names the make-rule depfile COMMAND writes: its
paths are rewritten, once COMMAND succeeded, to the files in ROOT (relative
ones resolved against the folder COMMAND ran in), so the build tracks the
sources, not the copy.

The copy is made under a temporary name and renamed into place, so concurrent
builds and a killed one leave either a whole copy or none; an existing copy is
used only when its files are the sources, byte for byte, and nothing else.
Each use touches the copy; one no build used for a day is removed when
another copy is made.
DIR must be this user's and writable by no one else (otherwise another user
could change what is compiled): where it is not, or where it cannot be made,
COMMAND runs in ROOT/<subdir> as it is, with a warning.  An empty
--stage-root does the same without one.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

TREES = ("kernels", "include")
SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".def", ".inc")
STALE_TMP_S = 3600  # a temporary copy older than this was left by a killed build
UNUSED_COPY_S = 86400  # a copy no build used for this long is removed when another is made


def sources(root: str) -> dict[str, bytes]:
    """relative path -> content of every source file under ROOT's trees, by path."""
    found: dict[str, bytes] = {}
    for tree in TREES:
        for folder, dirs, files in os.walk(os.path.join(root, tree)):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(folder, name)
                if not os.path.isfile(path):
                    continue
                with open(path, "rb") as f:
                    found[os.path.relpath(path, root)] = f.read()
    return dict(sorted(found.items()))


def content_key(files: dict[str, bytes]) -> str:
    h = hashlib.sha256(b"udf-pinned-sources 1\0")
    for rel, data in files.items():
        h.update(rel.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()[:24]


def holds(folder: str, files: dict[str, bytes]) -> bool:
    """Whether `folder` holds exactly `files` (no file more, none other)."""
    try:
        return sources(folder) == files
    except OSError:
        return False


def private_dir(path: str) -> str | None:
    """Makes `path` (mode 0700) if it is missing; None if it is ours and no one else's, else why not."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        return str(e)
    if not stat.S_ISDIR(st.st_mode):
        return "not a folder"
    if st.st_uid != os.geteuid():
        return "owned by another user"
    if st.st_mode & 0o022:
        return "writable by others"
    return None


def remove_stale(stage_root: str) -> None:
    """Removes the temporary copies of killed builds and the copies of sources no build used for a day
    (each use touches its copy)."""
    now = time.time()
    for name in os.listdir(stage_root):
        path = os.path.join(stage_root, name)
        limit = STALE_TMP_S if name.startswith(".tmp-") else UNUSED_COPY_S
        try:
            if now - os.lstat(path).st_mtime > limit:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def touch(folder: str) -> str:
    try:
        os.utime(folder)
    except OSError:
        pass
    return folder


def stage(stage_root: str, files: dict[str, bytes]) -> str:
    """DIR/<key> holding `files`, made if missing or not what it should be."""
    final = os.path.join(stage_root, content_key(files))
    if holds(final, files):
        return touch(final)
    remove_stale(stage_root)
    tmp = tempfile.mkdtemp(dir=stage_root, prefix=".tmp-")
    try:
        for rel, data in files.items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        if holds(final, files):  # another build's copy, made meanwhile
            return touch(final)
        if os.path.isdir(final):  # damaged: moved aside, then removed
            aside = tempfile.mkdtemp(dir=stage_root, prefix=".tmp-")
            try:
                os.replace(final, os.path.join(aside, "old"))
            except OSError:
                pass
            shutil.rmtree(aside, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            if not holds(final, files):  # another build's copy, made meanwhile, must be whole
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def rewrite_depfile(path: str, cwd: str, copy: str | None, root: str) -> None:
    """The depfile at `path` with its prerequisites absolute and those in `copy` moved to `root`."""
    import nvcc_cache  # one place reads and writes depfiles (cmake/nvcc_cache.py)
    target, read = nvcc_cache.read_depfile(path)
    deps = []
    for d in read:
        p = os.path.normpath(os.path.join(cwd, d))
        if copy is not None and (p == copy or p.startswith(copy + os.sep)):
            p = os.path.join(root, os.path.relpath(p, copy))
        deps.append(p)
    nvcc_cache.write_depfile(path, target, deps)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source-root", required=True)
    ap.add_argument("--stage-root", default="")
    ap.add_argument("--subdir", default="kernels")
    ap.add_argument("--depfile", default="")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command after '--'")
    root = os.path.abspath(a.source_root)
    cwd = os.path.join(root, a.subdir)
    copy = None
    if a.stage_root:
        stage_root = os.path.abspath(a.stage_root)
        why = private_dir(stage_root)
        if why is None:
            try:
                copy = stage(stage_root, sources(root))
                cwd = os.path.join(copy, a.subdir)
            except OSError as e:
                why = str(e)
        if why is not None:
            print(f"pinned_sources.py: warning: {stage_root}: {why}; compiling in {cwd} "
                  f"(the output then holds that folder's path)", file=sys.stderr)
    env = dict(os.environ, PWD=cwd)
    rc = subprocess.run(cmd, cwd=cwd, env=env).returncode
    if rc == 0 and a.depfile:
        rewrite_depfile(os.path.abspath(a.depfile), cwd, copy, root)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Atomic file writes (a temp file in the destination's folder, fsync, os.replace)."""
from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Writes `data` to `path` all or nothing: readers see the old file or the new one, never a
    part; on failure the temp file is removed and an existing `path` is left untouched.  The new
    file gets the usual permissions (0666 minus the umask).  Returns the path."""
    path = Path(os.fspath(path))
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path

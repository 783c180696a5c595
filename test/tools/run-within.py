#!/usr/bin/env python3
"""Runs a command, prints its exit status and whether it ended in time.

    run-within.py SECONDS COMMAND [ARGS...]

Like exit-status.py (%exit): the command inherits standard input, output and
error, and `exit=N` (`exit=signal:NAME`) is printed when it ends; then
`within SECONDS s` if it took no longer than SECONDS of wall-clock time, or
`took T s, more than SECONDS s`.  A command still running after
max(3 x SECONDS, SECONDS + 30) is killed (`exit=killed`), so a test of a
limit that fails does not hang.  run-within.py itself exits 0.

    RUN: %python %test-tools/run-within.py 20 %udfc-raw slow.cu --compile-timeout 1 ... 2>&1 | FileCheck %s
    CHECK: exit=1
    CHECK: within 20 s
"""
import signal
import subprocess
import sys
import time


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("run-within: error: usage: run-within.py SECONDS COMMAND [ARGS...]\n")
        return 2
    limit = float(argv[0])
    sys.stdout.flush()
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv[1:])
    except OSError as e:
        sys.stderr.write("run-within: error: cannot run '%s': %s\n" % (argv[1], e))
        return 2
    try:
        rc = proc.wait(timeout=max(3 * limit, limit + 30))
        status = "exit=%d" % rc if rc >= 0 else "exit=signal:%s" % signal.Signals(-rc).name
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        status = "exit=killed"
    took = time.monotonic() - start
    sys.stdout.write(status + "\n")
    if took <= limit:
        sys.stdout.write("within %g s\n" % limit)
    else:
        sys.stdout.write("took %.1f s, more than %g s\n" % (took, limit))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Runs a command and then prints its exit status.

    exit-status.py COMMAND [ARGS...]

The command inherits standard input, output and error; when it has finished,
`exit=N` is printed on standard output (`exit=signal:NAME` if a signal killed
it) and exit-status.py itself exits 0.  This is the lit substitution %exit:
lit's internal shell has no `$?`, and `not` cannot tell 1 from 2 from 3.

    RUN: %exit %udfc --bogus 2>&1 | FileCheck %s
    CHECK: exit=2
"""
import signal
import subprocess
import sys


def main(argv):
    if not argv:
        sys.stderr.write("exit-status: error: usage: exit-status.py COMMAND [ARGS...]\n")
        return 2
    sys.stdout.flush()
    try:
        rc = subprocess.call(argv)
    except OSError as e:
        sys.stderr.write("exit-status: error: cannot run '%s': %s\n" % (argv[0], e))
        return 2
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = str(-rc)
        sys.stdout.write("exit=signal:%s\n" % name)
    else:
        sys.stdout.write("exit=%d\n" % rc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

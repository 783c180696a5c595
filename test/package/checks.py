"""What the package tests (consumer_test.py, package_test.py, wheel_test.py) share:
check() records a named check, run() runs a command, summary() prints the outcome and
gives the exit status."""
import subprocess

FAILURES = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILURES.append(what)
    return cond


def run(cmd, cwd=None, env=None, ok=True):
    """The finished process (output and errors together in .stdout); with ok, a failure ends the test."""
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if ok and r.returncode != 0:
        print(r.stdout)
        raise SystemExit("command failed (%d): %s" % (r.returncode, " ".join(map(str, cmd))))
    return r


def summary():
    """Prints the failed checks (or that all passed); returns the exit status."""
    if FAILURES:
        print("%d check(s) failed:" % len(FAILURES))
        for f in FAILURES:
            print("  " + f)
        return 1
    print("all checks passed")
    return 0

#!/usr/bin/env python3
"""Cache faults: udfc and udf-link on one shared cache while processes are
killed, the file system fills up, or the cache cannot be written.

    cache_fault_test.py --bin DIR --source SRC --work DIR [--rounds N] [--procs N] [--seed S]

1. Reference outputs: every job run once with --no-cache (udfc compiles of
   several examples, flags, archs and front ends; udf-link links of those
   artifacts; jobs that share a cache key but differ in path or depfile).
2. Kill rounds: each round starts --procs tool runs at once on ONE cache
   folder (a fresh cache, the warm one, or a small-bound cache that evicts all
   the time) and SIGKILLs a random third of them at a moment drawn uniformly
   within the run time measured for that kind of round.  Then:
   - every process not killed exited 0, printed no new warning, and its
     outputs are byte-identical to the references;
   - every killed process's outputs are missing or byte-identical;
   - no temporary file is left, in the cache or beside the outputs, except by
     a process that was killed (the cache removes such files once stale, which
     step 3 checks; outputs are staged unnamed, so a kill leaves one only
     between link and rename);
   - the killed jobs run again onto the same outputs: byte-identical, and the
     writers remove dead processes' temps beside their outputs: none is left;
   - every cache entry is well formed (header, length, key, SHA-256);
   - each job run again with the cache exits 0 with byte-identical outputs
     and finds no corrupt entry.
3. After the rounds: leftover cache temp files, once older than
   Cache::kStaleTempSeconds, are removed by the next eviction pass (a recent
   one is kept); corrupt entries (flipped byte, truncated, garbage) are
   detected (-v says "rebuilding corrupt cache entry") and rebuilt.
4. Full file system (tmpfs of 1 MiB, nearly filled): as the cache folder,
   every run succeeds with byte-identical outputs and a "cache write failed"
   warning, leaving no partial entry; as the output folder, every run either
   succeeds with byte-identical outputs or exits 1 naming the output and
   "No space left on device", leaving no temp file and existing good
   outputs untouched.
5. Read-only cache (read-only bind mount of a warm cache, an empty read-only
   tmpfs, and a chmod a-w cache used by an unprivileged user through
   setpriv): runs succeed with byte-identical outputs, misses warn, nothing
   in the cache changes.

Parts 4 and 5 need root (mount, setpriv); without it they are reported as
skipped with the reason.  The kill rounds always run.  Prints one line per
check and "N passed, N failed"; exits 1 when a check failed.
"""
import argparse
import contextlib
import hashlib
import os
import random
import re
import shutil
import stat
import struct
import subprocess
import sys
import time

PASSED = []
FAILED = []
SKIPPED = []

# How the tools name their temporary files: lib/support/cache.cpp (puts and
# the size/journal files) and lib/support/fs.cpp (outputs: `.NAME.tmp.PID.XXXXXX`,
# named only between link and rename, see OutputFiles).
CACHE_TEMP_RE = re.compile(r"^\.tmp\.(?:[0-9a-f]{64}|journal|size)\.(\d+)\.[0-9a-f]{16}$")
OUT_TEMP_RE = re.compile(r"^\.(.+)\.tmp\.(\d+)\.[A-Za-z0-9]{6}$")
KEY_RE = re.compile(r"^[0-9a-f]{64}$")
SHARD_RE = re.compile(r"^[0-9a-f]{2}$")
CACHE_HEADER = 88
STALE_TEMP_SECONDS = 3600  # Cache::kStaleTempSeconds
RUN_TIMEOUT = 300  # seconds for one batch of processes: anything longer is a hang


def check(cond, what, details=()):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        for d in list(details)[:12]:
            print("        " + d, flush=True)
        FAILED.append(what)
    else:
        PASSED.append(what)
    return cond


def skip(what, why):
    print("skip  %s: %s" % (what, why), flush=True)
    SKIPPED.append(what)


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


class Job:
    """One distinct tool invocation; `out` is chosen per run."""

    def __init__(self, name, tool, args, ext, depfile=False):
        self.name, self.tool, self.args, self.ext, self.depfile = name, tool, args, ext, depfile

    def argv(self, bindir, out, no_cache=False, verbose=False):
        cmd = [os.path.join(bindir, self.tool)] + self.args + ["-o", out]
        if self.depfile:
            cmd += ["-MD", "-MT", "target"]  # a fixed target: the depfile does not depend on `out`
        if no_cache:
            cmd.append("--no-cache")
        if verbose:
            cmd.append("-v")
        return cmd

    def outputs(self, out):
        return [out, out + ".d"] if self.depfile else [out]


class NotStarted:
    """A Popen stand-in for a command that could not be started (exit 127)."""
    pid = -1
    returncode = 127

    def poll(self):
        return self.returncode

    def wait(self):
        return self.returncode

    def kill(self):
        pass


class Proc:
    def __init__(self, job, out, popen, errpath, start):
        self.job, self.out, self.popen, self.errpath, self.start = job, out, popen, errpath, start
        self.end = None
        self.kill_at = None

    @property
    def rc(self):
        return self.popen.returncode

    def stderr(self):
        return (read(self.errpath) or b"").decode(errors="replace")


class Tester:
    def __init__(self, a):
        self.bin = os.path.abspath(a.bin)
        self.src = os.path.abspath(a.source)
        self.work = os.path.abspath(a.work)
        self.rng = random.Random(a.seed)
        self.procs = a.procs
        self.rounds = a.rounds
        self.ncpu = os.cpu_count() or 1
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("UDF_")}
        self.env.pop("XDG_CACHE_HOME", None)
        self.env["LC_ALL"] = "C"
        self.ref = {}  # job name -> list of bytes, one per output
        self.ref_err = {}  # job name -> reference stderr
        self.ref_time = {}  # job name -> seconds
        self.seq = 0

    # ---- running ---------------------------------------------------------

    def envfor(self, cache, max_bytes=None):
        e = dict(self.env)
        e["UDF_CACHE_DIR"] = cache
        if max_bytes:
            e["UDF_CACHE_MAX_BYTES"] = str(max_bytes)
        return e

    def spawn(self, job, out, env, logdir, no_cache=False, verbose=False, prefix=()):
        self.seq += 1
        errpath = os.path.join(logdir, "%05d.%s.err" % (self.seq, job.name))
        with open(errpath, "wb") as err:
            try:
                p = subprocess.Popen(list(prefix) + job.argv(self.bin, out, no_cache, verbose), env=env,
                                     stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=self.work)
            except OSError as e:
                err.write(("cannot start %s: %s\n" % (job.tool, e)).encode())
                p = NotStarted()
        return Proc(job, out, p, errpath, time.monotonic())

    def run_procs(self, plan, env, logdir, no_cache=False, verbose=False, prefix=(), kill_after=None):
        """Runs every (job, out) of plan at once (started one after the other
        as fast as they go) and waits for them; the procs whose index is in
        kill_after get SIGKILL that many seconds after their own start, unless
        they have exited by then.  Returns (procs, the procs that hung)."""
        os.makedirs(logdir, exist_ok=True)
        kill_after = kill_after or {}
        procs, alive, pending, hung = [], [], [], []
        t0 = time.monotonic()
        while len(procs) < len(plan) or alive:
            if len(procs) < len(plan):
                j, out = plan[len(procs)]
                p = self.spawn(j, out, env, logdir, no_cache, verbose, prefix)
                if len(procs) in kill_after:
                    p.kill_at = kill_after[len(procs)]
                    pending.append(p)
                procs.append(p)
                alive.append(p)
            now = time.monotonic()
            for v in [v for v in pending if now >= v.start + v.kill_at]:
                pending.remove(v)
                if v.popen.poll() is None:  # not reaped: the pid is still this process
                    v.popen.kill()
            still = []
            for p in alive:
                if p.popen.poll() is not None:
                    p.end = now
                elif now - t0 > RUN_TIMEOUT:
                    p.popen.kill()
                    p.popen.wait()
                    hung.append(p)
                else:
                    still.append(p)
            alive = still
            if alive and len(procs) == len(plan):
                time.sleep(0.002)
        return procs, hung

    # ---- jobs and references --------------------------------------------

    def make_jobs(self):
        ex = os.path.join(self.src, "examples")
        srcdir = os.path.join(self.work, "src")
        os.makedirs(srcdir)
        # The same text under another folder: same cache key, same artifact.
        shutil.copy(os.path.join(ex, "l2.cu"), os.path.join(srcdir, "l2.cu"))
        ff = "--flags-from-first-line"
        self.udfc_jobs = [
            Job("l2", "udfc", [os.path.join(ex, "l2.cu"), "--arch", "sm_90"], "udfa"),
            Job("l2_copy", "udfc", [os.path.join(srcdir, "l2.cu"), "--arch", "sm_90"], "udfa"),
            Job("l2_dep", "udfc", [os.path.join(ex, "l2.cu"), "--arch", "sm_90"], "udfa", depfile=True),
            Job("weighted_l2", "udfc", [os.path.join(ex, "weighted_l2.cu"), ff, "--arch", "sm_80,sm_90"], "udfa"),
            Job("inner_product", "udfc", [os.path.join(ex, "inner_product.cu"), ff, "--arch", "sm_90"], "udfa"),
            Job("int8_l2", "udfc", [os.path.join(ex, "int8_l2.cu"), ff, "--arch", "sm_75,sm_120"], "udfa"),
            Job("l2_sqrt", "udfc", [os.path.join(ex, "l2_sqrt.cu"), ff, "--arch", "sm_100"], "udfa"),
            Job("linf_ll", "udfc", [os.path.join(ex, "linf.ll"), ff, "--arch", "sm_90"], "udfa"),
            Job("linf_mlir", "udfc", [os.path.join(ex, "linf.mlir"), ff, "--arch", "sm_86"], "udfa"),
        ]
        refdir = os.path.join(self.work, "ref")
        l2a = os.path.join(refdir, "l2.udfa")
        ipa = os.path.join(refdir, "inner_product.udfa")
        # link_l2 and link_l2_dep share a cache key; a link costs about a
        # second of CPU per arch when cold, so there are only two keys.
        self.link_jobs = [
            Job("link_l2", "udf-link", [l2a, "--arch", "sm_90"], "udfm"),
            Job("link_l2_dep", "udf-link", [l2a, "--arch", "sm_90"], "udfm", depfile=True),
            Job("link_ip", "udf-link", [ipa, "--arch", "sm_90", "--emit", "fatbin"], "fatbin"),
        ]
        self.jobs = {j.name: j for j in self.udfc_jobs + self.link_jobs}

    def variant(self, name, define):
        """A udfc job with a cache key of its own (an extra -D)."""
        base = self.jobs["l2"]
        j = Job(name, "udfc", base.args + ["-D" + define], "udfa")
        self.jobs[name] = j
        return j

    def make_references(self, jobs):
        refdir = os.path.join(self.work, "ref")
        os.makedirs(refdir, exist_ok=True)
        env = self.envfor(os.path.join(self.work, "no-cache-here"))
        todo = [j for j in jobs if j.name not in self.ref]
        ok = True
        # ncpu at a time: the timings are the uncontended run times.
        for i in range(0, len(todo), self.ncpu):
            batch = [(j, os.path.join(refdir, j.name + "." + j.ext)) for j in todo[i:i + self.ncpu]]
            procs, hung = self.run_procs(batch, env, os.path.join(refdir, "logs"), no_cache=True)
            for p in procs:
                if p.rc != 0 or p in hung:
                    ok = False
                    print("reference run of %s failed (%s):\n%s" % (p.job.name, p.rc, p.stderr()))
                    continue
                self.ref[p.job.name] = [read(o) for o in p.job.outputs(p.out)]
                self.ref_err[p.job.name] = p.stderr()
                self.ref_time[p.job.name] = p.end - p.start
            if os.path.exists(os.path.join(self.work, "no-cache-here")):
                ok = False
                print("--no-cache created the cache folder")
        return ok

    # ---- what is on disk ---------------------------------------------------

    def matches_ref(self, job, out):
        """None if every output is byte-identical to the reference, else why not."""
        for path, want in zip(job.outputs(out), self.ref[job.name]):
            got = read(path)
            if got is None:
                return "%s missing" % os.path.basename(path)
            if got != want:
                return "%s differs from the reference (%d bytes, want %d)" % (os.path.basename(path), len(got), len(want))
        return None

    def absent_or_ref(self, job, out):
        for path, want in zip(job.outputs(out), self.ref[job.name]):
            got = read(path)
            if got is not None and got != want:
                return "%s exists and differs from the reference (%d bytes, want %d)" % (
                    os.path.basename(path), len(got), len(want))
        return None

    @staticmethod
    def cache_temps(cache):
        """{path: pid} of every cache temp file."""
        out = {}
        for dirpath, _, files in os.walk(cache):
            for f in files:
                m = CACHE_TEMP_RE.match(f)
                if m:
                    out[os.path.join(dirpath, f)] = int(m.group(1))
        return out

    @staticmethod
    def out_temps(folder):
        """{path: the output it is a temp of} of every output temp file."""
        out = {}
        for dirpath, _, files in os.walk(folder):
            for f in files:
                m = OUT_TEMP_RE.match(f)
                if m:
                    out[os.path.join(dirpath, f)] = os.path.join(dirpath, m.group(1))
        return out

    @staticmethod
    def validate_cache(cache):
        """(number of entries, problems): every entry is a regular file with a
        good header, the right key, length and SHA-256; nothing unknown."""
        v1 = os.path.join(cache, "v1")
        problems = []
        n = 0
        if not os.path.isdir(v1):
            return 0, []
        for name in sorted(os.listdir(v1)):
            p = os.path.join(v1, name)
            if name in ("lock", "size", "journal") or CACHE_TEMP_RE.match(name):
                continue
            if not (SHARD_RE.match(name) and os.path.isdir(p)):
                problems.append("unexpected %s" % p)
                continue
            for e in sorted(os.listdir(p)):
                ep = os.path.join(p, e)
                if CACHE_TEMP_RE.match(e):
                    continue
                if not KEY_RE.match(e) or e[:2] != name:
                    problems.append("unexpected %s" % ep)
                    continue
                st = os.lstat(ep)
                if not stat.S_ISREG(st.st_mode):
                    problems.append("%s: not a regular file" % ep)
                    continue
                data = read(ep)
                n += 1
                if len(data) < CACHE_HEADER:
                    problems.append("%s: truncated (%d bytes)" % (ep, len(data)))
                    continue
                magic, version, flags, length = struct.unpack_from("<8sIIQ", data, 0)
                why = None
                if magic != b"UDFCACHE" or version != 1 or flags != 0:
                    why = "bad header"
                elif length != len(data) - CACHE_HEADER:
                    why = "length %d, file holds %d" % (length, len(data) - CACHE_HEADER)
                elif data[24:56] != bytes.fromhex(e):
                    why = "another key's entry"
                elif data[56:88] != hashlib.sha256(data[CACHE_HEADER:]).digest():
                    why = "checksum mismatch"
                if why:
                    problems.append("%s: %s" % (ep, why))
        return n, problems

    @staticmethod
    def snapshot(folder):
        """Every path under folder with its type, size, mtime and content hash."""
        snap = {}
        for dirpath, dirs, files in os.walk(folder):
            for n in dirs + files:
                p = os.path.join(dirpath, n)
                st = os.lstat(p)
                digest = hashlib.sha256(read(p)).hexdigest() if stat.S_ISREG(st.st_mode) else None
                snap[os.path.relpath(p, folder)] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, digest)
        return snap

    def new_warnings(self, p):
        """Warning or error lines of p that its reference run did not print."""
        ref = set(self.ref_err.get(p.job.name, "").splitlines())
        return [l for l in p.stderr().splitlines() if ("warning" in l or "error" in l) and l not in ref]

    # ---- 2. kill rounds ----------------------------------------------------

    def kill_rounds(self):
        caches = {"main": os.path.join(self.work, "cache"), "evict": os.path.join(self.work, "cache-evict")}
        # Seconds a run takes in a round of each kind, for drawing kill moments:
        # first a guess from the uncontended reference times, then measured.
        guess = max(1.0, self.procs / self.ncpu)
        udfc_t = sum(self.ref_time[j.name] for j in self.udfc_jobs) / len(self.udfc_jobs)
        link_t = max(self.ref_time[j.name] for j in self.link_jobs)
        est = {("fresh", "udfc"): udfc_t * guess, ("fresh", "udf-link"): link_t * 2,
               ("warm", "udfc"): 0.05 * guess, ("warm", "udf-link"): 0.05 * guess,
               ("evict", "udfc"): udfc_t * guess}
        for r in range(self.rounds):
            # Fresh cache every fifth round (the first included), an evicting
            # small-bound cache every fifth round, the warm cache otherwise.
            kind = "fresh" if r % 5 == 0 else "evict" if r % 5 == 3 else "warm"
            if kind == "evict" and r < 5:
                shutil.rmtree(caches["evict"], ignore_errors=True)
            cache = caches["evict" if kind == "evict" else "main"]
            if kind == "fresh":
                shutil.rmtree(cache, ignore_errors=True)
            max_bytes = 24 * 1024 if kind == "evict" else None
            self.one_round(r, kind, cache, max_bytes, est)
        return caches

    def one_round(self, r, kind, cache, max_bytes, est):
        label = "round %02d (%s cache%s)" % (r, kind, ", bound %d bytes" % max_bytes if max_bytes else "")
        rdir = os.path.join(self.work, "rounds", "%02d" % r)
        outdir = os.path.join(rdir, "out")
        os.makedirs(outdir)
        env = self.envfor(cache, max_bytes)

        # The jobs: every link job once (not in evict rounds: their 190 KB
        # entries would not fit), udfc jobs for the rest, shuffled.
        jobs = [] if kind == "evict" else list(self.link_jobs)
        while len(jobs) < self.procs:
            jobs.append(self.udfc_jobs[len(jobs) % len(self.udfc_jobs)])
        jobs = jobs[:self.procs]
        self.rng.shuffle(jobs)
        # Two runs of a job share an output file (concurrent renames onto it).
        seen = {}
        plan = []
        for j in jobs:
            k = seen.get(j.name, 0)
            seen[j.name] = k + 1
            plan.append((j, os.path.join(outdir, "%s.%d.%s" % (j.name, k // 2, j.ext))))
        # Odd rounds rebuild over good existing outputs.
        if r % 2:
            for j, out in plan:
                for path, want in zip(j.outputs(out), self.ref[j.name]):
                    with open(path, "wb") as f:
                        f.write(want)
        temps_before = self.cache_temps(cache)

        # A random third gets SIGKILL at a moment drawn uniformly within the
        # run time measured for its tool in this kind of round.
        kill_after = {i: self.rng.uniform(0, est[(kind, plan[i][0].tool)])
                      for i in self.rng.sample(range(len(plan)), len(plan) // 3)}
        procs, hung = self.run_procs(plan, env, os.path.join(rdir, "logs"), kill_after=kill_after)
        victims = [procs[i] for i in kill_after]
        for p in hung:
            check(False, "%s: %s %s finished (hung; killed after %d s)" % (label, p.job.tool, p.job.name, RUN_TIMEOUT))

        killed = [p for p in victims if p.rc == -9 and p not in hung]
        survivors = [p for p in procs if p not in killed and p not in hung]
        # Measured run times (the upper quartile) for the next round of this kind.
        for tool in ("udfc", "udf-link"):
            times = sorted(p.end - p.start for p in survivors if p.job.tool == tool and p not in victims)
            if times:
                est[(kind, tool)] = times[len(times) * 3 // 4]

        bad = []
        for p in survivors:
            why = None
            if p.rc != 0:
                why = "exit %s" % p.rc
            else:
                why = self.matches_ref(p.job, p.out)
                if not why and self.new_warnings(p):
                    why = "printed %s" % self.new_warnings(p)[0]
            if why:
                bad.append("%s -> %s: %s: %s" % (p.job.name, os.path.basename(p.out), why, p.stderr().strip()[:300]))
        check(not bad, "%s: %d runs not killed exit 0 with byte-identical outputs [%.1f s]" %
              (label, len(survivors), max(p.end for p in procs if p.end) - min(p.start for p in procs)), bad)

        bad = []
        for p in killed:
            why = self.absent_or_ref(p.job, p.out)
            if why:
                bad.append("%s (killed at %.3f s): %s" % (p.job.name, p.kill_at, why))
        check(not bad, "%s: %d killed runs (of %d sent SIGKILL) left their outputs missing or byte-identical" %
              (label, len(killed), len(victims)), bad)

        # Temp files: only killed processes may leave any.
        killed_pids = {p.popen.pid for p in killed}
        new_temps = {t: pid for t, pid in self.cache_temps(cache).items() if t not in temps_before}
        stray = [t for t, pid in new_temps.items() if pid not in killed_pids]
        check(not stray, "%s: no cache temp file left by a run not killed (%d left by killed runs)" %
              (label, len(new_temps) - len(stray)), stray)
        killed_outs = {o for p in killed for o in p.job.outputs(p.out)}
        otemps = self.out_temps(outdir)
        stray = [t for t, target in otemps.items() if target not in killed_outs]
        check(not stray, "%s: no output temp file left by a run not killed (%d left by killed runs)" %
              (label, len(otemps) - len(stray)), stray)
        # Outputs are staged unnamed (O_TMPFILE): a kill leaves a named temp only
        # between link and rename.  The killed jobs run again onto the same
        # outputs: each writer removes dead processes' temps beside its output,
        # so afterwards no temporary file is left at all.
        again = [(p.job, p.out) for p in killed]
        procs2, hung2 = self.run_procs(again, env, os.path.join(rdir, "logs-rerun"))
        bad = ["%s: %s" % (p.job.name, "hung" if p in hung2 else "exit %s" % p.rc if p.rc else self.matches_ref(p.job, p.out))
               for p in procs2 if p in hung2 or p.rc or self.matches_ref(p.job, p.out)]
        left = sorted(self.out_temps(outdir))
        check(not bad and not left, "%s: the %d killed jobs run again: byte-identical outputs, %d killed-run temp "
              "file(s) swept, no temporary file left" % (label, len(again), len(otemps)), bad + left)

        n, problems = self.validate_cache(cache)
        check(not problems, "%s: all %d cache entries well formed" % (label, n), problems)

        self.follow_up(label, sorted({j.name for j in jobs}), cache, max_bytes, rdir)
        shutil.rmtree(outdir)

    def follow_up(self, label, names, cache, max_bytes, rdir):
        """Each job once more with the cache: a hit or a rebuild, byte-identical."""
        outdir = os.path.join(rdir, "again")
        os.makedirs(outdir)
        plan = [(self.jobs[n], os.path.join(outdir, n + "." + self.jobs[n].ext)) for n in names]
        procs, hung = self.run_procs(plan, self.envfor(cache, max_bytes), os.path.join(rdir, "logs-again"), verbose=True)
        bad = []
        hits = 0
        for p in procs:
            err = p.stderr()
            hits += "cache hit" in err
            why = "hung" if p in hung else "exit %s" % p.rc if p.rc != 0 else self.matches_ref(p.job, p.out)
            if not why and "corrupt" in err:
                why = "found a corrupt entry: " + [l for l in err.splitlines() if "corrupt" in l][0]
            if why:
                bad.append("%s: %s" % (p.job.name, why))
        check(not bad, "%s: rerun with the cache: %d jobs byte-identical (%d hits), no corrupt entry" %
              (label, len(procs), hits), bad)
        shutil.rmtree(outdir)

    # ---- 3. stale temps and corrupt entries ----------------------------------

    def warm(self, cache, jobs):
        """Runs jobs with the cache, so that it holds their entries."""
        outdir = os.path.join(self.work, "warming")
        os.makedirs(outdir)
        plan = [(j, os.path.join(outdir, j.name + "." + j.ext)) for j in jobs]
        self.run_procs(plan, self.envfor(cache), os.path.join(self.work, "logs-warming"))
        shutil.rmtree(outdir)

    def stale_temps(self, cache):
        label = "stale temps"
        v1 = os.path.join(cache, "v1")
        os.makedirs(os.path.join(v1, "00"), exist_ok=True)
        # One made-up stale leftover, and one recent (a put in progress).
        fake_old = os.path.join(v1, "00", ".tmp.%s.%d.%s" % ("0" * 64, 99999, "0123456789abcdef"))
        fake_new = os.path.join(v1, "00", ".tmp.%s.%d.%s" % ("0" * 64, 99998, "fedcba9876543210"))
        for f in (fake_old, fake_new):
            with open(f, "wb") as fh:
                fh.write(b"partial")
        old = time.time() - STALE_TEMP_SECONDS - 600
        temps = self.cache_temps(cache)
        for t in temps:
            if t != fake_new:
                os.utime(t, (old, old))
        # A missing size file makes the next put run an eviction pass.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(v1, "size"))
        job = self.variant("l2_stale", "UDF_FAULT_STALE=1")
        if not self.make_references([job]):
            check(False, "%s: reference run" % label)
            return
        out = os.path.join(self.work, "stale.udfa")
        procs, hung = self.run_procs([(job, out)], self.envfor(cache), os.path.join(self.work, "logs-stale"))
        p = procs[0]
        check(not hung and p.rc == 0 and not self.matches_ref(job, out),
              "%s: a cache miss with a pass due exits 0, byte-identical" % label, [p.stderr()])
        left = set(self.cache_temps(cache))
        check(left == {fake_new}, "%s: the eviction pass removed the %d stale temp files and kept the recent one" %
              (label, len(temps) - 1), sorted(left ^ {fake_new}))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(fake_new)

    def corrupt_entries(self, cache):
        label = "corrupt entries"
        v1 = os.path.join(cache, "v1")

        def key_of(name):
            data = self.ref[name][0]
            m = re.search(rb'"cache_key":\s*"([0-9a-f]{64})"', data)
            return m.group(1).decode() if m else None

        damage = {
            "l2": lambda d: d[:-1] + bytes([d[-1] ^ 1]),
            "weighted_l2": lambda d: d[:len(d) // 2],
            "inner_product": lambda d: b"garbage" * 20,
        }
        names = list(damage)
        self.warm(cache, [self.jobs[n] for n in names])
        for n in names:
            k = key_of(n)
            path = os.path.join(v1, k[:2], k) if k else None
            if not path or not os.path.exists(path):
                check(False, "%s: %s has a cache entry to damage" % (label, n), [str(path)])
                return
            data = read(path)
            with open(path, "wb") as f:
                f.write(damage[n](data))
        outdir = os.path.join(self.work, "corrupt")
        os.makedirs(outdir)
        plan = [(self.jobs[n], os.path.join(outdir, n + ".udfa")) for n in names]
        procs, hung = self.run_procs(plan, self.envfor(cache), os.path.join(outdir, "logs"), verbose=True)
        bad = []
        for p in procs:
            err = p.stderr()
            why = "hung" if p in hung else "exit %s" % p.rc if p.rc != 0 else self.matches_ref(p.job, p.out)
            if not why and "rebuilding corrupt cache entry" not in err:
                why = "did not report the corrupt entry: " + err.strip()[:300]
            if why:
                bad.append("%s: %s" % (p.job.name, why))
        check(not bad, "%s: a flipped byte, a truncated entry and garbage are reported (-v) and rebuilt, "
              "byte-identical" % label, bad)
        n, problems = self.validate_cache(cache)
        procs, hung = self.run_procs(plan, self.envfor(cache), os.path.join(outdir, "logs2"), verbose=True)
        bad = problems + ["%s: no cache hit" % p.job.name for p in procs if p.rc != 0 or "cache hit" not in p.stderr()]
        check(not bad, "%s: the rebuilt entries are well formed and hit next time" % label, bad)

    # ---- 4. full file system --------------------------------------------------

    @contextlib.contextmanager
    def tmpfs(self, path, size, extra=""):
        os.makedirs(path, exist_ok=True)
        mount("-t", "tmpfs", "-o", "size=%s,mode=0755%s" % (size, extra), "tmpfs", path)
        try:
            yield path
        finally:
            unmount(path)

    @staticmethod
    def fill(folder, leave):
        """Writes a filler file so that about `leave` bytes stay free."""
        st = os.statvfs(folder)
        free = st.f_bavail * st.f_frsize
        with open(os.path.join(folder, "filler"), "wb") as f:
            n = max(0, free - leave)
            while n > 0:
                c = min(n, 1 << 16)
                try:
                    f.write(b"\0" * c)
                    f.flush()
                except OSError:
                    break
                n -= c

    def full_cache(self):
        label = "full cache fs"
        mnt = os.path.join(self.work, "mnt-full-cache")
        with self.tmpfs(mnt, "1m"):
            cache = os.path.join(mnt, "cache")
            # Fill up so that a few udfc entries fit, and no link entry.
            self.fill(mnt, 48 * 1024)
            many = [self.variant("l2_full%d" % i, "UDF_FAULT_FULL=%d" % i) for i in range(20)]
            if not self.make_references(many):
                check(False, "%s: reference runs" % label)
                return
            jobs = many + [self.jobs["link_l2"], self.jobs["weighted_l2"], self.jobs["int8_l2"]]
            outdir = os.path.join(self.work, "full-cache-out")
            for attempt in (1, 2):
                os.makedirs(outdir)
                plan = [(j, os.path.join(outdir, j.name + "." + j.ext)) for j in jobs]
                # A fresh (cold) link: its 190 KB entry fails part-way.
                procs, hung = self.run_procs(plan, self.envfor(cache), os.path.join(self.work, "logs-full-cache"))
                bad = []
                warned = []
                for p in procs:
                    err = p.stderr()
                    why = "hung" if p in hung else "exit %s" % p.rc if p.rc != 0 else self.matches_ref(p.job, p.out)
                    if why:
                        bad.append("%s: %s: %s" % (p.job.name, why, err.strip()[:300]))
                    warned += [l for l in err.splitlines() if "warning" in l]
                check(not bad, "%s (run %d): %d runs exit 0 with byte-identical outputs" % (label, attempt, len(procs)),
                      bad)
                nospace = [l for l in warned if "cache write failed" in l and "No space left on device" in l]
                other = [l for l in warned if l not in nospace]
                check(nospace and not other, "%s (run %d): the full cache is a warning (%d x 'cache write failed: ... "
                      "No space left on device'), nothing else" % (label, attempt, len(nospace)), other or ["no warning"])
                temps = list(self.cache_temps(cache)) + list(self.out_temps(outdir))
                check(not temps, "%s (run %d): no temp file left" % (label, attempt), temps)
                n, problems = self.validate_cache(cache)
                check(not problems, "%s (run %d): all %d cache entries well formed" % (label, attempt, n), problems)
                shutil.rmtree(outdir)

    def full_output(self, cache):
        label = "full output fs"
        mnt = os.path.join(self.work, "mnt-full-out")
        with self.tmpfs(mnt, "1m"):
            # Good outputs already in place, which a failed run must leave alone.
            kept = [self.jobs["link_l2"], self.jobs["l2_dep"], self.jobs["weighted_l2"]]
            for j in kept:
                for path, want in zip(j.outputs(os.path.join(mnt, j.name + "." + j.ext)), self.ref[j.name]):
                    with open(path, "wb") as f:
                        f.write(want)
            self.fill(mnt, 24 * 1024)
            jobs = kept + [self.jobs[n] for n in ("l2", "inner_product", "int8_l2", "l2_sqrt", "linf_ll",
                                                    "link_ip")]
            jobs += [self.jobs["l2_full%d" % i] for i in range(8)] if "l2_full0" in self.jobs else []
            plan = [(j, os.path.join(mnt, j.name + "." + j.ext)) for j in jobs]
            procs, hung = self.run_procs(plan, self.envfor(cache), os.path.join(self.work, "logs-full-out"))
            bad = []
            failed = 0
            for p in procs:
                err = p.stderr()
                if p in hung:
                    bad.append("%s: hung" % p.job.name)
                elif p.rc == 0:
                    why = self.matches_ref(p.job, p.out)
                    if why:
                        bad.append("%s: exit 0 but %s" % (p.job.name, why))
                elif p.rc == 1:
                    failed += 1
                    first = err.strip().splitlines()[0] if err.strip() else ""
                    if not ("cannot write '%s" % p.out in first and "No space left on device" in first):
                        bad.append("%s: exit 1 without a clear message: %s" % (p.job.name, err.strip()[:300]))
                    why = self.absent_or_ref(p.job, p.out)
                    if why:
                        bad.append("%s: exit 1 and %s" % (p.job.name, why))
                    if p.job in kept and self.matches_ref(p.job, p.out):
                        bad.append("%s: the good existing output was lost: %s" % (p.job.name,
                                                                                  self.matches_ref(p.job, p.out)))
                else:
                    bad.append("%s: exit %s: %s" % (p.job.name, p.rc, err.strip()[:300]))
            check(not bad, "%s: %d runs exit 0 with byte-identical outputs or 1 with 'cannot write ...: No space left "
                  "on device' (%d failed)" % (label, len(procs), failed), bad)
            check(failed > 0, "%s: the file system did fill up (%d runs failed)" % (label, failed))
            temps = list(self.out_temps(mnt))
            check(not temps, "%s: no temp file left beside the outputs" % label, temps)
            strays = [f for f in os.listdir(mnt) if f != "filler" and not any(
                f in (os.path.basename(o) for o in j.outputs(os.path.join(mnt, j.name + "." + j.ext))) for j in jobs)]
            check(not strays, "%s: no other file written" % label, strays)

    # ---- 5. read-only caches ---------------------------------------------------

    def read_only_checks(self, label, cache, prefix=(), outdir=None, hit_jobs=(), miss_jobs=(), want_warning=None,
                         miss_warning=None):
        outdir = outdir or os.path.join(self.work, "ro-out")
        os.makedirs(outdir, exist_ok=True)
        before = self.snapshot(cache)
        plan = [(j, os.path.join(outdir, j.name + "." + j.ext)) for j in list(hit_jobs) + list(miss_jobs)]
        procs, hung = self.run_procs(plan, self.envfor(cache), os.path.join(self.work, "logs-ro"), verbose=True,
                                     prefix=prefix)
        bad = []
        for p in procs:
            err = p.stderr()
            why = "hung" if p in hung else "exit %s" % p.rc if p.rc != 0 else self.matches_ref(p.job, p.out)
            if not why and p.job in hit_jobs and want_warning is None and "cache hit" not in err:
                why = "no cache hit"
            if not why and p.job in miss_jobs and miss_warning and not any(
                    all(w in l for w in miss_warning) for l in err.splitlines() if "warning" in l):
                why = "no warning with %s" % miss_warning
            if not why and want_warning and not any(all(w in l for w in want_warning)
                                                    for l in err.splitlines() if "warning" in l):
                why = "no warning with %s" % want_warning
            if why:
                bad.append("%s: %s: %s" % (p.job.name, why, err.strip()[:300]))
        what = "%d hits" % len(hit_jobs) if hit_jobs and want_warning is None else "%d runs" % len(procs)
        check(not bad, "%s: %s exit 0 with byte-identical outputs%s" % (
            label, what, " (misses warn: %s)" % " ... ".join(miss_warning) if miss_warning else
            " (warning: %s)" % " ... ".join(want_warning) if want_warning else ""), bad)
        after = self.snapshot(cache)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        check(not changed, "%s: nothing in the cache changed" % label, changed)
        temps = list(self.out_temps(outdir))
        check(not temps, "%s: no temp file left beside the outputs" % label, temps)
        shutil.rmtree(outdir)

    def warmed_copy(self, warm, jobs, dst):
        """A copy of the cache `warm` that holds the entries of jobs."""
        self.warm(warm, jobs)
        shutil.copytree(warm, dst)

    def read_only_bind(self, warm):
        label = "read-only cache (ro bind mount)"
        src = os.path.join(self.work, "ro-src")
        hits = [self.jobs[n] for n in ("l2", "weighted_l2", "linf_mlir", "link_l2", "link_ip")]
        self.warmed_copy(warm, hits, src)
        mnt = os.path.join(self.work, "mnt-ro")
        os.makedirs(mnt)
        mount("--bind", src, mnt)
        try:
            mount("-o", "remount,bind,ro", mnt)
            miss = [self.variant("l2_ro%d" % i, "UDF_FAULT_RO=%d" % i) for i in range(2)]
            if not self.make_references(miss):
                check(False, "%s: reference runs" % label)
                return
            self.read_only_checks(label, mnt, hit_jobs=hits, miss_jobs=miss, miss_warning=("cache write failed", "Read-only file system"))
        finally:
            unmount(mnt)

    def read_only_empty(self):
        label = "read-only cache (empty ro tmpfs)"
        mnt = os.path.join(self.work, "mnt-ro-empty")
        with self.tmpfs(mnt, "1m", ",ro"):
            self.read_only_checks(label, mnt, miss_jobs=[self.jobs["l2"], self.jobs["inner_product"]],
                                  want_warning=("cache disabled", "Read-only file system"))

    def read_only_unprivileged(self, warm):
        label = "read-only cache (chmod a-w, unprivileged user)"
        setpriv = shutil.which("setpriv")
        if not setpriv:
            skip(label, "setpriv not found")
            return
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        cache = os.path.join(self.work, "ro-perm")
        hits = [self.jobs[n] for n in ("l2", "weighted_l2", "int8_l2")]
        self.warmed_copy(warm, hits, cache)
        outdir = os.path.join(self.work, "ro-perm-out")
        os.makedirs(outdir)
        os.chmod(outdir, 0o777)
        probe = subprocess.run(prefix + ["sh", "-c", 'test -x "$1" && test -r "$2" && test -w "$3"', "sh",
                                         os.path.join(self.bin, "udfc"), os.path.join(self.src, "examples", "l2.cu"),
                                         outdir], env=self.env)
        if probe.returncode != 0:
            skip(label, "user 65534 cannot run the tools, read the examples or write %s" % outdir)
            return
        for dirpath, dirs, files in os.walk(cache):
            for n in files:
                os.chmod(os.path.join(dirpath, n), 0o444)
            os.chmod(dirpath, 0o555)
        miss = [self.variant("l2_perm%d" % i, "UDF_FAULT_PERM=%d" % i) for i in range(2)]
        if not self.make_references(miss):
            check(False, "%s: reference runs" % label)
            return
        # udfc only: nvFatbin may live where user 65534 cannot read.
        self.read_only_checks(label, cache, prefix=prefix, outdir=outdir,
                              hit_jobs=hits, miss_jobs=miss,
                              miss_warning=("cache write failed", "Permission denied"))


class MountError(Exception):
    pass


def mount(*args):
    """Runs mount with args; MountError (the part is skipped) when it fails."""
    if not shutil.which("mount"):
        raise MountError("no mount command")
    r = subprocess.run(["mount", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise MountError("mount %s failed: %s" % (" ".join(args), r.stdout.strip()))


def unmount(path):
    if subprocess.run(["umount", path], stderr=subprocess.DEVNULL).returncode != 0:
        subprocess.run(["umount", "-l", path], stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="folder with udfc and udf-link")
    ap.add_argument("--source", required=True, help="the repository (for examples/)")
    ap.add_argument("--work", required=True, help="scratch folder (emptied first)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--procs", type=int, default=32)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1 << 31)
    print("seed %d (replay with --seed %d)" % (a.seed, a.seed), flush=True)
    t_start = time.monotonic()

    work = os.path.abspath(a.work)
    if os.path.isdir(work):  # a previous run killed before it unmounted
        for n in os.listdir(work):
            if os.path.ismount(os.path.join(work, n)):
                unmount(os.path.join(work, n))
        for dirpath, dirs, files in os.walk(work):
            os.chmod(dirpath, 0o755)
        shutil.rmtree(work)
    os.makedirs(work)
    t = Tester(a)
    t.make_jobs()
    if not t.make_references(t.udfc_jobs) or not t.make_references(t.link_jobs):
        check(False, "reference runs with --no-cache")
        print("%d passed, %d failed" % (len(PASSED), len(FAILED)), flush=True)
        return 1
    check(True, "reference runs with --no-cache: %d jobs" % len(t.ref))

    caches = t.kill_rounds()
    t.stale_temps(caches["main"])
    t.corrupt_entries(caches["main"])

    root = os.geteuid() == 0
    parts = [("full file system as the cache folder", t.full_cache),
             ("full file system as the output folder", lambda: t.full_output(caches["main"])),
             ("read-only cache (ro bind mount)", lambda: t.read_only_bind(caches["main"])),
             ("read-only cache (empty ro tmpfs)", t.read_only_empty),
             ("read-only cache (chmod a-w, unprivileged user)", lambda: t.read_only_unprivileged(caches["main"]))]
    for name, part in parts:
        if not root:
            skip(name, "needs root (mount, setpriv); running as uid %d" % os.geteuid())
            continue
        try:
            part()
        except MountError as e:
            skip(name, str(e))

    print("%.0f s%s" % (time.monotonic() - t_start, ", %d skipped" % len(SKIPPED) if SKIPPED else ""))
    print("%d passed, %d failed" % (len(PASSED), len(FAILED)), flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())

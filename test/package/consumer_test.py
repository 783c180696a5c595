#!/usr/bin/env python3
"""The installed package as a user meets it: examples/cmake built against it.

    consumer_test.py --build BUILD --source SRC --work DIR [--generator G]... [--prefix PREFIX]

1. Installs BUILD into "DIR/udf install" (unless --prefix names an existing
   install, e.g. an unpacked TGZ).
2. For each generator (default: Ninja and Unix Makefiles), configures a copy of
   examples/cmake in a build folder whose path contains spaces, builds it, runs
   the C demo (without a GPU it must say why it cannot search), and checks:
   - a no-op rebuild runs nothing;
   - touching the header the CUDA UDF includes (through -I) rebuilds exactly
     that artifact and the module (timestamps; Ninja: `-d explain` names the
     header);
   - a changed flag (-DWL2_SCALE) rebuilds exactly that artifact and the module;
   - touching the MLIR source rebuilds exactly that artifact and the module;
   - a changed kernel pack relinks the module only; a changed udfc rebuilds
     both artifacts and the module;
   - and after each, another build runs nothing.
3. Builds the demo without CMake through pkg-config (udf-runtime.pc).
4. Moves the install tree elsewhere and checks that the tools still find their
   plugin and kernel pack, that the consumer builds against the moved tree,
   and that diagnostics name no path of the machine that built the tools.

Exit status 0 when every check passes; each failure is printed.
"""
import argparse
import os
import shlex
import shutil
import sys
import time
import urllib.parse

from checks import check, run, summary


def mtimes(paths):
    """mtime of each path; None for one that does not exist (a Makefiles
    reconfigure deletes the outputs of commands whose command line changed)."""
    return {p: os.stat(p).st_mtime_ns if os.path.exists(p) else None for p in paths}


def bump(path):
    """Touches path: now, newer than anything built before (never in the
    future, which would make every later build run again)."""
    time.sleep(0.05)
    os.utime(path)


class Consumer:
    def __init__(self, src, build, prefix, generator, env):
        self.src, self.build, self.prefix, self.gen, self.env = src, build, prefix, generator, env
        self.outs = {n: os.path.join(build, n) for n in ("wl2.udfa", "linf.udfa", "metrics.udfm")}

    def configure(self, *extra):
        run(["cmake", "-S", self.src, "-B", self.build, "-G", self.gen, "-DCMAKE_PREFIX_PATH=" + self.prefix,
             "-DCMAKE_BUILD_TYPE=Release", *extra], env=self.env)

    def build_(self, explain=False):
        cmd = ["cmake", "--build", self.build]
        if self.gen == "Ninja" and explain:
            cmd += ["--", "-d", "explain"]
        return run(cmd, env=self.env).stdout

    def expect_noop(self, label):
        before = mtimes(self.outs.values())
        out = self.build_()
        ran = [l for l in out.splitlines() if "udfc " in l or "udf-link " in l]
        if self.gen == "Ninja":
            check("ninja: no work to do." in out, "%s: %s: a second build runs nothing" % (self.gen, label))
        else:
            check(not ran, "%s: %s: a second build runs no udfc/udf-link (%s)" % (self.gen, label, ran))
        check(mtimes(self.outs.values()) == before, "%s: %s: a second build leaves the outputs alone" % (self.gen, label))

    def expect_rebuild(self, label, changed, explain_needle=None):
        before = mtimes(self.outs.values())
        out = self.build_(explain=explain_needle is not None)
        after = mtimes(self.outs.values())
        rebuilt = sorted(os.path.basename(p) for p in self.outs.values() if after[p] is None or after[p] != before[p])
        check(rebuilt == sorted(changed), "%s: %s rebuilds exactly %s (rebuilt: %s)" % (self.gen, label, sorted(changed), rebuilt))
        if explain_needle and self.gen == "Ninja":
            check(any(explain_needle in l and "explain" in l for l in out.splitlines()),
                  "%s: ninja -d explain names %s as the reason" % (self.gen, explain_needle))


def consumer_checks(src_copy, work, prefix, generator, env, full=True):
    build = os.path.join(work, "build dir %s" % generator.replace(" ", "-"))
    shutil.rmtree(build, ignore_errors=True)
    c = Consumer(src_copy, build, prefix, generator, env)
    c.configure()
    c.build_()
    for p in c.outs.values():
        check(os.path.exists(p) and os.path.exists(p + ".d"), "%s: built %s and its depfile" % (generator, os.path.basename(p)))
    inspect = run([os.path.join(prefix, "bin", "udfc"), "--inspect", c.outs["metrics.udfm"]], env=env).stdout
    check('"weighted_l2"' in inspect and '"linf"' in inspect, "%s: the module holds both UDFs" % generator)
    demo = run([os.path.join(build, "search_demo")], env=env, ok=False)
    check(demo.returncode == 0 and ("cannot search here" in demo.stdout or "found itself first" in demo.stdout),
          "%s: search_demo runs and reports (%s)" % (generator, demo.stdout.strip().splitlines()[-1:] or demo.stdout))
    c.expect_noop("first build")
    if not full:
        return
    header = os.path.join(src_copy, "include", "consumer", "scale.h")
    bump(header)
    c.expect_rebuild("touching the -I header", ["wl2.udfa", "metrics.udfm"], explain_needle="scale.h")
    c.expect_noop("after the header")
    c.configure("-DWL2_SCALE=3")
    c.expect_rebuild("changing a flag (-DWL2_SCALE)", ["wl2.udfa", "metrics.udfm"])
    c.expect_noop("after the flag")
    bump(os.path.join(src_copy, "metrics", "linf.mlir"))
    c.expect_rebuild("touching the MLIR source", ["linf.udfa", "metrics.udfm"])
    c.expect_noop("after the MLIR source")
    bump(os.path.join(prefix, "share", "udf", "kernels", "scan_v1_f32_f32_min.ltoir"))  # the f32 min scans it links
    c.expect_rebuild("touching the kernel pack", ["metrics.udfm"])
    c.expect_noop("after the kernel pack")
    bump(os.path.join(prefix, "bin", "udfc"))
    c.expect_rebuild("touching udfc", ["wl2.udfa", "linf.udfa", "metrics.udfm"])
    c.expect_noop("after udfc")


def pkg_config_checks(src_copy, work, prefix, env):
    pc_env = dict(env, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    flags = shlex.split(run(["pkg-config", "--cflags", "--libs", "udf-runtime"], env=pc_env).stdout)
    check(any(f.startswith("-I") for f in flags) and "-ludf_runtime" in flags, "pkg-config: udf-runtime gives %s" % flags)
    exe = os.path.join(work, "demo via pkg-config")
    module = os.path.join(work, "build dir Ninja", "metrics.udfm")
    r = run(["cc", "-std=c99", "-O1", "-o", exe, os.path.join(src_copy, "search_demo.c"),
             '-DUDF_DEMO_MODULE="%s"' % module, *flags, "-lm"], env=pc_env, ok=False)
    check(r.returncode == 0, "pkg-config: the C demo compiles and links (%s)" % r.stdout.strip()[-300:])
    if r.returncode == 0:
        rr = run([exe], env=dict(env, LD_LIBRARY_PATH=os.path.join(prefix, "lib")), ok=False)
        check(rr.returncode == 0, "pkg-config: the C demo runs (%s)" % rr.stdout.strip())


def path_to_uri(p):
    return "file://" + urllib.parse.quote(p)


def relocation_checks(src_copy, work, prefix, env, build_dir, source_dir):
    moved = os.path.join(work, "moved elsewhere", "udf")
    shutil.rmtree(os.path.dirname(moved), ignore_errors=True)
    os.makedirs(os.path.dirname(moved))
    shutil.copytree(prefix, moved, symlinks=True)
    shutil.rmtree(prefix)  # the original location is gone
    udfc, link = os.path.join(moved, "bin", "udfc"), os.path.join(moved, "bin", "udf-link")
    out = os.path.join(work, "moved-out")
    os.makedirs(out, exist_ok=True)
    r = run([udfc, os.path.join(src_copy, "metrics", "linf.mlir"), "--flags-from-first-line", "--arch", "sm_90",
             "-o", os.path.join(out, "linf.udfa"), "--no-cache"], env=env, ok=False)
    check(r.returncode == 0, "moved install: udfc finds its IR plugin (%s)" % r.stdout.strip()[-300:])
    r = run([link, os.path.join(out, "linf.udfa"), "--arch", "sm_90", "-o", os.path.join(out, "m.udfm"), "--dry-run"],
            env=env, ok=False)
    check(r.returncode == 0 and os.path.join(moved, "share", "udf", "kernels") in r.stdout,
          "moved install: udf-link finds its kernel pack next to itself")
    v = run([udfc, "--version"], env=env).stdout
    check(os.path.join(moved, "lib", "libudf_frontend_ir.so") in v, "moved install: udfc --version shows the moved plugin")
    consumer_checks(src_copy, work, moved, "Ninja", env, full=False)
    # The installed binaries hold no path of the build machine...
    for d in ("bin", "lib"):
        for name in os.listdir(os.path.join(moved, d)):
            p = os.path.join(moved, d, name)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    data = f.read()
                check(build_dir.encode() not in data and source_dir.encode() not in data,
                      "installed %s/%s holds no path of the build machine" % (d, name))
    # ...and diagnostics from every kind of failure name none.
    bad = os.path.join(out, "bad.cu")
    with open(bad, "w") as f:
        f.write('extern "C" __device__ float bad(float x, float y, float acc, const udf_ctx_v1 *ctx) { return oops; }\n')
    runs = [
        [udfc, bad, "--arch", "sm_90", "-o", os.path.join(out, "x.udfa")],
        [udfc, bad, "--arch", "sm_91", "-o", os.path.join(out, "x.udfa")],
        [udfc, os.path.join(out, "missing.cu"), "--arch", "sm_90", "-o", os.path.join(out, "x.udfa")],
        [udfc, os.path.join(out, "linf.udfa"), "--input-kind", "mlir", "--arch", "sm_90", "-o", os.path.join(out, "x.udfa")],
        [udfc, "@" + os.path.join(out, "missing.rsp")],
        [link, os.path.join(out, "linf.udfa"), os.path.join(out, "linf.udfa"), "--arch", "sm_90", "-o", os.path.join(out, "d.udfm")],
        [link, bad, "--arch", "sm_90", "-o", os.path.join(out, "d.udfm")],
        [link, os.path.join(out, "linf.udfa"), "--arch", "sm_90", "-o", os.path.join(out, "d.udfm"), "--kernel-pack", out],
        [os.path.join(moved, "bin", "udf-run"), os.path.join(out, "m.udfm"), "--queries", bad, "--dataset", bad, "--check"],
    ]
    for fmt in ("text", "sarif"):
        for cmd in runs:
            r = run(cmd + ["--diagnostics-format", fmt], cwd=out, env=env, ok=False)
            # The run's own files live under `work` (which may itself be in the
            # build folder): what remains must not name the build machine's paths.
            text = r.stdout.replace(work, "<work>").replace(path_to_uri(work), "<work>")
            leaked = [p for p in (build_dir, source_dir, prefix) if p in text or path_to_uri(p) in text]
            check(r.returncode != 0 and not leaked,
                  "diagnostics (%s) of `%s` name no build-machine path%s" % (
                      fmt, " ".join(os.path.basename(a) for a in cmd[:2]), (": " + str(leaked)) if leaked else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--prefix")
    ap.add_argument("--generator", action="append")
    ap.add_argument("--no-relocation", action="store_true")
    a = ap.parse_args()
    gens = a.generator or ["Ninja", "Unix Makefiles"]
    work = os.path.abspath(a.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, UDF_CACHE_DIR=os.path.join(work, "udf cache"))
    for var in ("UDF_KERNEL_PACK_DIR", "UDF_FRONTEND_IR_LIBRARY", "CMAKE_PREFIX_PATH"):
        env.pop(var, None)
    prefix = a.prefix
    if not prefix:
        prefix = os.path.join(work, "udf install")
        run(["cmake", "--install", a.build, "--prefix", prefix])
    src_copy = os.path.join(work, "consumer src")
    shutil.copytree(os.path.join(a.source, "examples", "cmake"), src_copy)
    for g in gens:
        consumer_checks(src_copy, work, prefix, g, env)
    pkg_config_checks(src_copy, work, prefix, env)
    if not a.no_relocation:
        relocation_checks(src_copy, work, prefix, env, os.path.abspath(a.build), os.path.abspath(a.source))
    return summary()


if __name__ == "__main__":
    sys.exit(main())

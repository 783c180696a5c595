#!/usr/bin/env python3
"""The Python wheel as a user meets it, on a machine with no CUDA toolkit.

    wheel_test.py --source SRC --work DIR [--wheel FILE]

1. Builds the manylinux wheel as a release does (scripts/build_wheels.py --from-tree: pip wheel,
   scikit-build-core, build folder SRC/build-wheel-<tag>/, then auditwheel repair to
   manylinux_2_34_x86_64) and checks what it holds and declares: the package, the extension
   with RUNPATH $ORIGIN/lib, the tools, the runtime library, the kernel pack, the built-in
   metrics, the CMake package, the console scripts, the CUDA 13 wheels and numba-cuda-mlir
   as dependencies.  The sdist holds every file of the source tree.
2. Installs it into a fresh virtual environment (no system site-packages) with its
   dependencies and the numba-cuda extra from the package registry, NVIDIA's wheels pinned to
   the CUDA minor version this build was made with (so that the two can be compared byte for
   byte); reports the wheel's size and how long `pip install` took.
3. In a mount namespace where the CUDA toolkit (/usr/local/cuda*) and the Debian LLVM 22
   (/usr/lib/llvm-22, libLLVM.so.22.1) are hidden: `udfc --version` (the console script)
   finds all four CUDA libraries in the venv; the console scripts compile and link a CUDA
   metric, whose `--emit cubin` output equals the build tree's (toolkit libraries) byte for
   byte when the libraries are the same files, else the difference is named; a Python
   @udf.metric compiles and links with both back ends; an MLIR input fails with the message
   that says how to get the IR front end; the package compiles, links and builds + searches
   an index (on a GPU: results equal NumPy's; without one: the runtime's NO_DRIVER error).
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import zipfile

from checks import check, run, summary

# What a mount namespace hides: the toolkit and the Debian LLVM 22 (IR front end).
HIDE_DIRS = ["/usr/local/cuda", "/usr/local/cuda-13.0", "/usr/lib/llvm-22"]
HIDE_FILES = ["/usr/lib/x86_64-linux-gnu/libLLVM.so.22.1"]
CUDA_WHEELS = ["nvidia-cuda-nvrtc", "nvidia-nvjitlink", "nvidia-nvvm", "nvidia-nvfatbin", "nvidia-cuda-runtime"]

SMOKE = textwrap.dedent(r'''
    import json, os, subprocess, sys
    import numpy as np
    import udf
    from udf.errors import UdfRuntimeError

    site = sys.argv[1]
    pkg = os.path.dirname(udf.__file__)
    print("package", pkg)
    assert pkg.startswith(site), (pkg, site)

    udfc = os.path.join(pkg, "bin", "udfc")
    out = subprocess.run([udfc, "--version"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    print("udfc --version:", out.stdout.splitlines()[0])

    src = """
    extern "C" __device__ float wheel_l2(float x, float y, float acc, const udf_ctx_v1 *ctx) {
      float d = x - y;
      return acc + UDF_CAPTURE(ctx, scale) * d * d;
    }
    """
    m = udf.cuda_source_metric(src, symbol_name="wheel_l2", captures={"scale": np.float32(1.0)})
    art = udf.compile(m, archs=["sm_80", "sm_90"])
    assert art.manifest["symbol"] == "wheel_l2", art.manifest
    assert sorted(t["arch"] for t in art.manifest["targets"]) == ["sm_80", "sm_90"], art.manifest["targets"]
    art.save("wheel_l2.udfa")
    mod = udf.link([art], archs=["sm_90"])
    mod.save("wheel_l2.udfm")
    print("compiled and linked:", os.path.getsize("wheel_l2.udfa"), "+", os.path.getsize("wheel_l2.udfm"), "bytes")

    rng = np.random.default_rng(7)
    data = rng.standard_normal((3000, 24), dtype=np.float32)
    queries = rng.standard_normal((20, 24), dtype=np.float32)
    try:
        index = udf.Index.build(m, data, n_lists=16)
    except UdfRuntimeError as e:
        assert e.status_name in ("UDF_ERROR_NO_DRIVER", "UDF_ERROR_NO_DEVICE"), (e.status_name, str(e))
        print("no GPU:", e.status_name)
        sys.exit(0)
    d, i = index.search(queries, k=5, n_probes=16, captures={"scale": 2.0})
    assert isinstance(d, np.ndarray) and d.shape == (20, 5) and i.dtype == np.int64
    ref = 2.0 * ((queries[:, None, :].astype(np.float64) - data[None, :, :]) ** 2).sum(-1)
    exact = np.sort(ref, axis=1)[:, :5]
    assert np.allclose(d, exact, rtol=1e-4, atol=1e-4), (d, exact)
    print("searched on the GPU: matches NumPy")
''')


PYMETRIC = textwrap.dedent(r'''
    # A Python @udf.metric, compiled and linked for sm_90 with one back end (argv[1]).
    import sys
    import numpy as np
    import udf

    backend = sys.argv[1]

    @udf.metric(captures={"w": np.ones(16, np.float32)}, backend=backend, symbol_name="wheel_py_l2")
    def wheel_py_l2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.w[ctx.dim] * d * d

    art = udf.compile(wheel_py_l2, archs=["sm_90"])
    assert art.manifest["symbol"] == "wheel_py_l2", art.manifest
    mod = udf.link([wheel_py_l2], archs=["sm_90"], max_k=32)
    mod.save("py_%s.udfm" % backend)
    print("python metric with", backend, "compiled and linked")
''')


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def hidden(cmd):
    """cmd run in a new mount namespace where the toolkit and LLVM 22 are hidden (empty bind mounts)."""
    empty_dir, empty_file = "/tmp/udf-wheel-test-empty", "/tmp/udf-wheel-test-empty.file"
    os.makedirs(empty_dir, exist_ok=True)
    open(empty_file, "a").close()
    mounts = ["mount --bind %s %s" % (empty_dir, d) for d in HIDE_DIRS if os.path.isdir(d)]
    mounts += ["mount --bind %s %s" % (empty_file, f) for f in HIDE_FILES if os.path.isfile(f)]
    script = " && ".join(mounts + ['exec "$@"'])
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "hidden"] + list(cmd)


def can_hide():
    r = subprocess.run(hidden(["true"]), capture_output=True, text=True)
    return r.returncode == 0, r.stderr.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--build", help="this build's folder (its bin/ is the toolkit side of the comparison)")
    ap.add_argument("--wheel", help="test this wheel instead of building one")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    source = os.path.abspath(args.source)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    # 1. The wheel, as scripts/build_wheels.py makes it for a release (from the tree: ccache).
    if args.wheel:
        wheel = os.path.abspath(args.wheel)
    else:
        dist = os.path.join(work, "dist")
        t0 = time.monotonic()
        run([sys.executable, os.path.join(source, "scripts", "build_wheels.py"), "--from-tree", "--no-isolation",
             "--python", sys.executable, "--out", dist])
        print("built and repaired the wheel in %.0f s" % (time.monotonic() - t0))
        wheels = [f for f in os.listdir(dist) if f.endswith(".whl")]
        check(len(wheels) == 1, "build_wheels.py made one wheel (%s)" % wheels)
        wheel = os.path.join(dist, wheels[0])
    tag = "cp%d%d" % sys.version_info[:2]
    check(re.match(r"udf-[0-9.]+-%s-%s-manylinux_2_34_x86_64\.whl$" % (tag, tag), os.path.basename(wheel)) is not None,
          "the wheel is a manylinux_2_34 wheel for this Python (%s)" % os.path.basename(wheel))
    wheel_mb = os.path.getsize(wheel) / 1e6
    print("wheel size: %.1f MB" % wheel_mb)

    zf = zipfile.ZipFile(wheel)
    names = set(zf.namelist())
    for want in ["udf/__init__.py", "udf/errors.py", "udf/_pycompile/__init__.py", "udf/bin/udfc", "udf/bin/udf-link",
                 "udf/bin/udf-run", "udf/lib/libudf_runtime.so.3", "udf/lib/libudf_frontend_ir.so",
                 "udf/share/udf/kernels/ivf_flat_v1.json", "udf/share/udf/kernels/scan_v1_f32_f32_min.ltoir",
                 "udf/share/udf/kernels/merge_v1_min.ltoir", "udf/share/udf/kernels/scan_v2_state_f32_f32_min.ltoir",
                 "udf/share/udf/metrics/l2.udfa", "udf/include/udf/runtime.h", "udf/lib/cmake/udf/udfConfig.cmake",
                 "_udf_console.py"]:
        check(want in names, "the wheel holds " + want)
    libs = sorted(n for n in names if n.startswith("udf/lib/libudf_runtime"))
    check(libs == ["udf/lib/libudf_runtime.so.3"], "one copy of the runtime library, its SONAME (%s)" % libs)
    ext = [n for n in names if re.match(r"udf/_ext\..*\.so$", n)]
    check(len(ext) == 1, "the wheel holds the extension udf._ext (%s)" % ext)
    check(not any("__pycache__" in n or n.endswith(".pyc") for n in names), "no byte code in the wheel")
    check(not any(".libs/" in n for n in names), "auditwheel grafted no library into the wheel")
    info = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [l.split(":", 1)[1].strip() for l in zf.read(info).decode().splitlines() if l.startswith("Requires-Dist:")]
    for dep in CUDA_WHEELS + ["numba-cuda-mlir" if sys.version_info >= (3, 11) else "numba-cuda", "numpy"]:
        check(any(re.match(re.escape(dep) + r"\b", r) and "extra ==" not in r for r in requires),
              "the wheel depends on %s (%s)" % (dep, [r for r in requires if r.startswith(dep)]))
    entry = zf.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    for tool, fn in (("udfc", "udfc"), ("udf-link", "udf_link"), ("udf-run", "udf_run")):
        check(re.search(r"^%s\s*=\s*_udf_console:%s$" % (re.escape(tool), fn), entry, re.M) is not None,
              "the wheel installs the console script " + tool)

    # The sdist holds every file git knows (scripts/build_wheels.py builds the wheels from it)
    # and no build output.
    if not args.wheel and shutil.which("git") and os.path.isdir(os.path.join(source, ".git")):
        sd = os.path.join(work, "sdist")
        run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", sd, source])
        (tarball,) = os.listdir(sd)
        import tarfile
        with tarfile.open(os.path.join(sd, tarball)) as t:
            in_sdist = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
        tracked = set(run(["git", "-C", source, "ls-files"]).stdout.split())
        missing = sorted(f for f in tracked if f not in in_sdist and os.path.exists(os.path.join(source, f)))
        check(not missing, "the sdist %s holds every tracked file (missing: %s)" % (tarball, missing[:10]))
        junk = sorted(f for f in in_sdist if f.split("/", 1)[0].startswith("build") or
                      f.split("/", 1)[0] in ("dist", ".devpack", ".device", ".whl", ".bench"))
        check(not junk, "the sdist holds no build output (%d MB; %s)" %
              (os.path.getsize(os.path.join(sd, tarball)) // 1000000, junk[:5]))

    # 2. A fresh environment with the dependencies from the registry.
    venv = os.path.join(work, "venv")
    run([sys.executable, "-m", "venv", venv])
    py = os.path.join(venv, "bin", "python")
    build_bin = os.path.join(os.path.abspath(args.build), "bin") if args.build else None
    constraints = os.path.join(work, "constraints.txt")
    minor = None
    if build_bin:
        v = run([os.path.join(build_bin, "udfc"), "--version"]).stdout
        m = re.search(r"^\s*NVRTC\s+(13\.[0-9]+)\s", v, re.M)
        minor = m.group(1) if m else None
    with open(constraints, "w") as f:
        for w in CUDA_WHEELS:
            f.write("%s==%s.*\n" % (w, minor) if minor else "")
    t0 = time.monotonic()
    run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q", "-c", constraints, wheel + "[numba-cuda]"])
    install_s = time.monotonic() - t0
    site = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    env_mb = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(venv) for f in fs
                 if not os.path.islink(os.path.join(d, f))) / 1e6
    print("pip install of the wheel and its dependencies (CUDA %s wheels, numba-cuda extra): %.1f s; the venv: %.0f MB"
          % (minor or "13.x", install_s, env_mb))
    pkg = os.path.join(site, "udf")
    if ext:
        so = os.path.join(site, ext[0])
        dyn = run(["readelf", "-d", so]).stdout
        m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", dyn)
        check(m is not None and m.group(1) == "$ORIGIN/lib", "udf._ext finds the runtime at $ORIGIN/lib (%s)" %
              (m.group(1) if m else None))
    for tool in ("udfc", "udf-link", "udf-run"):
        check(os.access(os.path.join(pkg, "bin", tool), os.X_OK), "bin/%s is executable after install" % tool)
        check(os.access(os.path.join(venv, "bin", tool), os.X_OK), "the console script %s is on the venv's PATH" % tool)

    # 3. Nothing of the toolkit or LLVM visible.
    ok, why = can_hide()
    if not check(ok, "a mount namespace can hide the toolkit and LLVM 22 (unshare --mount: %s)" % (why or "ok")):
        return summary()
    run_dir = os.path.join(work, "use")
    os.makedirs(run_dir)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "UDF_", "CUDA_", "LD_LIBRARY_PATH", "VIRTUAL_ENV"))}
    env["PATH"] = os.path.join(venv, "bin") + ":/usr/bin:/bin"
    env["UDF_CACHE_DIR"] = os.path.join(work, "cache")

    def in_env(cmd, ok=True):
        return run(hidden(cmd), cwd=run_dir, env=env, ok=ok)

    r = in_env(["ls", "/usr/local/cuda/"])
    check(r.stdout.strip() == "", "the toolkit is hidden in the namespace")
    v = in_env(["udfc", "--version"]).stdout
    print(textwrap.indent(v.rstrip(), "  udfc --version: "))
    for lib, so in (("NVRTC", "libnvrtc.so.13"), ("nvJitLink", "libnvJitLink.so.13"), ("nvFatbin", "libnvfatbin.so.13"),
                    ("libNVVM", "libnvvm.so.4")):
        want = os.path.join(site, "nvidia", "cu13", "lib", so)
        check(re.search(r"^\s*%s\s+[0-9]+\.[0-9]+\s+%s \(python env\)$" % (lib, re.escape(want)), v, re.M) is not None,
              "udfc --version: %s from the venv's NVIDIA wheel" % lib)
    check("udfc IR front end  not found" in v and "libllvm22" in v,
          "udfc --version: the IR front end is missing (LLVM 22 hidden) and says how to get it")

    r = in_env(["python", "-c", "import os, udf; print(os.environ.get('UDF_CUDA_WHEEL_DIRS'))"])
    check(r.stdout.strip().split(":")[0] == os.path.join(site, "nvidia", "cu13"),
          "import udf exports the nvidia/cu13 folders on its sys.path for the tools (%s)" % r.stdout.strip())

    # A CUDA metric through the console scripts; the cubin against the build tree's.
    l2 = os.path.join(source, "examples", "l2.cu")
    in_env(["udfc", l2, "-o", "l2.udfa", "--arch", "sm_90"])
    in_env(["udf-link", "l2.udfa", "-o", "l2.udfm", "--arch", "sm_90", "--max-k", "32"])
    in_env(["udf-link", "l2.udfa", "-o", "l2_env.cubin", "--emit", "cubin", "--arch", "sm_90", "--max-k", "32"])
    check(os.path.getsize(os.path.join(run_dir, "l2.udfm")) > 0, "the console scripts compile and link a CUDA metric")
    if build_bin:
        tree_env = dict(os.environ, UDF_CACHE_DIR=os.path.join(work, "cache-tree"))
        run([os.path.join(build_bin, "udfc"), l2, "-o", "l2_tree.udfa", "--arch", "sm_90"], cwd=run_dir, env=tree_env)
        run([os.path.join(build_bin, "udf-link"), "l2_tree.udfa", "-o", "l2_tree.cubin", "--emit", "cubin",
             "--arch", "sm_90", "--max-k", "32"], cwd=run_dir, env=tree_env)
        tree_v = run([os.path.join(build_bin, "udfc"), "--version"]).stdout
        same_libs = True
        for lib, so in (("NVRTC", "libnvrtc.so.13"), ("nvJitLink", "libnvJitLink.so.13")):
            m = re.search(r"^\s*%s\s+\S+\s+(/\S+)" % lib, tree_v, re.M)
            a, b = os.path.realpath(m.group(1)), os.path.join(site, "nvidia", "cu13", "lib", so)
            same = sha(a) == sha(b)
            print("  %s: build tree %s (%d bytes), venv %s (%d bytes): %s" %
                  (lib, a, os.path.getsize(a), b, os.path.getsize(b), "the same file" if same else "different builds"))
            same_libs = same_libs and same
        art_same = sha(os.path.join(run_dir, "l2.udfa")) == sha(os.path.join(run_dir, "l2_tree.udfa"))
        cubin_same = sha(os.path.join(run_dir, "l2_env.cubin")) == sha(os.path.join(run_dir, "l2_tree.cubin"))
        if same_libs:
            check(art_same, "the artifact equals the build tree's byte for byte (same NVRTC)")
            check(cubin_same, "udf-link --emit cubin equals the build tree's byte for byte (same nvJitLink)")
        else:
            print("  the libraries differ (other CUDA 13 minor or patch versions): artifact %s, cubin %s" %
                  ("equal" if art_same else "differs", "equal" if cubin_same else "differs"))
            check(os.path.getsize(os.path.join(run_dir, "l2_env.cubin")) > 0, "the venv's libraries made a cubin")

    # Python metrics with both back ends, the MLIR front end's message, the package's own calls.
    with open(os.path.join(run_dir, "pymetric.py"), "w") as f:
        f.write(PYMETRIC)
    # numba-cuda-mlir 0.6 needs Python 3.11 (on 3.10 the wheel depends on numba-cuda instead).
    for backend in ("numba-cuda-mlir", "numba-cuda") if sys.version_info >= (3, 11) else ("numba-cuda",):
        r = in_env(["python", "pymetric.py", backend], ok=False)
        print(textwrap.indent(r.stdout.rstrip(), "  %s: " % backend))
        check(r.returncode == 0 and "compiled and linked" in r.stdout,
              "a Python @udf.metric compiles and links with %s, no toolkit" % backend)
    r = in_env(["udfc", os.path.join(source, "examples", "linf.mlir"), "-o", "linf.udfa", "--arch", "sm_90"], ok=False)
    check(r.returncode == 3 and "libmlir-22" in r.stdout and not os.path.exists(os.path.join(run_dir, "linf.udfa")),
          "an MLIR input without LLVM 22 fails (exit 3) saying how to get the IR front end (%d)" % r.returncode)

    with open(os.path.join(run_dir, "smoke.py"), "w") as f:
        f.write(SMOKE)
    r = in_env(["python", "smoke.py", site], ok=False)
    print(textwrap.indent(r.stdout.rstrip(), "  smoke: "))
    check(r.returncode == 0, "the installed package compiles, links and searches (or says why it cannot)")
    check(os.path.isdir(env["UDF_CACHE_DIR"]) and os.listdir(env["UDF_CACHE_DIR"]),
          "the package's compile went through the tools' on-disk cache ($UDF_CACHE_DIR)")
    print("summary: wheel %.1f MB (%s), pip install %.1f s, venv %.0f MB" % (wheel_mb, os.path.basename(wheel), install_s,
                                                                           env_mb))
    return summary()


if __name__ == "__main__":
    sys.exit(main())

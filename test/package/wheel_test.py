#!/usr/bin/env python3
"""The Python wheel as a user meets it.

    wheel_test.py --source SRC --work DIR [--wheel FILE]

Builds a wheel with `pip wheel SRC` (scikit-build-core; its build folder is
SRC/build/wheel/, so a second run only rebuilds what changed), checks what it
holds (the package, the extension with RUNPATH $ORIGIN/lib, the tools, the
runtime library, the kernel pack, the built-in metrics, the CMake package), then
installs it into a fresh virtual environment (no system site-packages) and, from
a folder outside the source tree, compiles and links a CUDA source-string metric
with the installed package and its bundled tools, runs the bundled udfc, and
builds + searches an index (on a GPU: results equal NumPy's exhaustive search;
without one: the runtime's NO_DRIVER error as a Python exception).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile

from checks import check, run, summary


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--wheel", help="test this wheel instead of building one")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    if args.wheel:
        wheel = os.path.abspath(args.wheel)
    else:
        dist = os.path.join(work, "dist")
        run([sys.executable, "-m", "pip", "wheel", args.source, "--no-build-isolation", "--no-deps",
             "--disable-pip-version-check", "-w", dist])
        wheels = [f for f in os.listdir(dist) if f.endswith(".whl")]
        check(len(wheels) == 1, "pip wheel made one wheel (%s)" % wheels)
        wheel = os.path.join(dist, wheels[0])
    tag = "cp%d%d" % sys.version_info[:2]
    check(re.match(r"udf-[0-9.]+-%s-%s-linux_x86_64\.whl$" % (tag, tag), os.path.basename(wheel)) is not None,
          "the wheel is for this Python and platform (%s)" % os.path.basename(wheel))

    names = set(zipfile.ZipFile(wheel).namelist())
    for want in ["udf/__init__.py", "udf/errors.py", "udf/_pycompile/__init__.py", "udf/bin/udfc", "udf/bin/udf-link",
                 "udf/bin/udf-run", "udf/lib/libudf_runtime.so.3", "udf/lib/libudf_frontend_ir.so",
                 "udf/share/udf/kernels/ivf_flat_v1.json", "udf/share/udf/kernels/ivf_flat_v1.ltoir",
                 "udf/share/udf/metrics/l2.udfa", "udf/include/udf/runtime.h", "udf/lib/cmake/udf/udfConfig.cmake"]:
        check(want in names, "the wheel holds " + want)
    libs = sorted(n for n in names if n.startswith("udf/lib/libudf_runtime"))
    check(libs == ["udf/lib/libudf_runtime.so.3"], "one copy of the runtime library, its SONAME (%s)" % libs)
    ext = [n for n in names if re.match(r"udf/_ext\..*\.so$", n)]
    check(len(ext) == 1, "the wheel holds the extension udf._ext (%s)" % ext)
    check(not any("__pycache__" in n or n.endswith(".pyc") for n in names), "no byte code in the wheel")

    # A fresh environment, outside the source tree.
    venv = os.path.join(work, "venv")
    run([sys.executable, "-m", "venv", venv])
    py = os.path.join(venv, "bin", "python")
    run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q", wheel])
    site = run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    pkg = os.path.join(site, "udf")
    if ext:
        so = os.path.join(site, ext[0])
        dyn = run(["readelf", "-d", so]).stdout
        m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", dyn)
        check(m is not None and m.group(1) == "$ORIGIN/lib", "udf._ext finds the runtime at $ORIGIN/lib (%s)" %
              (m.group(1) if m else None))
    for tool in ("udfc", "udf-link", "udf-run"):
        check(os.access(os.path.join(pkg, "bin", tool), os.X_OK), "bin/%s is executable after install" % tool)

    run_dir = os.path.join(work, "use")
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "smoke.py"), "w") as f:
        f.write(SMOKE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "UDF_"))}
    env["UDF_CACHE_DIR"] = os.path.join(work, "cache")
    r = subprocess.run([py, "smoke.py", site], cwd=run_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    print(textwrap.indent(r.stdout.rstrip(), "  smoke: "))
    check(r.returncode == 0, "the installed package compiles, links and searches (or says why it cannot)")
    check(os.path.isdir(env["UDF_CACHE_DIR"]) and os.listdir(env["UDF_CACHE_DIR"]),
          "the package's compile went through the tools' on-disk cache ($UDF_CACHE_DIR)")

    return summary()


if __name__ == "__main__":
    sys.exit(main())

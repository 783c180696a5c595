#!/usr/bin/env python3
"""CPack packages: `cpack -G TGZ` and `cpack -G DEB` from a build.

    package_test.py --build BUILD --source SRC --work DIR

TGZ: unpacked into a fresh folder, the consumer project (examples/cmake)
builds against it with Ninja (test/package/consumer_test.py --prefix, which
also moves the tree and checks relocation).
DEB: the control fields are complete; every shared library that an ELF file
in the package needs is provided by a package its Depends names (found with
dpkg -S, as dpkg-shlibdeps does), and nothing else is claimed; the package
lists the tools, the runtime, the headers, the CMake package, pkg-config, the
kernel pack and metrics; and `apt-get install --simulate` accepts it.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile

from checks import check, run, summary


def needed_libs(path):
    out = subprocess.run(["readelf", "-d", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def owner_package(soname, runpaths):
    """The Debian package that ships `soname`, looked up like the loader would."""
    candidates = [os.path.join(d, soname) for d in runpaths]
    ldconfig = subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE, text=True).stdout
    candidates += re.findall(r"\s%s \([^)]*x86-64[^)]*\) => (\S+)" % re.escape(soname), ldconfig)
    for c in candidates:
        if os.path.exists(c):
            # The real file's package: a symlink found first through a RUNPATH
            # may belong to a -dev package the loader does not need.
            for p in (os.path.realpath(c), c):
                r = subprocess.run(["dpkg", "-S", p], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                if r.returncode == 0:
                    return r.stdout.split(":")[0].strip()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    work = os.path.abspath(a.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    config = os.path.join(os.path.abspath(a.build), "CPackConfig.cmake")
    run(["cpack", "-G", "TGZ;DEB", "--config", config, "-B", work])

    # TGZ
    tgz = glob.glob(os.path.join(work, "udf-*.tar.gz"))
    check(len(tgz) == 1, "cpack -G TGZ made one archive (%s)" % [os.path.basename(t) for t in tgz])
    fresh = os.path.join(work, "fresh folder")
    os.makedirs(fresh)
    with tarfile.open(tgz[0]) as t:
        t.extractall(fresh)
    tops = os.listdir(fresh)
    check(len(tops) == 1, "the archive has one top folder (%s)" % tops)
    prefix = os.path.join(fresh, tops[0])
    for f in ("bin/udfc", "bin/udf-link", "lib/libudf_runtime.so", "lib/cmake/udf/udfConfig.cmake"):
        check(os.path.exists(os.path.join(prefix, f)), "TGZ holds " + f)
    r = subprocess.run([sys.executable, os.path.join(a.source, "test", "package", "consumer_test.py"), "--build", a.build,
                        "--source", a.source, "--work", os.path.join(work, "consumer"), "--prefix", prefix,
                        "--generator", "Ninja"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print("\n".join("  consumer: " + l for l in r.stdout.splitlines()))
    check(r.returncode == 0, "the consumer project builds against the unpacked TGZ")

    # DEB
    debs = glob.glob(os.path.join(work, "*.deb"))
    check(len(debs) == 1, "cpack -G DEB made one package (%s)" % [os.path.basename(d) for d in debs])
    deb = debs[0]
    fields = {}
    for f in ("Package", "Version", "Architecture", "Maintainer", "Description", "Depends", "Section"):
        fields[f] = run(["dpkg-deb", "-f", deb, f]).stdout.strip()
        check(bool(fields[f]), "DEB field %s: %s" % (f, fields[f].splitlines()[0] if fields[f] else "(missing)"))
    depends = {d.strip().split()[0] for d in fields["Depends"].split(",") if d.strip()}
    root = os.path.join(work, "deb root")
    run(["dpkg-deb", "-x", deb, root])
    listing = run(["dpkg-deb", "-c", deb]).stdout
    for f in ("./usr/bin/udfc", "./usr/bin/udf-link", "./usr/bin/udf-run", "./usr/lib/libudf_runtime.so.3",
              "./usr/lib/libudf_frontend_ir.so", "./usr/include/udf/runtime.h", "./usr/include/udf/abi/metric_v1.h",
              "./usr/lib/cmake/udf/udfConfig.cmake", "./usr/lib/pkgconfig/udf-runtime.pc",
              "./usr/share/udf/kernels/scan_v1_f32_f32_min.ltoir", "./usr/share/udf/kernels/merge_v1_min.ltoir",
              "./usr/share/udf/metrics/l2.udfa"):
        check(f in listing, "DEB holds " + f)
    required = set()
    own = set()
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as fh:
                if fh.read(4) != b"\x7fELF":
                    continue
            own.add(name)
            dyn = subprocess.run(["readelf", "-d", p], stdout=subprocess.PIPE, text=True).stdout
            runpaths = []
            for m in re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", dyn):
                runpaths += [d.replace("$ORIGIN", dirpath) for d in m.split(":") if d]
            for lib in needed_libs(p):
                if lib in own or os.path.exists(os.path.join(root, "usr", "lib", lib)):
                    continue  # shipped in the package itself
                pkg = owner_package(lib, runpaths)
                check(pkg is not None, "%s needs %s, which a Debian package provides (%s)" % (name, lib, pkg))
                if pkg:
                    required.add(pkg)
    required = {p.split(":")[0] for p in required}
    check(required <= depends, "Depends covers every needed library's package: needed %s, declared %s"
          % (sorted(required), sorted(depends)))
    check(depends <= required, "Depends claims nothing no file needs: %s" % sorted(depends - required))
    sim = subprocess.run(["apt-get", "install", "--simulate", "-q", deb], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    check(sim.returncode == 0 and "Inst udf" in sim.stdout, "apt-get install --simulate accepts the package")
    return summary()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compiles every example (examples/*.cu, *.mlir, *.ll) with the flags of its first line.

    compile-examples.py EXAMPLES_DIR OUT_DIR ARCHS -- UDFC-COMMAND...

Each example's first line is `// udfc: FLAGS` (`; udfc: FLAGS` in LLVM IR).  For each example (found by
glob, so new ones are covered), runs `UDFC-COMMAND NAME.cu -o OUT_DIR/NAME.udfa
--arch ARCHS FLAGS`, then `UDFC-COMMAND --inspect` on the result, and prints

    NAME: symbol=SYMBOL archs=sm_80,sm_90 captures=N finalize=F order=O

NAME is the file name without .cu, with the extension for other kinds
(weighted_l2.mlir), so that the versions of one example do not collide.

UDFC-COMMAND is normally the lit substitution %udfc, which validates every
manifest against the schema.  Exit status 1 if any example fails.
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys


def main(argv):
    if "--" not in argv or argv.index("--") != 3:
        sys.stderr.write("usage: compile-examples.py EXAMPLES_DIR OUT_DIR ARCHS -- UDFC-COMMAND...\n")
        return 2
    examples, out_dir, archs = argv[:3]
    udfc = argv[4:]
    sources = sorted(sum((glob.glob(os.path.join(examples, p)) for p in ("*.cu", "*.mlir", "*.ll")), []))
    if not sources:
        sys.stderr.write("compile-examples: error: no examples in %s\n" % examples)
        return 1
    os.makedirs(out_dir, exist_ok=True)
    failed = 0
    for src in sources:
        name = os.path.basename(src)
        if name.endswith(".cu"):
            name = name[:-3]
        with open(src, encoding="utf-8") as f:
            first = f.readline().rstrip("\n")
        m = re.match(r"^(?://|;) udfc:(.*)$", first)
        if not m:
            sys.stdout.write("%s: error: the first line is not '// udfc: FLAGS' ('; udfc: FLAGS' in LLVM IR)\n" % name)
            failed += 1
            continue
        out = os.path.join(out_dir, name + ".udfa")
        cmd = udfc + [src, "-o", out, "--arch", archs] + shlex.split(m.group(1))
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            sys.stdout.write("%s: error: udfc exited %d:\n%s" % (name, r.returncode, r.stdout.decode(errors="replace")))
            failed += 1
            continue
        r = subprocess.run(udfc + ["--inspect", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            sys.stdout.write("%s: error: --inspect exited %d:\n%s" % (name, r.returncode, r.stderr.decode(errors="replace")))
            failed += 1
            continue
        m = json.loads(r.stdout)
        sys.stdout.write("%s: symbol=%s archs=%s captures=%d finalize=%s elem=%s acc=%s order=%s\n" % (
            name, m["symbol"], ",".join(t["arch"] for t in m["targets"]), len(m["captures"]), m["finalize"],
            m["element_type"], m["accumulator_type"], m["order"]))
    sys.stdout.write("compiled %d of %d examples\n" % (len(sources) - failed, len(sources)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

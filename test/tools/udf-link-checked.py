#!/usr/bin/env python3
"""Runs udf-link and checks every module it writes.

    udf-link-checked.py --udf-link UDF_LINK --udfc UDFC --schema MODULE_SCHEMA -- UDF-LINK-ARGS...

This is the lit substitution %udf-link.  udf-link runs with the same
arguments, standard input, output and error, and its exit status is passed
through.  Then, when it exited 0 and wrote an output (-o FILE, not --dry-run):

  * --emit module (the default): `udfc --inspect FILE` prints the module
    manifest, which must pass schemas/udf-module-v1.schema.json; the module
    must hold one fatbin per manifest image, each must parse (fatbin-info.py)
    and hold exactly one cubin per manifest arch, and every manifest entry must
    be a function symbol of every cubin of its image;
  * --emit fatbin: the fatbin must parse and hold only cubins;
  * --emit cubin: the file must be an ELF cubin.

Any failure is reported on standard error and the wrapper exits 97, so that
no test can pass by accident.
"""
import importlib.util
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK_FAILED = 97

# udf-link's options that take a value (tools/udf-link/udf-link.cpp).
VALUE_OPTIONS = {"-o", "--output", "--arch", "--emit", "--kernel-pack", "-MF", "-MT", "--MF", "--MT",
                 "--diagnostics-format", "--diagnostics-file", "--max-k", "-j", "--jobs"}


def load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scan(args):
    """(output, emit, dry_run) as udf-link's command line gives them."""
    output, emit, dry = None, "module", False
    i = 0
    while i < len(args):
        a, value = args[i], None
        name = a
        if a.startswith("--") and "=" in a:
            name, value = a.split("=", 1)
        elif a.startswith("-o") and len(a) > 2:
            name, value = "-o", a[2:]
        elif a in VALUE_OPTIONS:
            value = args[i + 1] if i + 1 < len(args) else None
            i += 1
        if name in ("-o", "--output"):
            output = value
        elif name == "--emit":
            emit = value
        elif name == "--dry-run":
            dry = True
        i += 1
    return output, emit, dry


def fail(msg):
    sys.stderr.write("udf-link-checked: error: %s\n" % msg)
    return CHECK_FAILED


def check_module(udfc, schema, output):
    proc = subprocess.run([udfc, "--inspect", output], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        return fail("udf-link wrote '%s' but udfc cannot inspect it:\n%s"
                    % (output, proc.stderr.decode("utf-8", errors="replace")))
    text = proc.stdout.decode("utf-8", errors="replace")
    vm = load("validate_manifest", "validate-manifest.py")
    errors = vm.validate_text(vm.load_validator(schema), text, output)
    for e in errors:
        sys.stderr.write("udf-link-checked: error: %s: module manifest fails the schema: %s\n" % (output, e))
    if errors:
        return CHECK_FAILED
    manifest = json.loads(text)
    fi = load("fatbin_info", "fatbin-info.py")
    with open(output, "rb") as f:
        data = f.read()
    try:
        fats = fi.fatbins_of_module(data)
        if len(fats) != len(manifest["images"]):
            return fail("%s: %d fatbin sections; the manifest lists %d images" % (output, len(fats), len(manifest["images"])))
        for n, fat in enumerate(fats):
            archs = []
            for kind, arch, payload, csize, _name in fi.images(fat):
                if kind != "cubin" or csize:
                    return fail("%s: fatbin %d holds a %s%s image for sm_%d; expected only uncompressed cubins"
                                % (output, n, kind, " compressed" if csize else "", arch))
                archs.append("sm_%d" % arch)
                funcs = {n for _b, n in fi.elf_functions(payload)}
                missing = [e["name"] for e in manifest["entries"] if e["image"] == n and e["name"] not in funcs]
                if missing:
                    return fail("%s: the sm_%d cubin of image %d lacks entries %s" % (output, arch, n, ", ".join(missing)))
            if sorted(archs) != sorted(manifest["archs"]) or len(set(archs)) != len(archs):
                return fail("%s: fatbin %d holds cubins for %s; the manifest says %s" % (output, n, archs, manifest["archs"]))
    except fi.Malformed as e:
        return fail("%s: malformed fatbin: %s" % (output, e))
    return 0


def check_image(output, emit):
    fi = load("fatbin_info", "fatbin-info.py")
    with open(output, "rb") as f:
        data = f.read()
    try:
        if emit == "cubin":
            if data[:4] != b"\x7fELF":
                return fail("%s: --emit cubin wrote no ELF file" % output)
            fi.elf_functions(data)
        else:
            for kind, arch, _p, _c, _n in fi.images(data):
                if kind != "cubin":
                    return fail("%s: the fatbin holds a %s image for sm_%d" % (output, kind, arch))
    except fi.Malformed as e:
        return fail("%s: malformed %s: %s" % (output, emit, e))
    return 0


def main(argv):
    opts = {"--udf-link": None, "--udfc": None, "--schema": os.path.join(HERE, "..", "..", "schemas",
                                                                         "udf-module-v1.schema.json")}
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] in opts and i + 1 < len(argv):
            opts[argv[i]] = argv[i + 1]
            i += 2
        else:
            sys.stderr.write("udf-link-checked: error: unexpected argument '%s'\n" % argv[i])
            return 2
    if opts["--udf-link"] is None or opts["--udfc"] is None or i >= len(argv):
        sys.stderr.write("udf-link-checked: error: usage: udf-link-checked.py --udf-link UDF_LINK --udfc UDFC "
                         "[--schema SCHEMA] -- ARGS...\n")
        return 2
    args = argv[i + 1:]
    output, emit, dry = scan(args)
    sys.stdout.flush()
    rc = subprocess.call([opts["--udf-link"]] + args)
    if rc != 0 or dry or output is None or output == "-":
        return rc
    if not os.path.isfile(output):
        return fail("udf-link exited 0 but did not write '%s'" % output)
    if emit == "module":
        return check_module(opts["--udfc"], opts["--schema"], output)
    return check_image(output, emit)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Runs udfc and validates every manifest it produces against the schema.

    udfc-checked.py --udfc UDFC [--schema SCHEMA] -- UDFC-ARGS...

This is the lit substitution %udfc.  udfc runs with the same arguments,
standard input, standard output and standard error, and its exit status is
passed through.  Then, when udfc exited 0:

  * if it wrote an artifact (-o FILE, -oFILE, --output FILE, --output=FILE),
    `udfc --inspect FILE` prints its manifest, which is validated;
  * if it was an --inspect run, the manifest it printed is validated.

A manifest that fails the schema is reported on standard error, one line per
error, and the wrapper exits 97 so that no test can pass by accident.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
VALIDATION_FAILED = 97

# udfc's options that take a value (tools/udfc/udfc.cpp).  Their values are
# skipped when looking for -o, so that `-e "... -o ..."` is not misread.
VALUE_OPTIONS = {
    "-e", "--source-string", "-o", "--output", "--arch", "-I", "--include-dir", "-D", "--define",
    "--symbol", "--finalize", "--elem", "--acc", "--order", "--initial", "--coarse-metric",
    "--capture", "--input-kind", "--inspect", "-MF", "-MT", "--MF", "--MT", "--diagnostics-format",
    "--diagnostics-file",
}
SHORT_VALUE_OPTIONS = {"-e", "-o", "-I", "-D"}


def scan(args):
    """Returns (output, inspect) as udfc's command line gives them (last one wins)."""
    output = inspect = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            break
        value = None
        name = a
        if a.startswith("--") and "=" in a:
            name, value = a.split("=", 1)
        elif a[:2] in SHORT_VALUE_OPTIONS and len(a) > 2:
            name, value = a[:2], a[2:]
        elif a in VALUE_OPTIONS:
            if i + 1 < len(args):
                value = args[i + 1]
            i += 1
        if name in ("-o", "--output"):
            output = value
        elif name == "--inspect":
            inspect = value
        i += 1
    return output, inspect


def load_validator(schema_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("validate_manifest", os.path.join(HERE, "validate-manifest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, module.load_validator(schema_path)


def check(module, validator, text, what):
    errors = module.validate_text(validator, text, what)
    for e in errors:
        sys.stderr.write("udfc-checked: error: %s: manifest fails the schema: %s\n" % (what, e))
    return not errors


def main(argv):
    udfc = None
    schema = os.path.join(HERE, "..", "..", "schemas", "udf-artifact-v1.schema.json")
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--udfc" and i + 1 < len(argv):
            udfc = argv[i + 1]
            i += 2
        elif argv[i] == "--schema" and i + 1 < len(argv):
            schema = argv[i + 1]
            i += 2
        else:
            sys.stderr.write("udfc-checked: error: unexpected argument '%s' (usage: udfc-checked.py "
                             "--udfc UDFC [--schema SCHEMA] -- ARGS...)\n" % argv[i])
            return 2
    if udfc is None or i >= len(argv):
        sys.stderr.write("udfc-checked: error: usage: udfc-checked.py --udfc UDFC [--schema SCHEMA] -- ARGS...\n")
        return 2
    args = argv[i + 1:]
    output, inspect = scan(args)

    sys.stdout.flush()
    if inspect is None:
        rc = subprocess.call([udfc] + args)
        stdout = None
    else:
        proc = subprocess.run([udfc] + args, stdout=subprocess.PIPE)
        rc, stdout = proc.returncode, proc.stdout
        sys.stdout.buffer.write(stdout)
        sys.stdout.buffer.flush()
    if rc != 0:
        return rc

    module, validator = load_validator(schema)
    ok = True
    if stdout is not None:
        text = stdout.decode("utf-8", errors="replace")
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and "kind" in doc:
            ok &= check(module, validator, text, "udfc --inspect %s" % inspect)
    if output is not None and output != "-" and os.path.isfile(output):
        proc = subprocess.run([udfc, "--inspect", output], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            sys.stderr.write("udfc-checked: error: udfc wrote '%s' but cannot inspect it:\n%s"
                             % (output, proc.stderr.decode("utf-8", errors="replace")))
            return VALIDATION_FAILED
        ok &= check(module, validator, proc.stdout.decode("utf-8", errors="replace"), output)
    elif output is not None and output != "-":
        sys.stderr.write("udfc-checked: error: udfc exited 0 but did not write '%s'\n" % output)
        return VALIDATION_FAILED
    return 0 if ok else VALIDATION_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Validates what a udf tool wrote with --diagnostics-format=json or =sarif.

    validate-diagnostics.py --format json|sarif [FILE]   (standard input when no FILE)

json:  every line must be one object valid against schemas/udf-diagnostic-v1.schema.json.
sarif: the whole input must be one SARIF log valid against
       schemas/udf-sarif-2.1.0-profile.schema.json, every result's ruleIndex must
       name the rule of its ruleId, and every rule must be used.  With
       --official-schema FILE (or $UDF_SARIF_SCHEMA) it is also validated against
       OASIS's sarif-schema-2.1.0.json (draft-04), which no Debian or PyPI package
       ships, so it is not part of the repository.

Prints a summary line ("N diagnostic(s): UDF1001 error, ...") on success; exit
status 0 when valid, 1 when not, 2 for a bad command line.
"""
import argparse
import json
import os
import sys

import jsonschema

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def validator(name):
    with open(os.path.join(ROOT, "schemas", name), encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def fail(msg):
    print("validate-diagnostics: error: " + msg, file=sys.stderr)
    sys.exit(1)


def check(v, doc, where):
    errors = sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path))
    for e in errors:
        print("%s: error: %s: %s" % (where, "/".join(str(p) for p in e.absolute_path) or "(root)", e.message),
              file=sys.stderr)
    if errors:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", required=True, choices=["json", "sarif"])
    ap.add_argument("--official-schema", default=os.environ.get("UDF_SARIF_SCHEMA"))
    ap.add_argument("file", nargs="?")
    a = ap.parse_args()
    text = open(a.file, encoding="utf-8").read() if a.file else sys.stdin.read()
    seen = []
    if a.format == "json":
        v = validator("udf-diagnostic-v1.schema.json")
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                fail("line %d is empty: JSON Lines have one object per line" % n)
            try:
                doc = json.loads(line)
            except ValueError as e:
                fail("line %d is not JSON: %s" % (n, e))
            check(v, doc, "line %d" % n)
            seen.append("%s %s" % (doc["code"], doc["severity"]))
    else:
        try:
            doc = json.loads(text)
        except ValueError as e:
            fail("not one JSON document: %s" % e)
        check(validator("udf-sarif-2.1.0-profile.schema.json"), doc, "sarif")
        if a.official_schema:
            with open(a.official_schema, encoding="utf-8") as f:
                official = json.load(f)
            check(jsonschema.Draft4Validator(official), doc, "sarif (official schema)")
        run = doc["runs"][0]
        rules = run["tool"]["driver"]["rules"]
        used = set()
        for i, r in enumerate(run["results"]):
            if rules[r["ruleIndex"]]["id"] != r["ruleId"]:
                fail("result %d: ruleIndex %d is rule %s, not %s" % (i, r["ruleIndex"], rules[r["ruleIndex"]]["id"],
                                                                      r["ruleId"]))
            used.add(r["ruleIndex"])
            seen.append("%s %s" % (r["ruleId"], r["level"]))
        if used != set(range(len(rules))):
            fail("rules without results: %s" % [rules[i]["id"] for i in set(range(len(rules))) - used])
        if run["invocations"][0]["executionSuccessful"] != (run["invocations"][0]["exitCode"] == 0):
            fail("executionSuccessful disagrees with exitCode")
    print("%d diagnostic(s)%s" % (len(seen), (": " + ", ".join(seen)) if seen else ""))


if __name__ == "__main__":
    main()

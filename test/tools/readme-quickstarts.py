#!/usr/bin/env python3
"""Checks that README.md's quickstarts are the files the suite runs.

    readme-quickstarts.py SOURCE_DIR

Each quickstart in README.md is a fenced code block right after a line
`<!-- quickstart: PATH -->`; PATH (relative to SOURCE_DIR) is the file the
suite runs (ctest `demo` runs examples/cli/quickstart.sh through
scripts/demo-steps.sh, `package_consumer` builds examples/cmake, pytest's
test_quickstart.py runs examples/python/quickstart.py).  The block must equal
the file, byte for byte, and every quickstart file must be in README.md once.
Exit status 1, naming the file and the first differing line, otherwise 0.
"""
import difflib
import os
import re
import sys

QUICKSTARTS = ("examples/cli/quickstart.sh", "examples/cmake/CMakeLists.txt", "examples/python/quickstart.py")
MARKER = re.compile(r"^<!-- quickstart: (\S+) -->\n```[a-z]*\n(.*?)^```$", re.M | re.S)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: readme-quickstarts.py SOURCE_DIR\n")
        return 2
    src = argv[1]
    with open(os.path.join(src, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    blocks = {}
    failed = matched = 0
    for m in MARKER.finditer(readme):
        path, block = m.group(1), m.group(2)
        if path in blocks:
            print(f"README.md: the quickstart {path} is included twice")
            failed += 1
        blocks[path] = block
    for path in QUICKSTARTS:
        if path not in blocks:
            print(f"README.md: no block after '<!-- quickstart: {path} -->'")
            failed += 1
            continue
        with open(os.path.join(src, path), encoding="utf-8") as f:
            want = f.read()
        if blocks[path] != want:
            diff = difflib.unified_diff(want.splitlines(True), blocks[path].splitlines(True), path, "README.md", n=1)
            print(f"README.md: the quickstart block differs from {path}:\n{''.join(diff)}")
            failed += 1
        else:
            matched += 1
    for path in blocks.keys() - set(QUICKSTARTS):
        print(f"README.md: '<!-- quickstart: {path} -->' names no quickstart the suite runs")
        failed += 1
    print(f"{matched} of {len(QUICKSTARTS)} quickstarts match README.md")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

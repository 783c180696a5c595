#!/usr/bin/env python3
"""Checks the shape of the code: short functions, small runtime files, comments
that state rules rather than measurements, and includes that run down the
layers.  Usage: code_shape.py SRC (the repository root).

Prints every violation as `file:line: rule: message` and exits 1 when there is
any; exits 0 and prints a one-line summary when there is none.
"""

import io
import os
import re
import sys
import tokenize

import lizard

# The layers, lowest first.  A file belongs to the first row whose prefix it
# starts with; an #include of "udf/<dir>/..." (or of a header that lives in
# another layer's folder) must name a layer of a lower rank.  Layers of the
# same rank are independent: neither may include the other.  The runtime's
# sub-layers (lib/runtime/*/) are ranked among themselves the same way; its
# public headers (include/udf/runtime*.h) are the types every sub-layer uses.
LAYERS = [
    # (layer,            rank, path prefixes that belong to it)
    ("support",          0, ("lib/support/", "include/udf/support/")),
    ("abi",              0, ("include/udf/abi/",)),
    ("kernels",          1, ("include/udf/kernels/", "kernels/")),
    ("artifact",         2, ("lib/artifact/", "include/udf/artifact/")),
    ("cudalibs",         2, ("lib/cudalibs/", "include/udf/cudalibs/")),
    ("compile",          3, ("lib/compile/", "include/udf/compile/")),
    ("link",             3, ("lib/link/", "include/udf/link/")),
    ("data",             3, ("lib/data/", "include/udf/data/")),
    ("runtime API",      4, ("include/udf/runtime",)),
    ("runtime/cuda",     5, ("lib/runtime/cuda/",)),
    ("runtime/module",   6, ("lib/runtime/module/",)),
    ("runtime/index",    7, ("lib/runtime/index/",)),
    ("runtime/shards",   8, ("lib/runtime/shards/",)),
    ("runtime/capi",     9, ("lib/runtime/capi/",)),
    ("runtime",          9, ("lib/runtime/",)),
    ("driver",          10, ("lib/driver/", "include/udf/driver/")),
    ("tools",           11, ("tools/",)),
]

# Where a quoted include that is not next to the file is found: the runtime
# names its sub-layers' headers from lib/runtime ("cuda/launch.h").
INCLUDE_DIRS = ("lib/runtime",)

MAX_FUNCTION_LINES = 120
MAX_RUNTIME_FILE_LINES = 600

# Functions allowed to be longer, with the reason.
LONG_FUNCTION_EXCEPTIONS = {
    # One case per LLVM 7 bitcode opcode: a flat dispatch table, read one
    # case at a time; splitting it would only scatter the table.
    ("lib/compile/llvm7_writer.cpp", "udf::ir::Writer::inst"),
}

FUNCTION_ROOTS = ("lib", "kernels")
FUNCTION_EXTS = (".cpp", ".h", ".cu", ".cuh", ".py")
COMMENT_ROOTS = ("lib", "kernels", "include")
CPP_EXTS = (".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".def", ".inc", ".cpp.in", ".h.in")
INCLUDE_ROOTS = ("lib", "kernels", "include", "tools")
SKIP_DIRS = {"__pycache__", ".git"}

# A measured number: a number with a unit of time, speed-up, share, size or
# rate ("8.13 ms", "1.4x", "37%", "2.5 GB/s", "120 QPS"), or a log item.
# Sizes and counts that are rules ("16-byte aligned", "sm_90", "2^32",
# "k <= 1024", "32x32 tile", "1 x dim") do not match: a size unit needs a
# number with a fraction or a rate ("/s"), so does a time in seconds (a
# timeout of "10 s" is a rule), and "x" must follow the number and
# end the word.  Quoted text in a comment (an example of output) is skipped.
_NUM = r"(?<![\w.^/])\d+(?:\.\d+)?"
MEASURED = re.compile(
    r"(?:"
    + _NUM + r"\s?(?:ms|us|µs|ns)\b(?!-)"                         # times
    + r"|(?<![\w.^/])\d+\.\d+\s?(?:s|sec|seconds)\b(?!-)"            # measured seconds
    + r"|" + _NUM + r"x(?![\w-])"                                 # speed-ups
    + r"|" + _NUM + r"\s?%"                                       # shares
    + r"|" + _NUM + r"\s?(?:[KMGT]i?B)/s\b"                       # rates
    + r"|(?<![\w.^/])\d+\.\d+\s?(?:[KMGT]i?B)\b"                  # measured sizes
    + r"|" + _NUM + r"\s?(?:[KM]?QPS|qps)\b"                      # throughput
    + r"|\blog item\s*\d+"
    + r")"
)


QUOTED = re.compile(r'"[^"]*"')


def rel(src, path):
    return os.path.relpath(path, src).replace(os.sep, "/")


def walk(src, roots, exts):
    for root in roots:
        top = os.path.join(src, root)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                if name.endswith(exts):
                    yield os.path.join(dirpath, name)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def check_functions(src, out):
    for path in walk(src, FUNCTION_ROOTS, FUNCTION_EXTS):
        r = rel(src, path)
        # lizard reads CUDA as C++ when the name says C++.
        name = path + ".cpp" if path.endswith((".cu", ".cuh")) else path
        result = lizard.analyze_file.analyze_source_code(name, read(path))
        for fn in result.function_list:
            if fn.length <= MAX_FUNCTION_LINES or (r, fn.name) in LONG_FUNCTION_EXCEPTIONS:
                continue
            out.append((r, fn.start_line, "function-length",
                        f"{fn.name} is {fn.length} lines (at most {MAX_FUNCTION_LINES})"))


def check_runtime_files(src, out):
    for path in walk(src, ("lib/runtime",), ("",)):
        if os.path.basename(path) == "CMakeLists.txt":
            continue
        n = read(path).count("\n")
        if n > MAX_RUNTIME_FILE_LINES:
            out.append((rel(src, path), 1, "file-length",
                        f"{n} lines (a file in lib/runtime has at most {MAX_RUNTIME_FILE_LINES})"))


def cpp_comments(text):
    """Yields (line, comment text) for each // and /* */ comment, skipping
    string, character and raw string literals."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            yield line, text[i + 2:j]
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j
            body = text[i + 2:j]
            for k, part in enumerate(body.split("\n")):
                yield line + k, part
            line += body.count("\n")
            i = j + 2
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\ \n]{0,16})\(', text[i:])
            if not m:
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            line += text.count("\n", i, j)
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1


def python_comments(text):
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                yield tok.start[0], tok.string[1:]
    except (tokenize.TokenError, SyntaxError):
        return


def check_comments(src, out):
    for path in walk(src, COMMENT_ROOTS, CPP_EXTS + (".py",)):
        text = read(path)
        comments = python_comments(text) if path.endswith(".py") else cpp_comments(text)
        for line, comment in comments:
            m = MEASURED.search(QUOTED.sub('""', comment))
            if m:
                out.append((rel(src, path), line, "measured-number",
                            f"comment holds a measured number ({m.group(0).strip()!r}): "
                            "state the rule; numbers go in commit messages and docs"))


INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def layer_of(path):
    for name, rank, prefixes in LAYERS:
        if path.startswith(prefixes):
            return name, rank
    return None


def check_includes(src, out):
    for path in walk(src, INCLUDE_ROOTS, CPP_EXTS):
        r = rel(src, path)
        mine = layer_of(r)
        if mine is None:
            continue
        text = read(path)
        for m in INCLUDE.finditer(text):
            target = m.group(1)
            if target.startswith("udf/"):
                theirs = layer_of("include/" + target)
            else:
                # A quoted include next to the file, or one of another folder
                # of lib/ ("../link/x.h").
                candidates = [os.path.join(os.path.dirname(path), target)]
                candidates += [os.path.join(src, d, target) for d in INCLUDE_DIRS]
                found = [os.path.normpath(c) for c in candidates if os.path.exists(c)]
                theirs = layer_of(rel(src, found[0])) if found else None
            if theirs is None or theirs[0] == mine[0]:
                continue
            if theirs[1] >= mine[1]:
                how = "upward" if theirs[1] > mine[1] else "sideways"
                line = text.count("\n", 0, m.start()) + 1
                out.append((r, line, "layer",
                            f"{mine[0]} includes {target} of {theirs[0]} ({how}: "
                            f"{mine[0]} is rank {mine[1]}, {theirs[0]} rank {theirs[1]})"))


def main(argv):
    if len(argv) != 2:
        print("usage: code_shape.py SRC", file=sys.stderr)
        return 2
    src = argv[1]
    out = []
    check_functions(src, out)
    check_runtime_files(src, out)
    check_comments(src, out)
    check_includes(src, out)
    for path, line, rule, message in sorted(out, key=lambda v: (v[2], v[0], v[1])):
        print(f"{path}:{line}: {rule}: {message}")
    if out:
        print(f"code_shape: {len(out)} violation(s)", file=sys.stderr)
        return 1
    print("code_shape: functions, runtime files, comments and layers are in shape")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

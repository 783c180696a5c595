// Command lines as build systems write them: response files (@FILE) with
// GCC/clang quoting rules, and GCC's dependency-file flags (-MD -MF -MT -MP),
// which CLI11 cannot declare (it takes one-letter short options only).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "udf/support/error.h"

namespace udf {

/// Splits `text` into arguments the way GCC and clang read a response file:
/// whitespace separates arguments; '...' and "..." group (quotes may sit
/// inside an argument: a'b c'd is one argument); a backslash takes the next
/// character literally, inside quotes too.  An unterminated quote is an error
/// at `source:line` (exit 2).
Expected<std::vector<std::string>> split_gnu_command_line(std::string_view text, const std::string& source);

/// The flags a UDF source writes in its first line, as text: what follows
/// `udfc:` in a comment `// udfc: FLAGS` (CUDA, MLIR) or `; udfc: FLAGS`
/// (LLVM IR text), blanks allowed before each part; empty for `// udfc:`
/// alone.  None when the first line is no such comment, or holds a NUL byte
/// (binary input: LTO-IR, LLVM bitcode).  Split them with split_gnu_command_line.
std::optional<std::string_view> udfc_first_line_comment(std::string_view text);

/// Replaces every argument `@FILE` with the arguments in FILE, recursively
/// (a nested @FILE is relative to the working folder, as with GCC).  A
/// missing or unreadable file, a malformed one, recursion (a file reaching
/// itself) or more than 64 levels is a usage error naming the file.
/// Arguments after `--` are taken as they are.
Expected<std::vector<std::string>> expand_response_files(const std::vector<std::string>& args);

/// GCC's dependency flags, rewritten for CLI11: -MD -> --MD, -MP -> --MP,
/// -MF FILE / -MFFILE -> --MF FILE, -MT T / -MTT -> --MT T.  Other arguments
/// (and everything after `--`) are left alone.
std::vector<std::string> rewrite_dependency_flags(const std::vector<std::string>& args);

}  // namespace udf

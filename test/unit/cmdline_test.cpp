// Command lines as build systems write them: response files (GCC quoting,
// nesting, recursion, bad files), GCC's dependency flags, and Make depfiles
// (escaping, -MP), plus staged outputs that are written all or nothing.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "udf/support/cmdline.h"
#include "udf/support/depfile.h"
#include "udf/support/fs.h"

namespace udf {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

Args split(const std::string& text) {
  auto r = split_gnu_command_line(text, "t.rsp");
  EXPECT_TRUE(r) << (r ? "" : r.error().message());
  return r ? *r : Args{};
}

TEST(SplitGnu, WhitespaceQuotesAndBackslashes) {
  EXPECT_EQ(split("  a   b\tc\n\nd  "), (Args{"a", "b", "c", "d"}));
  EXPECT_EQ(split("'a b' \"c d\""), (Args{"a b", "c d"}));
  EXPECT_EQ(split("x'a b'y\"c\"z"), (Args{"xa bycz"}));
  EXPECT_EQ(split("a\\ b c\\\\d"), (Args{"a b", "c\\d"}));
  EXPECT_EQ(split("\"a \\\" b\" 'it\\'s'"), (Args{"a \" b", "it's"}));
  EXPECT_EQ(split("'' \"\" x"), (Args{"", "", "x"}));  // empty quotes are empty arguments
  EXPECT_EQ(split("'multi\nline' next"), (Args{"multi\nline", "next"}));
  EXPECT_EQ(split("a\\\nb"), (Args{"ab"}));  // a backslash-newline joins
  EXPECT_EQ(split(""), Args{});
  EXPECT_EQ(split("-D NAME=\"a b\" --capture 'w:f32[]'"), (Args{"-D", "NAME=a b", "--capture", "w:f32[]"}));
}

// --flags-from-first-line: the first line's `// udfc:` or `; udfc:` comment,
// blanks allowed around each part; nothing else is one.
TEST(FirstLineFlags, OnlyAUdfcCommentInTheFirstLine) {
  using std::string_view_literals::operator""sv;
  EXPECT_EQ(udfc_first_line_comment("// udfc: --order max\nint x;"), " --order max");
  EXPECT_EQ(udfc_first_line_comment("  //udfc:--elem i8"), "--elem i8");
  EXPECT_EQ(udfc_first_line_comment(";; udfc: --capture w:f32[]\n"), " --capture w:f32[]");
  EXPECT_EQ(udfc_first_line_comment("// udfc:\n"), "");
  for (std::string_view no : {""sv, "\n// udfc: --order max"sv, "// udfc --order max"sv, "/* udfc: --order max */"sv,
                              "# udfc: --order max"sv, "// UDFC: --order max"sv, "; udf: x"sv, ";;;"sv, "//"sv,
                              "// udfc: \0x"sv, "extern \"C\" // udfc: x"sv})
    EXPECT_FALSE(udfc_first_line_comment(no).has_value()) << no;
}

TEST(SplitGnu, UnterminatedQuoteIsAUsageErrorAtItsLine) {
  auto r = split_gnu_command_line("ok\nsecond 'open\nthird", "flags.rsp");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind(), ErrorKind::Usage);
  const auto& d = r.error().diagnostics().front();
  EXPECT_EQ(d.code, DiagCode::ResponseFile);
  EXPECT_EQ(d.file, "flags.rsp");
  EXPECT_EQ(d.line, 2);
  EXPECT_NE(d.message.find("unterminated ' quote"), std::string::npos);
  EXPECT_FALSE(split_gnu_command_line("\"never closed", "x"));
}

class ResponseFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("udf-rsp-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    auto p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  fs::path dir_;
};

TEST_F(ResponseFiles, ExpandsInPlaceAndRecursively) {
  auto inner = write("inner.rsp", "-I 'dir with space' -DX=1");
  auto outer = write("outer.rsp", "a.cu @" + inner + " --arch sm_90");
  auto r = expand_response_files({"before", "@" + outer, "after"});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, (Args{"before", "a.cu", "-I", "dir with space", "-DX=1", "--arch", "sm_90", "after"}));
}

TEST_F(ResponseFiles, LeavesArgumentsAfterDoubleDashAndLoneAt) {
  auto f = write("f.rsp", "x");
  auto r = expand_response_files({"@", "--", "@" + f});
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (Args{"@", "--", "@" + f}));
}

TEST_F(ResponseFiles, MissingFileIsAUsageError) {
  auto r = expand_response_files({"@" + (dir_ / "missing.rsp").string()});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind(), ErrorKind::Usage);
  EXPECT_EQ(r.error().diagnostics().front().code, DiagCode::ResponseFile);
  EXPECT_NE(r.error().message().find("missing.rsp"), std::string::npos);
}

TEST_F(ResponseFiles, RecursionIsDetectedWithItsChain) {
  auto a = (dir_ / "a.rsp").string();
  auto b = write("b.rsp", "@" + a);
  write("a.rsp", "x @" + b);
  auto r = expand_response_files({"@" + a});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind(), ErrorKind::Usage);
  EXPECT_NE(r.error().message().find("includes itself"), std::string::npos);
  EXPECT_NE(r.error().message().find("a.rsp -> "), std::string::npos);
  auto self = write("self.rsp", "@" + (dir_ / "self.rsp").string());
  EXPECT_FALSE(expand_response_files({"@" + self}));
}

TEST_F(ResponseFiles, UnterminatedQuoteNamesTheFile) {
  auto f = write("bad.rsp", "--arch sm_90\n'oops");
  auto r = expand_response_files({"@" + f});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().diagnostics().front().file, f);
  EXPECT_EQ(r.error().diagnostics().front().line, 2);
}

TEST_F(ResponseFiles, BinaryFileIsRefused) {
  auto f = write("bin.rsp", std::string("a\0b", 3));
  auto r = expand_response_files({"@" + f});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("NUL"), std::string::npos);
}

TEST(DependencyFlags, RewrittenForCli11) {
  EXPECT_EQ(rewrite_dependency_flags({"-MD", "-MF", "o.d", "-MT", "t", "-MP", "x.cu"}),
            (Args{"--MD", "--MF", "o.d", "--MT", "t", "--MP", "x.cu"}));
  EXPECT_EQ(rewrite_dependency_flags({"-MFo.d", "-MTt", "-MF=x.d"}), (Args{"--MF", "o.d", "--MT", "t", "--MF", "x.d"}));
  EXPECT_EQ(rewrite_dependency_flags({"-D", "MD", "-MDX", "--", "-MD"}), (Args{"-D", "MD", "-MDX", "--", "-MD"}));
}

TEST(Depfile, EscapesAsGccDoes) {
  EXPECT_EQ(escape_make_path("/a b/c"), "/a\\ b/c");
  EXPECT_EQ(escape_make_path("x$y#z"), "x$$y\\#z");
  EXPECT_EQ(escape_make_path("tab\there"), "tab\\\there");
  EXPECT_EQ(escape_make_path("back\\ space"), "back\\\\\\ space");  // backslash before a space is doubled
  EXPECT_EQ(escape_make_path("plain/path.h"), "plain/path.h");
}

TEST(Depfile, RuleWithUniqueDepsAndPhonyTargets) {
  auto d = make_depfile("out dir/x.udfa", {"/s/x.cu", "/s/h.h", "/s/x.cu"}, false);
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, "out\\ dir/x.udfa: \\\n  /s/x.cu \\\n  /s/h.h\n");
  auto p = make_depfile("o", {"/a", "/b c"}, true);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, "o: \\\n  /a \\\n  /b\\ c\n\n/a:\n\n/b\\ c:\n");
  auto bad = make_depfile("o", {"/line\nbreak"}, false);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().diagnostics().front().code, DiagCode::WriteFailed);
}

TEST(Depfile, DependencyListIsAbsoluteNormalAndUnique) {
  DependencyList l;
  l.add("x/../y.h");
  l.add("y.h");
  l.add("-");
  l.add("");
  ASSERT_EQ(l.paths().size(), 1u);
  EXPECT_EQ(l.paths()[0], (fs::current_path() / "y.h").string());
}

TEST(OutputFiles, AllOrNothing) {
  auto dir = fs::temp_directory_path() / ("udf-out-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto a = (dir / "a.txt").string();
  ASSERT_TRUE(write_file_atomic(a, std::string("old")));
  {
    OutputFiles out;
    ASSERT_TRUE(out.stage(a, std::string("new")));
    // The second output cannot be staged (no such folder): nothing is committed.
    EXPECT_FALSE(out.stage((dir / "missing" / "b.d").string(), std::string("dep")));
  }
  auto kept = read_file(a);
  ASSERT_TRUE(kept);
  EXPECT_EQ(std::string(kept->begin(), kept->end()), "old");
  std::size_t files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u) << "a temporary file was left behind";
  {
    OutputFiles out;
    ASSERT_TRUE(out.stage(a, std::string("new")));
    ASSERT_TRUE(out.stage((dir / "b.d").string(), std::string("dep")));
    ASSERT_TRUE(out.commit());
  }
  auto now = read_file(a);
  EXPECT_EQ(std::string(now->begin(), now->end()), "new");
  EXPECT_TRUE(fs::exists(dir / "b.d"));
  fs::remove_all(dir);
}

// An output that already holds the bytes (a cache hit writing what the last
// run wrote) is not written again: the same file, its time set to now.  One
// with other bytes, other permissions or a second name is replaced as before.
TEST(OutputFiles, IdenticalTargetIsTouchedNotRewritten) {
  auto dir = fs::temp_directory_path() / ("udf-same-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto a = (dir / "a.udfm").string();
  ASSERT_TRUE(write_file_atomic(a, std::string("module bytes")));
  struct stat before {};
  ASSERT_EQ(::stat(a.c_str(), &before), 0);
  const timespec old_times[2] = {{1'000'000, 0}, {1'000'000, 0}};  // 1970: any write moves it
  ASSERT_EQ(::utimensat(AT_FDCWD, a.c_str(), old_times, 0), 0);
  auto stat_of = [](const std::string& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0);
    return st;
  };

  ASSERT_TRUE(write_file_atomic(a, std::string("module bytes")));
  struct stat same = stat_of(a);
  EXPECT_EQ(same.st_ino, before.st_ino) << "rewritten";
  EXPECT_GT(same.st_mtim.tv_sec, 1'000'000) << "its time was not set";

  ASSERT_TRUE(write_file_atomic(a, std::string("module byteZ")));  // other bytes, same size
  struct stat other = stat_of(a);
  EXPECT_NE(other.st_ino, before.st_ino);
  auto now = read_file(a);
  EXPECT_EQ(std::string(now->begin(), now->end()), "module byteZ");

  // Other permissions: replaced, with a new file's.
  ASSERT_EQ(::chmod(a.c_str(), 0600), 0);
  ASSERT_TRUE(write_file_atomic(a, std::string("module byteZ")));
  struct stat mode = stat_of(a);
  EXPECT_NE(mode.st_ino, other.st_ino);
  mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(mode.st_mode & 07777, 0666 & ~mask);

  // A second name: replaced, so that the other name keeps its bytes and time.
  const auto b = (dir / "b.udfm").string();
  ASSERT_EQ(::link(a.c_str(), b.c_str()), 0);
  ASSERT_TRUE(write_file_atomic(a, std::string("module byteZ")));
  EXPECT_NE(stat_of(a).st_ino, stat_of(b).st_ino);

  // A symbolic link in the way: replaced by the file, as before.
  const auto target = (dir / "target").string();
  ASSERT_TRUE(write_file_atomic(target, std::string("module byteZ")));
  const auto c = (dir / "c.udfm").string();
  fs::create_symlink(target, c);
  ASSERT_TRUE(write_file_atomic(c, std::string("module byteZ")));
  EXPECT_FALSE(fs::is_symlink(c));

  // Staged with another output that fails: nothing happens to it either.
  const timespec older[2] = {{2'000'000, 0}, {2'000'000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, a.c_str(), older, 0), 0);
  {
    OutputFiles out;
    ASSERT_TRUE(out.stage(a, std::string("module byteZ")));
    EXPECT_FALSE(out.stage((dir / "missing" / "a.d").string(), std::string("dep")));
  }
  EXPECT_EQ(stat_of(a).st_mtim.tv_sec, 2'000'000);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace udf

#include "udf/compile/cuda.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "udf/artifact/embedded.h"
#include "udf/cudalibs/nvrtc.h"
#include "udf/support/cuda_libs.h"
#include "udf/support/hash.h"
#include "udf/support/version.h"
#include "udf/support/watchdog.h"

namespace udf {
namespace {

constexpr const char* kPreludeName = "udf_prelude.h";
constexpr const char* kAbiHeaderName = "udf/abi/metric_v1.h";
constexpr const char* kFilterAbiHeaderName = "udf/abi/filter_v1.h";
constexpr const char* kAbiV2HeaderName = "udf/abi/metric_v2.h";
constexpr const char* kCheckFile = "<udfc abi check>";

// NVRTC options for every compile of a UDF; arch-independent and free of
// paths, so they are also what the manifest records (plus -dlto).
std::vector<std::string> base_nvrtc_options(const CudaCompileOptions& opts) {
  std::vector<std::string> o = {"-rdc=true", "-std=c++17", std::string("--pre-include=") + kPreludeName};
  for (const auto& d : opts.defines) o.push_back("-D" + d);
  o.insert(o.end(), opts.extra_nvrtc_options.begin(), opts.extra_nvrtc_options.end());
  return o;
}

std::vector<std::string> manifest_options(const CudaCompileOptions& opts) {
  auto o = base_nvrtc_options(opts);
  o.push_back("-dlto");
  return o;
}

// Runs a scope in another working folder and returns to the current one
// (by descriptor, so a renamed or long path is no problem).
class WorkingFolder {
 public:
  explicit WorkingFolder(const char* dir) : old_(::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (old_ >= 0 && ::chdir(dir) != 0) {
      ::close(old_);
      old_ = -1;
    }
  }
  ~WorkingFolder() {
    if (old_ >= 0) {
      if (::fchdir(old_) != 0) { /* nothing better to do; paths given to NVRTC were absolute */ }
      ::close(old_);
    }
  }
  WorkingFolder(const WorkingFolder&) = delete;
  WorkingFolder& operator=(const WorkingFolder&) = delete;

 private:
  int old_;
};

struct ParsedLog {
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
};

// NVRTC log lines look like
//   dir/udf.cu(2): error: identifier "yy" is undefined
//       float d=x-yy; return acc + d*d; }      <- the source line, indented by 2
//                 ^                            <- caret under the column
// or "At end of source: error: ...".  Map them to file:line:col.  "catastrophic
// error" (#error, a missing header) is an error; "Command-line error: ..." has
// no location.
ParsedLog parse_nvrtc_log(const std::string& log, const std::string& file) {
  static const std::regex head(R"(^(.*)\((\d+)\): (catastrophic error|error|warning)(?: #[\w-]+)?: (.*)$)");
  static const std::regex eos(R"(^At end of source: (catastrophic error|error|warning)(?: #[\w-]+)?: (.*)$)");
  static const std::regex cmdline(R"(^Command-line error: (.*)$)");
  ParsedLog out;
  std::vector<std::string> lines;
  for (size_t pos = 0; pos <= log.size();) {
    size_t nl = log.find('\n', pos);
    if (nl == std::string::npos) nl = log.size();
    lines.push_back(log.substr(pos, nl - pos));
    pos = nl + 1;
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    Diagnostic d(DiagCode::CompileError, "");
    bool is_error = false;
    if (std::regex_match(lines[i], m, head)) {
      d.file = m[1];
      d.line = std::stoi(m[2]);
      is_error = m[3] != "warning";
      d.message = m[4];
      // A source echo followed by a caret line gives the column.
      if (i + 2 < lines.size() && lines[i + 2].find_first_not_of(' ') != std::string::npos &&
          lines[i + 2].find_first_not_of(' ') == lines[i + 2].find('^') && lines[i + 2].find('^') >= 2) {
        d.column = static_cast<int>(lines[i + 2].find('^')) - 2 + 1;
        i += 2;
      }
    } else if (std::regex_match(lines[i], m, eos)) {
      d.file = file;
      is_error = m[1] != "warning";
      d.message = std::string(m[2]) + " (at end of source)";
    } else if (std::regex_match(lines[i], m, cmdline)) {
      is_error = true;
      d.message = "compiler command line: " + std::string(m[1]);
    } else {
      continue;
    }
    if (!is_error) d.code = DiagCode::CompileWarning;
    (is_error ? out.errors : out.warnings).push_back(std::move(d));
  }
  return out;
}

// Rewrites NVRTC errors that are really ABI mistakes into ABI messages.
void explain_abi_errors(std::vector<Diagnostic>& errs, const UdfMetadata& meta, const std::string& symbol,
                        const CudaSource& src) {
  static const std::regex undef_capture(R"re(identifier "udf_capture_(\w+)" is undefined)re");
  for (auto& d : errs) {
    if (meta.kind == UdfKind::Metric && !meta.v2() && d.message.find("identifier \"int64_t\" is undefined") != std::string::npos)
      d.notes.push_back("int64_t belongs to the filter ABI: compile a filter with --kind filter");
    if (!meta.v2() && (d.message.find("\"udf_ctx_v2\" is undefined") != std::string::npos ||
                       d.message.find("\"udf_state_v2\" is undefined") != std::string::npos))
      d.notes.push_back("udf_ctx_v2 and udf_state_v2 belong to metric ABI v2: pass --abi v2 (or --shape state|vector)");
    std::smatch m;
    if (std::regex_search(d.message, m, undef_capture)) {
      std::string name = m[1];
      d.code = DiagCode::CaptureUndeclared;
      d.message = fmt::format("capture '{}' is used but not declared", name);
      if (auto note = first_line_capture_note(src.text, src.display_name, name, 0, meta)) {
        d.notes.push_back(std::move(*note));
        continue;
      }
      d.notes.push_back(fmt::format("declare it with --capture {}:TYPE[] (array) or --capture {}:TYPE (scalar)", name, name));
      if (!meta.captures.empty()) {
        std::string list;
        for (const auto& c : meta.captures) list += (list.empty() ? "" : ", ") + to_string(c);
        d.notes.push_back("declared captures: " + list);
      }
    } else if (d.file == kCheckFile) {
      bool fin = d.message.find("udfc-abi-finalize") != std::string::npos;
      std::string name = fin ? *meta.finalize : symbol;
      d.code = DiagCode::AbiSignature;
      d.file.clear();
      d.line = d.column = 0;
      if (meta.kind == UdfKind::Filter) {
        d.message = fmt::format("filter '{}' has the wrong signature for ABI ivf_flat.filter.v1", name);
        d.notes.push_back("expected: " + expected_filter_signature());
        continue;
      }
      if (meta.v2()) {
        d.message = fmt::format("{} '{}' has the wrong signature for {} ({} elements, {} accumulator)",
                                fin ? "finalize function" : "symbol", name, abi_name(meta), to_string(meta.elem),
                                to_string(meta.acc_type()));
        d.notes.push_back("expected: " + (fin ? expected_v2_finalize_signature() : expected_v2_signature(*meta.shape, meta.acc_type())));
        if (!fin && *meta.shape == MetricShape::State)
          d.notes.push_back("or the vector shape: " + expected_v2_signature(MetricShape::Vector, meta.acc_type()) + " (--shape vector)");
        else if (!fin)
          d.notes.push_back("or the state shape: " + expected_v2_signature(MetricShape::State, meta.acc_type()) +
                            " with --finalize (--shape state)");
        continue;
      }
      d.message = fmt::format("{} '{}' has the wrong signature for ABI v1 ({} elements, {} accumulator)",
                              fin ? "finalize function" : "symbol", name, to_string(meta.elem),
                              to_string(meta.acc_type()));
      d.notes.push_back("expected: " + (fin ? expected_finalize_signature(meta.acc_type())
                                            : expected_metric_signature(meta.acc_type())));
    }
  }
}

std::vector<std::string> visible_functions(const std::string& ptx) {
  static const std::regex func(R"(^\.visible \.func\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)\s*\()");
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos < ptx.size()) {
    size_t nl = ptx.find('\n', pos);
    if (nl == std::string::npos) nl = ptx.size();
    std::string line = ptx.substr(pos, nl - pos);
    std::smatch m;
    if (std::regex_search(line, m, func)) names.push_back(m[1]);
    pos = nl + 1;
  }
  return names;
}

// Whether the PTX's .visible .func `name` takes a pointer (.b64) first: an
// ABI v2 vector distance(const ACC *x, ...), not a state update(ACC x, ...).
bool ptx_first_param_is_pointer(const std::string& ptx, const std::string& name) {
  const std::regex param(R"(\.param\s+\.(\w+)\s+)" + name + R"(_param_0\b)");
  std::smatch m;
  return std::regex_search(ptx, m, param) && m[1] == "b64";
}

// Bytes that .func `name` reads or writes through its pointer parameter
// `param` (the end of the furthest access), from the PTX: every use of a
// register loaded from that parameter must be the address of an ld or st at a
// constant offset ([%rd] or [%rd+N]); nullopt for anything else (the pointer
// copied, offset by a variable, passed on, stored).  For a v2 state metric's
// state: how many of its 8 words the scan must keep.
std::optional<int64_t> ptx_pointer_param_bytes(const std::string& ptx, const std::string& name, int param) {
  const std::regex head(R"(\.func\s+(?:\([^)]*\)\s*)?)" + name + R"(\s*\()");
  std::smatch hm;
  if (!std::regex_search(ptx, hm, head)) return std::nullopt;
  const size_t open = ptx.find("\n{", static_cast<size_t>(hm.position(0)));
  const size_t close = open == std::string::npos ? std::string::npos : ptx.find("\n}", open);
  if (close == std::string::npos) return std::nullopt;
  const std::string body = ptx.substr(open, close - open);
  const std::string pname = fmt::format("{}_param_{}", name, param);
  const std::regex ldp(R"(ld\.param\.[bsu]64\s+(%rd\d+),\s*\[)" + pname + R"(\];)");
  std::set<std::string> regs;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), ldp); it != std::sregex_iterator(); ++it) regs.insert((*it)[1]);
  if (body.find(pname) != std::string::npos && regs.empty()) return std::nullopt;  // read some other way
  // An access: [pred] ld|st[.space...][.vN].type  operands with [REG] or [REG+N].
  static const std::regex access(R"(^\s*(?:@!?%p\d+\s+)?(ld|st)((?:\.[a-z]+)*?)(?:\.v(2|4))?\.([bfsu])(8|16|32|64)\s+(.*);\s*$)");
  const std::string param_ref = "[" + pname + "]";
  // Per register: any use of it, and its use as an address.
  std::vector<std::pair<std::regex, std::regex>> uses;
  for (const std::string& r : regs) uses.emplace_back(std::regex(r + R"((?!\d))"), std::regex(R"(\[)" + r + R"((?:\+(\d+))?\])"));
  int64_t end = 0;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t nl = body.find('\n', pos);
    if (nl == std::string::npos) nl = body.size();
    const std::string line = body.substr(pos, nl - pos);
    pos = nl + 1;
    for (const auto& [use, addr] : uses) {
      const auto n_uses = std::distance(std::sregex_iterator(line.begin(), line.end(), use), std::sregex_iterator());
      if (n_uses == 0) continue;
      if (line.find(param_ref) != std::string::npos) continue;  // the ld.param itself
      std::smatch am;
      if (n_uses != 1 || !std::regex_match(line, am, access)) return std::nullopt;
      std::smatch om;
      const std::string operands = am[6];
      if (!std::regex_search(operands, om, addr)) return std::nullopt;  // the register as a value
      if (am[2].str().find(".param") != std::string::npos) return std::nullopt;
      const int64_t off = om[1].matched ? std::stoll(om[1].str()) : 0;
      const int64_t width = std::stoll(am[5].str()) / 8 * (am[3].matched ? std::stoll(am[3].str()) : 1);
      end = std::max(end, off + width);
    }
  }
  return end;
}

// Headers udfc gives NVRTC from memory: never files.
bool is_builtin_header(const std::string& name) {
  return name == kPreludeName || name == kAbiHeaderName || name == kFilterAbiHeaderName || name == kAbiV2HeaderName;
}

// Scans for #include lines and reads every header it can resolve in the
// including file's folder (for "..."), the -I folders and the toolkit's
// include folder, recursively.  A superset of what NVRTC opens: lines in
// inactive #if branches count too.  An #include of a macro (computed) cannot
// be resolved without preprocessing: it is reported, not guessed.
struct ScannedHeader {
  std::string path;      // as found (folder / name, lexically normal): symlinks kept, as NVRTC names it
  std::string content;
  bool toolkit = false;  // found in the toolkit's include folder
};

// An #include line, read as the regular expressions ^\s*#\s*include\s*([<"])([^>"]+)[>"]
// (`name`, `quoted` for "...") and, failing that, ^\s*#\s*include\s*[A-Za-z_]
// (`computed`: a macro).  By hand: compiling those two std::regex would be a
// large part of a udfc cache hit, which scans the source's includes for the
// key.
struct IncludeLine {
  bool include = false;  // the first form
  bool computed = false;
  bool quoted = false;
  std::string name;
};
IncludeLine read_include_line(std::string_view line) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; };
  std::size_t i = 0;
  auto skip_blanks = [&] {
    while (i < line.size() && blank(line[i])) ++i;
  };
  IncludeLine out;
  skip_blanks();
  if (i == line.size() || line[i] != '#') return out;
  ++i;
  skip_blanks();
  if (line.substr(i, 7) != "include") return out;
  i += 7;
  skip_blanks();
  if (i == line.size()) return out;
  const char c = line[i];
  if (c == '<' || c == '"') {
    const std::size_t end = line.find_first_of(">\"", i + 1);
    if (end != std::string_view::npos && end > i + 1) {
      out.include = true;
      out.quoted = c == '"';
      out.name = std::string(line.substr(i + 1, end - i - 1));
    }
    return out;
  }
  out.computed = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  return out;
}

void collect_headers(const std::string& text, const std::string& dir, const std::vector<std::string>& search,
                     const std::string& toolkit_dir, std::map<std::string, ScannedHeader>& found, bool& computed,
                     std::vector<Diagnostic>& errors, int depth = 0) {
  namespace fs = std::filesystem;
  if (depth > 32) return;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const IncludeLine inc = read_include_line(line);
    if (!inc.include) {
      if (inc.computed) computed = true;
      continue;
    }
    if (depth == 0 && is_builtin_header(inc.name)) continue;
    std::vector<std::string> dirs;
    if (inc.quoted && !dir.empty()) dirs.push_back(dir);
    dirs.insert(dirs.end(), search.begin(), search.end());
    if (!toolkit_dir.empty()) dirs.push_back(toolkit_dir);
    for (const auto& d : dirs) {
      fs::path p = fs::path(d) / inc.name;
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) continue;
      std::string key = fs::weakly_canonical(p, ec).string();
      if (found.count(key)) break;
      auto bytes = read_file(p.string(), limits::kCudaSource);
      if (!bytes) {
        // One NVRTC cannot open it reports itself; one too large to read is refused here.
        if (bytes.error().diagnostics().front().code == DiagCode::FileTooLarge)
          errors.insert(errors.end(), bytes.error().diagnostics().begin(), bytes.error().diagnostics().end());
        break;
      }
      std::string content(bytes->begin(), bytes->end());
      found[key] = ScannedHeader{p.lexically_normal().string(), content, !toolkit_dir.empty() && d == toolkit_dir};
      collect_headers(content, p.parent_path().string(), search, toolkit_dir, found, computed, errors, depth + 1);
      break;
    }
  }
}

// Absolute, normal form of a folder as NVRTC is given it.
std::string absolute_dir(const std::string& d) {
  std::error_code ec;
  auto a = std::filesystem::absolute(d, ec);
  return ec ? d : a.lexically_normal().string();
}

struct ScannedSource {
  std::map<std::string, ScannedHeader> headers;  // canonical path (for repeats) -> header
  bool computed_include = false;
  std::vector<Diagnostic> errors;                // headers too large to read
};

// The source's headers, searched for as NVRTC does: "..." in the including
// file's folder, then -I, then the toolkit's include folder (last, see Nvrtc::run).
ScannedSource scan_source(const CudaSource& src, const std::vector<Capture>& captures, const CudaCompileOptions& opts,
                          UdfKind kind = UdfKind::Metric) {
  ScannedSource s;
  std::vector<std::string> dirs;
  for (const auto& d : opts.include_dirs) dirs.push_back(absolute_dir(d));
  std::string toolkit = cuda_include_dir();
  std::string dir = src.directory.empty() ? std::string() : absolute_dir(src.directory);
  collect_headers(src.text, dir, dirs, toolkit, s.headers, s.computed_include, s.errors);
  collect_headers(cuda_prelude(captures, kind), {}, dirs, toolkit, s.headers, s.computed_include, s.errors);
  return s;
}

// The headers NVRTC reported processing in a --fdevice-time-trace file: the
// ones that are files (not its built-in or udfc's in-memory headers).
std::vector<std::string> traced_headers(const std::string& trace_path) {
  std::vector<std::string> out;
  auto bytes = read_file(trace_path);
  if (!bytes) return out;
  auto j = nlohmann::json::parse(bytes->begin(), bytes->end(), nullptr, false);
  const nlohmann::json* events = &j;
  if (j.is_object() && j.contains("traceEvents")) events = &j["traceEvents"];
  if (!events->is_array()) return out;
  for (const auto& e : *events) {
    if (!e.is_object() || e.value("name", "") != "Processing Header File") continue;
    if (!e.contains("args") || !e["args"].is_object()) continue;
    std::string p = e["args"].value("detail", "");
    std::error_code ec;
    if (p.empty() || p[0] != '/' || !std::filesystem::is_regular_file(p, ec)) continue;
    out.push_back(std::filesystem::path(p).lexically_normal().string());
  }
  return out;
}

// A private temporary folder for NVRTC's trace files, removed with it:
// TMPDIR/udfc-trace.PID.XXXXXX.  Folders that killed processes left there are
// removed first (remove_stale_temps).  None when not `enabled` (no depfile
// asked for): the compiles then run without the time trace.
class TraceFolder {
 public:
  explicit TraceFolder(bool enabled) {
    if (!enabled) return;
    std::error_code ec;
    const auto tmp = std::filesystem::temp_directory_path(ec);
    if (ec) return;
    remove_stale_temps(tmp.string(), "udfc-trace.");
    std::string tmpl = (tmp / ("udfc-trace." + std::to_string(::getpid()) + ".XXXXXX")).string();
    if (::mkdtemp(tmpl.data())) dir_ = tmpl;
    registered_ = std::make_unique<TempPathGuard>(dir_);  // removed also when a watchdog ends the process
  }
  ~TraceFolder() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  TraceFolder(const TraceFolder&) = delete;
  TraceFolder& operator=(const TraceFolder&) = delete;
  // The option for compile `n` (empty if there is no folder) and the file it writes.
  std::pair<std::string, std::string> next() {
    if (dir_.empty()) return {};
    std::string base = dir_ + "/t" + std::to_string(n_++);
    return {"--fdevice-time-trace=" + base, base + ".json"};
  }

 private:
  std::string dir_;
  std::unique_ptr<TempPathGuard> registered_;
  int n_ = 0;
};

struct Nvrtc {
  const CudaSource& src;
  UdfMetadata meta;  // a copy: an ABI v2 metric's shape is filled in once inferred
  const CudaCompileOptions& opts;
  std::string prelude;
  std::string raw_log;
  std::vector<Diagnostic> warnings;
  TraceFolder traces;
  std::vector<std::string> opened;  // the headers NVRTC reported reading, over every compile

  std::vector<std::string> common_options() const { return base_nvrtc_options(opts); }

  std::string program_name() const {
    if (src.display_name.empty() || src.display_name[0] == '<') return src.display_name;
    return std::filesystem::path(src.display_name).filename().string();
  }

  // Compiles `text` with the given extra options; returns the program or every error.
  Expected<std::unique_ptr<NvrtcProgram>> run(const std::string& text, std::vector<std::string> options,
                                         const std::string& symbol) {
    auto prog = std::make_unique<NvrtcProgram>();
    const char* headers[] = {prelude.c_str(), embedded_abi_header(), embedded_filter_abi_header(), embedded_abi_v2_header()};
    const char* names[] = {kPreludeName, kAbiHeaderName, kFilterAbiHeaderName, kAbiV2HeaderName};
    // NVRTC's LTO-IR depends on the working folder and the program name.  For
    // byte-identical artifacts wherever udfc runs, the program is named by the
    // file name alone (diagnostics are mapped back to the path as typed), the
    // folders are made absolute, and the compile runs in "/".
    const std::string prog_name = program_name();
    if (auto r = nvrtcCreateProgram(&prog->p, text.c_str(), prog_name.c_str(), 4, headers, names);
        r != NVRTC_SUCCESS)
      return nvrtc_failure(r, "nvrtcCreateProgram");
    if (!src.directory.empty()) options.push_back("-I" + absolute_dir(src.directory));
    for (const auto& d : opts.include_dirs) options.push_back("-I" + absolute_dir(d));
    // Last, so that -I folders win; not in the manifest's options, which
    // must not depend on where the toolkit is installed.
    if (auto toolkit = cuda_include_dir(); !toolkit.empty()) options.push_back("-I" + toolkit);
    // NVRTC's time trace names every header it processes: the dependencies
    // for a depfile, as NVRTC saw them (only when asked for: see
    // CudaCompileOptions::list_dependencies).  It leaves the output unchanged.
    auto [trace_option, trace_file] = traces.next();
    if (!trace_option.empty()) options.push_back(trace_option);
    std::vector<const char*> argv;
    for (const auto& o : options) argv.push_back(o.c_str());
    nvrtcResult r;
    {
      WorkingFolder in_root("/");
      r = nvrtcCompileProgram(prog->p, static_cast<int>(argv.size()), argv.data());
    }
    std::string log = nvrtc_program_log(prog->p);  // read before deciding on r
    if (!trace_file.empty())
      for (auto& h : traced_headers(trace_file))
        if (std::find(opened.begin(), opened.end(), h) == opened.end()) opened.push_back(std::move(h));
    if (!log.empty()) raw_log += log + "\n";
    auto parsed = parse_nvrtc_log(log, src.display_name);
    for (auto* list : {&parsed.errors, &parsed.warnings})
      for (auto& d : *list)
        if (d.file == prog_name) d.file = src.display_name;
    for (auto& w : parsed.warnings)
      if (std::none_of(warnings.begin(), warnings.end(), [&](const Diagnostic& x) {
            return x.file == w.file && x.line == w.line && x.message == w.message;
          }))
        warnings.push_back(w);
    if (r == NVRTC_ERROR_INVALID_OPTION)
      return Error(ErrorKind::Usage, DiagCode::CompilerOption, "NVRTC rejected an option: " + (log.empty() ? std::string(nvrtcGetErrorString(r)) : log));
    if (r != NVRTC_SUCCESS || !parsed.errors.empty()) {
      if (parsed.errors.empty())
        return Error(ErrorKind::Diagnosed, Diagnostic(DiagCode::CompileError, src.display_name, 0, 0, "compilation failed: " + std::string(nvrtcGetErrorString(r))))
            .with_raw_log(log);
      explain_abi_errors(parsed.errors, meta, symbol, src);
      return Error(ErrorKind::Diagnosed, std::move(parsed.errors)).with_raw_log(log).with_warnings(warnings);
    }
    return prog;
  }
};

bool looks_like_text(const std::string& s, std::string& why) {
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == 0 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\v')) {
      why = fmt::format("byte 0x{:02x} at offset {}", c, i);
      return false;
    }
  }
  return true;
}

}  // namespace

std::string cuda_prelude(const std::vector<Capture>& captures, UdfKind kind, int metric_abi) {
  const bool v2 = kind == UdfKind::Metric && metric_abi == 2;
  std::string p = std::string("#pragma once\n#include <") +
                  (kind == UdfKind::Filter ? kFilterAbiHeaderName : v2 ? kAbiV2HeaderName : kAbiHeaderName) + ">\n";
  bool f16 = std::any_of(captures.begin(), captures.end(), [](const Capture& c) { return c.type == CaptureType::F16; });
  if (f16) p += "#include <cuda_fp16.h>\n";
  for (size_t i = 0; i < captures.size(); ++i) {
    const auto& c = captures[i];
    std::string ty = c_type(c);
    std::string value = c.array ? fmt::format("({})ctx->captures[{}].ptr", ty, i)
                                : fmt::format("ctx->captures[{}].{}", i, c.type == CaptureType::F32 ? "f32" : "i32");
    p += fmt::format("static __device__ __forceinline__ {} udf_capture_{}(const {} *ctx) {{ return {}; }}\n", ty,
                     c.name, v2 ? "udf_ctx_v2" : "udf_ctx_v1", value);
  }
  return p;
}

namespace {

struct SourceDigest {
  std::string name;    // without folders: no absolute paths in artifacts
  std::string sha256;  // the text and every header resolved through the source folder and -I
  std::vector<Diagnostic> errors;  // headers too large to read
};

SourceDigest digest_source(const CudaSource& src, const std::vector<Capture>& captures, const CudaCompileOptions& opts) {
  ScannedSource scanned = scan_source(src, captures, opts);
  Sha256Builder sh;
  sh.part(src.text);
  // The user's headers, ordered by path (paths themselves are not hashed);
  // the toolkit's are covered by the NVRTC version in the key.
  for (const auto& [path, h] : scanned.headers)
    if (!h.toolkit) sh.part(h.content);
  SourceDigest d;
  d.name = src.display_name == "<string>" || src.display_name == "<stdin>"
               ? src.display_name
               : std::filesystem::path(src.display_name).filename().string();
  d.sha256 = sh.finish_hex();
  d.errors = std::move(scanned.errors);
  return d;
}

}  // namespace

std::string cuda_cache_key(const CudaSource& src, const UdfMetadata& meta, const CudaCompileOptions& opts,
                           const std::string& nvrtc_version) {
  SourceDigest digest = digest_source(src, meta.captures, opts);
  Sha256Builder key;
  key.part(artifact_key_tag())
      .part(kUdfVersion)
      .part(nvrtc_version.empty() ? nvrtc_version_string() : nvrtc_version)
      .part(digest.sha256)
      .part(digest.name);
  add_metadata_key_parts(key, meta);
  for (const auto& o : manifest_options(opts)) key.part(o);
  add_target_key_parts(key, meta);
  return key.finish_hex();
}

namespace {

// Stage 0: the input is checked before NVRTC sees it; its digest names it in
// the manifest.
Expected<SourceDigest> check_source(const CudaSource& src, const UdfMetadata& meta, const CudaCompileOptions& opts) {
  UDF_TRY_VOID(validate(meta));
  if (src.text.find_first_not_of(" \t\r\n") == std::string::npos)
    return diagnosed(DiagCode::BadSource, src.display_name + ": empty input: no CUDA source to compile");
  if (std::string why; !looks_like_text(src.text, why))
    return diagnosed(DiagCode::BadSource, src.display_name + ": does not look like CUDA C++ source (" + why + ")");
  SourceDigest digest = digest_source(src, meta.captures, opts);
  if (!digest.errors.empty()) return Error(ErrorKind::Diagnosed, std::move(digest.errors));
  return digest;
}

// Stage 1: one compile to PTX for the lowest arch, which diagnoses the source
// and shows its extern "C" functions.
Expected<std::string> probe_ptx(Nvrtc& nv) {
  auto options = nv.common_options();
  options.push_back(fmt::format("-arch=compute_{}", nv.meta.archs.front()));
  UDF_TRY(probe, nv.run(nv.src.text, options, nv.meta.symbol.value_or("")));
  size_t ptx_size = 0;
  if (auto r = nvrtcGetPTXSize(probe->p, &ptx_size); r != NVRTC_SUCCESS) return nvrtc_failure(r, "nvrtcGetPTXSize");
  std::string ptx(ptx_size, '\0');
  if (auto r = nvrtcGetPTX(probe->p, ptx.data()); r != NVRTC_SUCCESS) return nvrtc_failure(r, "nvrtcGetPTX");
  return ptx;
}

// What a UDF's source expects when no function fits: the ABI's signature.
std::string expected_definition(const UdfMetadata& meta) {
  if (meta.kind == UdfKind::Filter)
    return "ABI ivf_flat.filter.v1 expects: extern \"C\" __device__ bool NAME(uint32_t query, int64_t id, const udf_ctx_v1 *ctx)";
  if (meta.v2())
    return "ABI v2 expects: extern \"C\" __device__ " +
           fmt::format("void NAME({0} x, {0} y, udf_state_v2 *s, const udf_ctx_v2 *ctx) (state, with "
                       "--finalize) or float NAME(const {0} *x, const {0} *y, uint32_t n_dims, const "
                       "udf_ctx_v2 *ctx) (vector)", c_type(meta.acc_type()));
  return "ABI v1 expects: extern \"C\" __device__ " +
         fmt::format("{0} NAME({0} x, {0} y, {0} acc, const udf_ctx_v1 *ctx)", c_type(meta.acc_type()));
}

// Stage 2: the UDF's function among the PTX's extern "C" functions (--symbol,
// or the only one besides --finalize), and --finalize's.
Expected<std::string> find_symbol(const CudaSource& src, const UdfMetadata& meta, const std::string& ptx) {
  std::vector<std::string> c_funcs, cxx_funcs;
  for (auto& f : visible_functions(ptx)) (f.rfind("_Z", 0) == 0 ? cxx_funcs : c_funcs).push_back(f);
  auto listing = [&] {
    std::string l;
    for (auto& f : c_funcs) l += (l.empty() ? "" : ", ") + f;
    return l.empty() ? std::string("none") : l;
  };
  auto defined_as_cxx = [&](const std::string& name) {
    std::string frag = std::to_string(name.size()) + name;
    return std::any_of(cxx_funcs.begin(), cxx_funcs.end(), [&](const std::string& m) { return m.find(frag) != std::string::npos; });
  };
  auto missing = [&](const std::string& what, const std::string& name) {
    Error e(ErrorKind::Diagnosed, DiagCode::SymbolNotFound, fmt::format("{}: {} '{}' is not defined as an extern \"C\" __device__ function",
                                              src.display_name, what, name));
    if (defined_as_cxx(name)) e.note(fmt::format("'{}' has C++ linkage; declare it extern \"C\"", name));
    e.note("extern \"C\" __device__ functions in this file: " + listing());
    return e;
  };
  std::string symbol;
  if (meta.symbol) {
    symbol = *meta.symbol;
    if (std::find(c_funcs.begin(), c_funcs.end(), symbol) == c_funcs.end()) return missing("symbol", symbol);
  } else {
    std::vector<std::string> candidates;
    for (auto& f : c_funcs)
      if (!meta.finalize || f != *meta.finalize) candidates.push_back(f);
    if (candidates.size() != 1) {
      Error e(ErrorKind::Diagnosed, candidates.empty() ? DiagCode::SymbolNotFound : DiagCode::SymbolAmbiguous,
              candidates.empty()
                  ? fmt::format("{}: no extern \"C\" __device__ function to use as the {}", src.display_name, role_name(meta))
                  : fmt::format("{}: {} extern \"C\" __device__ functions; pick the {} with --symbol",
                                src.display_name, candidates.size(), role_name(meta)));
      e.note("extern \"C\" __device__ functions in this file: " + listing());
      if (candidates.empty()) e.note(expected_definition(meta));
      return e;
    }
    symbol = candidates.front();
  }
  if (meta.finalize && std::find(c_funcs.begin(), c_funcs.end(), *meta.finalize) == c_funcs.end())
    return missing("finalize function", *meta.finalize);
  return symbol;
}

// Stage 3: ABI v2 without --shape: the symbol's signature tells (update takes
// ACC x first, distance a pointer); the ABI check then checks the rest.
Expected<UdfMetadata> infer_shape(const UdfMetadata& meta, const std::string& ptx, const std::string& symbol) {
  UdfMetadata shaped = meta;
  if (!meta.v2() || meta.shape) return shaped;
  shaped.shape = ptx_first_param_is_pointer(ptx, symbol) ? MetricShape::Vector : MetricShape::State;
  if (auto v = validate_shape(shaped); !v)
    return std::move(v.error()).note(fmt::format("the {} shape was inferred from '{}''s signature (first parameter {}){}", to_string(*shaped.shape), symbol,
                                                 *shaped.shape == MetricShape::Vector ? "a pointer" : "not a pointer",
                                                 *shaped.shape == MetricShape::State ? "; a v1 metric compiles without --abi v2" : ""));
  return shaped;
}

// Stage 4: the ABI check appended to the source: static_asserts on the exact
// function types.  They emit no code.
std::string abi_check(const UdfMetadata& meta, const UdfMetadata& shaped, const std::string& symbol) {
  std::string acc = std::string(c_type(meta.acc_type()));
  std::string check = fmt::format(
      "\n#line 1 \"{}\"\n"
      "namespace udfc_abi_check {{\n"
      "template <typename A, typename B> struct same {{ static constexpr bool value = false; }};\n"
      "template <typename A> struct same<A, A> {{ static constexpr bool value = true; }};\n",
      kCheckFile);
  if (meta.kind == UdfKind::Filter)
    check += fmt::format("static_assert(same<decltype({}), bool(uint32_t, int64_t, const udf_ctx_v1 *)>::value, \"udfc-abi-filter\");\n",
                         symbol);
  else if (shaped.v2() && *shaped.shape == MetricShape::State)
    check += fmt::format("static_assert(same<decltype({0}), void({1}, {1}, udf_state_v2 *, const udf_ctx_v2 *)>::value, \"udfc-abi-metric\");\n",
                         symbol, acc);
  else if (shaped.v2())
    check += fmt::format("static_assert(same<decltype({0}), float(const {1} *, const {1} *, uint32_t, const udf_ctx_v2 *)>::value, "
                         "\"udfc-abi-metric\");\n", symbol, acc);
  else
    check += fmt::format("static_assert(same<decltype({}), {}({}, {}, {}, const udf_ctx_v1 *)>::value, \"udfc-abi-metric\");\n",
                         symbol, acc, acc, acc, acc);
  if (meta.finalize && shaped.v2())
    check += fmt::format("static_assert(same<decltype({}), float(const udf_state_v2 *, const udf_ctx_v2 *)>::value, \"udfc-abi-finalize\");\n",
                         *meta.finalize);
  else if (meta.finalize)
    check += fmt::format("static_assert(same<decltype({}), float({}, const udf_ctx_v1 *)>::value, \"udfc-abi-finalize\");\n",
                         *meta.finalize, acc);
  check += "}\n";
  return check;
}

// Stage 5: one LTO-IR per arch, of the source with its ABI check.
Expected<std::map<Arch, Bytes>> compile_ltoir(Nvrtc& nv, const std::string& checked, const std::string& symbol) {
  std::map<Arch, Bytes> out;
  for (Arch a : nv.meta.archs) {
    auto o = nv.common_options();
    o.push_back(fmt::format("-arch=sm_{}", a));
    o.push_back("-dlto");
    UDF_TRY(prog, nv.run(checked, o, symbol));
    UDF_TRY(ir, nvrtc_ltoir(prog->p, arch_name(a)));
    out[a] = std::move(ir);
  }
  return out;
}

// Stage 6: the manifest.
void fill_cuda_manifest(ArtifactManifest& m, const CudaSource& src, const UdfMetadata& meta, const UdfMetadata& shaped,
                        const CudaCompileOptions& opts, const SourceDigest& digest, const std::string& ptx,
                        const std::string& symbol) {
  m.source_kind = SourceKind::Cuda;
  m.source_name = digest.name;
  m.source_sha256 = digest.sha256;
  fill_manifest_metadata(m, shaped, symbol);
  if (shaped.v2() && shaped.shape == MetricShape::State)
    m.state_words = state_words_used(ptx_pointer_param_bytes(ptx, symbol, 2),
                                     shaped.finalize ? ptx_pointer_param_bytes(ptx, *shaped.finalize, 0) : std::nullopt,
                                     shaped.initial_state.size());
  m.compiler = nvrtc_version_string();
  m.compiler_options = manifest_options(opts);
  m.cache_key = cuda_cache_key(src, meta, opts);
}

}  // namespace

Expected<CompileOutput> compile_cuda(const CudaSource& src, const UdfMetadata& meta, const CudaCompileOptions& opts) {
  UDF_TRY(digest, check_source(src, meta, opts));
  Nvrtc nv{src, meta, opts, cuda_prelude(meta.captures, meta.kind, meta.metric_abi), {}, {}, TraceFolder(opts.list_dependencies), {}};
  UDF_TRY(ptx, probe_ptx(nv));
  UDF_TRY(symbol, find_symbol(src, meta, ptx));
  UDF_TRY(shaped, infer_shape(meta, ptx, symbol));
  nv.meta.shape = shaped.shape;  // an inferred shape explains later errors
  UDF_TRY(ltoir, compile_ltoir(nv, src.text + abi_check(meta, shaped, symbol), symbol));
  Artifact art;
  art.ltoir = std::move(ltoir);
  fill_cuda_manifest(art.manifest, src, meta, shaped, opts, digest, ptx, symbol);
  CompileOutput out{std::move(art), std::move(nv.warnings), std::move(nv.raw_log), std::move(nv.opened)};
  return out;
}

Expected<CudaSourceScan> scan_cuda_source(const CudaSource& src, const std::vector<Capture>& captures,
                                          const CudaCompileOptions& opts) {
  ScannedSource s = scan_source(src, captures, opts);
  if (!s.errors.empty()) return Error(ErrorKind::Diagnosed, std::move(s.errors));
  CudaSourceScan out;
  out.computed_include = s.computed_include;
  for (const auto& [canonical, h] : s.headers) out.headers.push_back(h.path);
  return out;
}

}  // namespace udf

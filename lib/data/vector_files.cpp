#include "udf/data/vector_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace udf {
namespace {

Error bad(const std::string& name, std::string what) { return diagnosed(DiagCode::BadDataFile, name + ": " + std::move(what)); }

std::string ext_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  auto dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string e = path.substr(dot);
  for (auto& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

// The small Python-literal dict of a .npy header: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
struct NpyHeader {
  std::string descr;
  bool fortran = false;
  std::vector<std::uint64_t> shape;
};

Expected<NpyHeader> parse_npy_dict(std::string_view s, const std::string& name) {
  NpyHeader h;
  bool have_descr = false, have_order = false, have_shape = false;
  std::size_t i = 0;
  auto ws = [&] { while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i; };
  auto fail = [&](const std::string& what) { return bad(name, "bad .npy header: " + what); };
  auto str = [&](std::string& out) -> bool {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return false;
    char q = s[i++];
    auto end = s.find(q, i);
    if (end == std::string_view::npos) return false;
    out = std::string(s.substr(i, end - i));
    i = end + 1;
    return true;
  };
  ws();
  if (i >= s.size() || s[i] != '{') return fail("expected '{'");
  ++i;
  for (;;) {
    ws();
    if (i < s.size() && s[i] == '}') { ++i; break; }
    std::string key;
    if (!str(key)) return fail("expected a quoted key");
    ws();
    if (i >= s.size() || s[i] != ':') return fail("expected ':' after '" + key + "'");
    ++i;
    ws();
    if (key == "descr") {
      if (!str(h.descr)) return fail("'descr' must be a string (structured dtypes are not supported)");
      have_descr = true;
    } else if (key == "fortran_order") {
      if (s.substr(i, 4) == "True") { h.fortran = true; i += 4; }
      else if (s.substr(i, 5) == "False") { h.fortran = false; i += 5; }
      else return fail("'fortran_order' must be True or False");
      have_order = true;
    } else if (key == "shape") {
      if (i >= s.size() || s[i] != '(') return fail("'shape' must be a tuple");
      ++i;
      for (;;) {
        ws();
        if (i < s.size() && s[i] == ')') { ++i; break; }
        if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return fail("bad 'shape'");
        std::uint64_t v = 0;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
          if (v > (std::numeric_limits<std::uint64_t>::max() - 9) / 10) return fail("'shape' overflows");
          v = v * 10 + static_cast<std::uint64_t>(s[i++] - '0');
        }
        h.shape.push_back(v);
        ws();
        if (i < s.size() && s[i] == ',') ++i;
      }
      have_shape = true;
    } else {
      return fail("unknown key '" + key + "'");
    }
    ws();
    if (i < s.size() && s[i] == ',') ++i;
  }
  if (!have_descr || !have_order || !have_shape) return fail("missing 'descr', 'fortran_order' or 'shape'");
  return h;
}

std::optional<DType> dtype_of_descr(std::string_view d) {
  if (d.size() != 3) return std::nullopt;
  char order = d[0];
  bool little = order == '<' || order == '|' || (order == '=' && std::endian::native == std::endian::little);
  if (!little) return std::nullopt;
  std::string_view t = d.substr(1);
  if (t == "f4") return DType::F32;
  if (t == "f2") return DType::F16;
  if (t == "f8") return DType::F64;
  if (t == "i1") return DType::I8;
  if (t == "u1") return DType::U8;
  if (t == "i4") return DType::I32;
  if (t == "i8") return DType::I64;
  return std::nullopt;
}

double load_as_double(const std::uint8_t* p, DType t) {
  switch (t) {
    case DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::F16: { std::uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case DType::F64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::I8: return static_cast<std::int8_t>(*p);
    case DType::U8: return *p;
    case DType::I32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::I64: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  }
  return 0;
}

}  // namespace

std::string_view to_string(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::F64: return "f64";
  }
  return "?";
}

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::F16: return 2;
    case DType::I8: case DType::U8: return 1;
    case DType::I64: case DType::F64: return 8;
  }
  return 0;
}

std::string_view npy_descr(DType t) {
  switch (t) {
    case DType::F32: return "<f4";
    case DType::F16: return "<f2";
    case DType::I8: return "|i1";
    case DType::U8: return "|u1";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::F64: return "<f8";
  }
  return "?";
}

float half_to_float(std::uint16_t h) {
  std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) bits = sign;
    else {  // subnormal: renormalize
      int e = -1;
      do { ++e; man <<= 1; } while (!(man & 0x400u));
      bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | man << 13;
  else bits = sign | (exp + 127 - 15) << 23 | man << 13;
  return std::bit_cast<float>(bits);
}

std::uint16_t float_to_half(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  std::uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffffu;
  if (exp == 0xff) return sign | 0x7c00u | (man ? 0x200u : 0);
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return sign | 0x7c00u;
  if (e <= 0) {
    if (e < -10) return sign;
    man |= 0x800000u;
    int shift = 14 - e;
    std::uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = static_cast<std::uint32_t>(e) << 10 | man >> 13, rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into the exponent: correct
  return static_cast<std::uint16_t>(sign | half);
}

namespace {

// Where a .npy file's header lies: `b` holds the file's first bytes (at least
// min(size, 12)), `size` is the whole file's.
struct NpyExtent {
  std::size_t hstart = 0;  // the header text's offset
  std::size_t hlen = 0;    // its length
};

Expected<NpyExtent> npy_extent(std::span<const std::uint8_t> b, std::uint64_t size, const std::string& name) {
  static const std::uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || std::memcmp(b.data(), magic, 6) != 0)
    return bad(name, size < 10 ? "truncated .npy file (no header)" : "not a .npy file (bad magic)");
  int major = b[6];
  NpyExtent x;
  if (major == 1) {
    x.hlen = b[8] | b[9] << 8;
    x.hstart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return bad(name, "truncated .npy file (no header)");
    x.hlen = static_cast<std::size_t>(b[8]) | b[9] << 8 | b[10] << 16 | static_cast<std::size_t>(b[11]) << 24;
    x.hstart = 12;
  } else {
    return bad(name, fmt::format("unsupported .npy format version {}.{}", major, b[7]));
  }
  if (size < x.hstart + x.hlen) return bad(name, "truncated .npy file (header runs past the end)");
  return x;
}

// The matrix a .npy header describes, without its data, once its size is
// checked against the `have` bytes that follow the header: nothing is
// allocated from the header's word alone.
Expected<HostMatrix> npy_matrix(std::string_view text, std::uint64_t have, const std::string& name) {
  UDF_TRY(h, parse_npy_dict(text, name));
  auto dt = dtype_of_descr(h.descr);
  if (!dt)
    return Error(bad(name, fmt::format("unsupported dtype '{}'", h.descr)))
        .note("supported: <f4 <f2 <f8 |i1 |u1 <i4 <i8 (little-endian)");
  if (h.fortran) return bad(name, "Fortran-order arrays are not supported; save with numpy.ascontiguousarray");
  HostMatrix m;
  m.dtype = *dt;
  if (h.shape.size() == 1) { m.rows = h.shape[0]; m.cols = 1; m.one_d = true; }
  else if (h.shape.size() == 2) { m.rows = h.shape[0]; m.cols = h.shape[1]; }
  else return bad(name, fmt::format("expected a 1-D or 2-D array, found {} dimensions", h.shape.size()));
  std::size_t esz = dtype_size(m.dtype);
  if (m.cols != 0 && m.rows > std::numeric_limits<std::uint64_t>::max() / m.cols / esz)
    return bad(name, "array size overflows");
  std::uint64_t need = m.rows * m.cols * esz;
  if (have < need)
    return bad(name, fmt::format("truncated .npy file: shape {}x{} {} needs {} data bytes, found {}", m.rows, m.cols,
                                 to_string(m.dtype), need, have));
  if (have > need) return bad(name, fmt::format("{} bytes after the array's data", have - need));
  return m;
}

// Parses whole .fvecs/.bvecs/.ivecs records from `b` (the file's tail may end
// in a partial one), appending to `m` and `out`.  `dim0` is the first
// record's dimension (-1 before it is known); `file_size` sizes `out` then.
Expected<void> vecs_records(std::span<const std::uint8_t> b, std::size_t esz, std::uint64_t file_size,
                            std::int32_t& dim0, HostMatrix& m, Bytes& out, const std::string& name) {
  std::size_t pos = 0;
  while (pos < b.size()) {
    std::uint64_t rec = m.rows;
    if (b.size() - pos < 4) return bad(name, fmt::format("truncated: vector {} has a partial dimension field", rec));
    std::int32_t d;
    std::memcpy(&d, b.data() + pos, 4);
    if (d <= 0 || d > (1 << 24)) return bad(name, fmt::format("bad header: vector {} has dimension {}", rec, d));
    if (dim0 < 0) {
      dim0 = d;
      std::size_t recsz = 4 + static_cast<std::size_t>(d) * esz;
      out.reserve(file_size / recsz * d * esz);  // never more than the file holds
    } else if (d != dim0) {
      return bad(name, fmt::format("dimension mismatch: vector {} has dimension {}, vector 0 has {}", rec, d, dim0));
    }
    std::size_t n = static_cast<std::size_t>(d) * esz;
    if (b.size() - pos - 4 < n)
      return bad(name, fmt::format("truncated: vector {} needs {} bytes, {} left", rec, n, b.size() - pos - 4));
    out.insert(out.end(), b.begin() + static_cast<std::ptrdiff_t>(pos + 4), b.begin() + static_cast<std::ptrdiff_t>(pos + 4 + n));
    pos += 4 + n;
    ++m.rows;
  }
  return {};
}

Expected<HostMatrix> vecs_finish(HostMatrix m, std::int32_t dim0, Bytes out, const std::string& name) {
  if (m.rows == 0) return bad(name, "empty file: no vectors");
  m.cols = static_cast<std::uint64_t>(dim0);
  m.data = std::move(out);
  return m;
}

DType vecs_type(const std::string& ext) { return ext == ".fvecs" ? DType::F32 : ext == ".bvecs" ? DType::U8 : DType::I32; }

// A regular file read in place: pread at offsets, errors naming the file.
struct VectorFile {
  int fd;
  std::uint64_t size;
  const std::string& path;

  // Up to `n` bytes at `offset` into `dst` (fewer only at the end of the file).
  Expected<std::size_t> read_at(std::uint64_t offset, std::uint8_t* dst, std::size_t n) const {
    std::size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd, dst + got, n - got, static_cast<off_t>(offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return diagnosed(DiagCode::ReadFailed, "cannot read '" + path + "': " + std::strerror(errno));
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    return got;
  }
};

// .npy: the header first, then the data straight into a buffer of the size
// the header gives, which npy_matrix has checked against the file's size.
Expected<HostMatrix> read_npy(const VectorFile& f) {
  std::uint8_t head[12] = {};
  UDF_TRY(got, f.read_at(0, head, std::min<std::uint64_t>(f.size, sizeof head)));
  UDF_TRY(x, npy_extent(std::span(head, got), f.size, f.path));
  std::string text(x.hlen, '\0');
  UDF_TRY(got_text, f.read_at(x.hstart, reinterpret_cast<std::uint8_t*>(text.data()), x.hlen));
  if (got_text != x.hlen) return bad(f.path, "truncated .npy file (header runs past the end)");
  const std::uint64_t data_at = x.hstart + x.hlen;
  UDF_TRY(m, npy_matrix(text, f.size - data_at, f.path));
  m.data.resize(static_cast<std::size_t>(f.size - data_at));
  UDF_TRY(got_data, f.read_at(data_at, m.data.data(), m.data.size()));
  if (got_data != m.data.size()) return bad(f.path, "the file shrank while it was read");
  return m;
}

// .fvecs/.bvecs/.ivecs: whole records in pieces of about 8 MiB.
Expected<HostMatrix> read_vecs(const VectorFile& f, DType elem) {
  HostMatrix m;
  m.dtype = elem;
  const std::size_t esz = dtype_size(elem);
  std::int32_t dim0 = -1;
  Bytes out;
  // The first dimension gives the record size, and so the piece size.
  std::uint8_t first[4] = {};
  UDF_TRY(got, f.read_at(0, first, std::min<std::uint64_t>(f.size, 4)));
  std::int32_t d = 0;
  if (got == 4) std::memcpy(&d, first, 4);
  if (got < 4 || d <= 0 || d > (1 << 24)) {
    UDF_TRY_VOID(vecs_records(std::span(first, got), esz, f.size, dim0, m, out, f.path));
    return vecs_finish(std::move(m), dim0, std::move(out), f.path);
  }
  const std::size_t recsz = 4 + static_cast<std::size_t>(d) * esz;
  const std::size_t piece = std::max<std::size_t>(1, (8 * kMiB) / recsz) * recsz;
  Bytes buf(static_cast<std::size_t>(std::min<std::uint64_t>(piece, f.size)));
  for (std::uint64_t off = 0; off < f.size;) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(piece, f.size - off));
    UDF_TRY(n, f.read_at(off, buf.data(), want));
    UDF_TRY_VOID(vecs_records(std::span(buf.data(), n), esz, f.size, dim0, m, out, f.path));
    if (n < want) break;  // the file shrank: what was there is parsed
    off += n;
  }
  return vecs_finish(std::move(m), dim0, std::move(out), f.path);
}

}  // namespace

Expected<HostMatrix> parse_npy(std::span<const std::uint8_t> b, const std::string& name) {
  UDF_TRY(x, npy_extent(b, b.size(), name));
  std::string_view text(reinterpret_cast<const char*>(b.data() + x.hstart), x.hlen);
  UDF_TRY(m, npy_matrix(text, b.size() - x.hstart - x.hlen, name));
  m.data.assign(b.begin() + static_cast<std::ptrdiff_t>(x.hstart + x.hlen), b.end());
  return m;
}

Expected<HostMatrix> parse_vecs(std::span<const std::uint8_t> b, DType elem, const std::string& name) {
  HostMatrix m;
  m.dtype = elem;
  std::int32_t dim0 = -1;
  Bytes out;
  UDF_TRY_VOID(vecs_records(b, dtype_size(elem), b.size(), dim0, m, out, name));
  return vecs_finish(std::move(m), dim0, std::move(out), name);
}

Expected<HostMatrix> read_vector_file(const std::string& path) {
  std::string e = ext_of(path);
  if (e != ".fvecs" && e != ".bvecs" && e != ".ivecs" && e != ".npy")
    return bad(path, "unknown vector file format '" + (e.empty() ? std::string("(no extension)") : e) +
                         "' (expected .fvecs, .bvecs, .ivecs or .npy)");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return diagnosed(DiagCode::ReadFailed, "cannot open '" + path + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return diagnosed(DiagCode::ReadFailed, "cannot read '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    // A pipe or device: read whole (refused past the limit), then parsed.
    UDF_TRY(bytes, read_file(path, limits::kVectorFile));
    if (e == ".npy") return parse_npy(bytes, path);
    return parse_vecs(bytes, vecs_type(e), path);
  }
  // A regular file is checked by its size before anything is read, and read
  // in place: no second copy of the data.
  UDF_TRY_VOID(check_file_size(path, static_cast<std::uint64_t>(st.st_size), limits::kVectorFile));
  VectorFile f{fd, static_cast<std::uint64_t>(st.st_size), path};
  if (e == ".npy") return read_npy(f);
  return read_vecs(f, vecs_type(e));
}

Bytes serialize_npy(const HostMatrix& m) {
  std::string shape = m.one_d ? fmt::format("({},)", m.rows) : fmt::format("({}, {})", m.rows, m.cols);
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", npy_descr(m.dtype), shape);
  std::size_t total = 10 + dict.size() + 1;
  std::size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict.push_back('\n');
  std::string head = "\x93NUMPY";
  head += '\x01';
  head += '\x00';
  head += static_cast<char>(dict.size() & 0xff);
  head += static_cast<char>(dict.size() >> 8);
  head += dict;
  Bytes out(head.size() + m.data.size());
  std::memcpy(out.data(), head.data(), head.size());
  if (!m.data.empty()) std::memcpy(out.data() + head.size(), m.data.data(), m.data.size());
  return out;
}

Expected<void> write_npy(const std::string& path, const HostMatrix& m) { return write_file_atomic(path, serialize_npy(m)); }

Expected<HostMatrix> convert(const HostMatrix& m, DType to, const std::string& name) {
  if (m.dtype == to) return m;
  HostMatrix r = m;
  r.dtype = to;
  std::size_t n = static_cast<std::size_t>(m.rows * m.cols), in = dtype_size(m.dtype), os = dtype_size(to);
  r.data.assign(n * os, 0);
  for (std::size_t i = 0; i < n; ++i) {
    double v = load_as_double(m.data.data() + i * in, m.dtype);
    std::uint8_t* o = r.data.data() + i * os;
    auto range = [&](double lo, double hi) -> Expected<void> {
      if (!(v >= lo && v <= hi) || v != std::floor(v))
        return bad(name, fmt::format("element {} ({}) does not fit {}", i, v, to_string(to)));
      return {};
    };
    switch (to) {
      case DType::F32: { float f = static_cast<float>(v); std::memcpy(o, &f, 4); break; }
      case DType::F16: { std::uint16_t h = float_to_half(static_cast<float>(v)); std::memcpy(o, &h, 2); break; }
      case DType::F64: std::memcpy(o, &v, 8); break;
      case DType::I8: { UDF_TRY_VOID(range(-128, 127)); *o = static_cast<std::uint8_t>(static_cast<std::int8_t>(v)); break; }
      case DType::U8: { UDF_TRY_VOID(range(0, 255)); *o = static_cast<std::uint8_t>(v); break; }
      case DType::I32: { UDF_TRY_VOID(range(-2147483648.0, 2147483647.0)); std::int32_t x = static_cast<std::int32_t>(v); std::memcpy(o, &x, 4); break; }
      case DType::I64: { UDF_TRY_VOID(range(-9.2e18, 9.2e18)); std::int64_t x = static_cast<std::int64_t>(v); std::memcpy(o, &x, 8); break; }
    }
  }
  return r;
}

}  // namespace udf

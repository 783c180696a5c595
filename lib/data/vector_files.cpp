#include "udf/data/vector_files.h"

#include <bit>
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

Expected<HostMatrix> parse_npy(std::span<const std::uint8_t> b, const std::string& name) {
  static const std::uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (b.size() < 10 || std::memcmp(b.data(), magic, 6) != 0)
    return bad(name, b.size() < 10 ? "truncated .npy file (no header)" : "not a .npy file (bad magic)");
  int major = b[6];
  std::size_t hlen, hstart;
  if (major == 1) { hlen = b[8] | b[9] << 8; hstart = 10; }
  else if (major == 2 || major == 3) {
    if (b.size() < 12) return bad(name, "truncated .npy file (no header)");
    hlen = static_cast<std::size_t>(b[8]) | b[9] << 8 | b[10] << 16 | static_cast<std::size_t>(b[11]) << 24;
    hstart = 12;
  } else return bad(name, fmt::format("unsupported .npy format version {}.{}", major, b[7]));
  if (b.size() < hstart + hlen) return bad(name, "truncated .npy file (header runs past the end)");
  std::string_view text(reinterpret_cast<const char*>(b.data() + hstart), hlen);
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
  std::uint64_t have = b.size() - hstart - hlen;
  if (have < need)
    return bad(name, fmt::format("truncated .npy file: shape {}x{} {} needs {} data bytes, found {}", m.rows, m.cols,
                                 to_string(m.dtype), need, have));
  if (have > need) return bad(name, fmt::format("{} bytes after the array's data", have - need));
  m.data.assign(b.begin() + static_cast<std::ptrdiff_t>(hstart + hlen), b.end());
  return m;
}

Expected<HostMatrix> parse_vecs(std::span<const std::uint8_t> b, DType elem, const std::string& name) {
  HostMatrix m;
  m.dtype = elem;
  std::size_t esz = dtype_size(elem);
  std::size_t pos = 0;
  std::int32_t dim0 = -1;
  std::vector<std::uint8_t> out;
  while (pos < b.size()) {
    std::uint64_t rec = m.rows;
    if (b.size() - pos < 4) return bad(name, fmt::format("truncated: vector {} has a partial dimension field", rec));
    std::int32_t d;
    std::memcpy(&d, b.data() + pos, 4);
    if (d <= 0 || d > (1 << 24)) return bad(name, fmt::format("bad header: vector {} has dimension {}", rec, d));
    if (dim0 < 0) {
      dim0 = d;
      std::size_t recsz = 4 + static_cast<std::size_t>(d) * esz;
      out.reserve(b.size() / recsz * d * esz);
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
  if (m.rows == 0) return bad(name, "empty file: no vectors");
  m.cols = static_cast<std::uint64_t>(dim0);
  m.data = std::move(out);
  return m;
}

Expected<HostMatrix> read_vector_file(const std::string& path) {
  std::string e = ext_of(path);
  if (e != ".fvecs" && e != ".bvecs" && e != ".ivecs" && e != ".npy")
    return bad(path, "unknown vector file format '" + (e.empty() ? std::string("(no extension)") : e) +
                         "' (expected .fvecs, .bvecs, .ivecs or .npy)");
  UDF_TRY(bytes, read_file(path));
  if (e == ".npy") return parse_npy(bytes, path);
  return parse_vecs(bytes, e == ".fvecs" ? DType::F32 : e == ".bvecs" ? DType::U8 : DType::I32, path);
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

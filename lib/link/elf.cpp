#include "udf/link/elf.h"

#include <fmt/format.h>

namespace udf {
namespace {
std::uint64_t rd(std::span<const std::uint8_t> b, std::uint64_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(b[at + i]) << (8 * i);
  return v;
}
}  // namespace

Expected<ElfInfo> read_elf(std::span<const std::uint8_t> b, const std::string& name) {
  auto bad = [&](const std::string& w) { return diagnosed(DiagCode::BadElf, fmt::format("{}: not a valid ELF64 cubin: {}", name, w)); };
  if (b.size() < 64 || b[0] != 0x7f || b[1] != 'E' || b[2] != 'L' || b[3] != 'F') return bad("bad magic");
  if (b[4] != 2 || b[5] != 1) return bad("not 64-bit little-endian");
  ElfInfo info;
  info.machine = static_cast<std::uint16_t>(rd(b, 18, 2));
  info.flags = static_cast<std::uint32_t>(rd(b, 48, 4));
  const std::uint64_t shoff = rd(b, 40, 8), shentsize = rd(b, 58, 2), shnum = rd(b, 60, 2);
  if (shentsize != 64) return bad("unexpected section header size");
  if (shoff > b.size() || shnum > (b.size() - shoff) / 64) return bad("section headers outside the file");
  auto sh = [&](std::uint64_t i, int field_off, int n) { return rd(b, shoff + i * 64 + field_off, n); };
  for (std::uint64_t i = 0; i < shnum; ++i) {
    if (sh(i, 4, 4) != 2) continue;  // SHT_SYMTAB
    const std::uint64_t off = sh(i, 24, 8), size = sh(i, 32, 8), link = sh(i, 40, 4), entsize = sh(i, 56, 8);
    if (entsize != 24 || off > b.size() || size > b.size() - off) return bad("symbol table outside the file");
    if (link >= shnum) return bad("symbol table names a bad string table");
    const std::uint64_t stroff = sh(link, 24, 8), strsize = sh(link, 32, 8);
    if (stroff > b.size() || strsize > b.size() - stroff) return bad("string table outside the file");
    for (std::uint64_t s = off; s + 24 <= off + size; s += 24) {
      ElfSymbol sym;
      const std::uint64_t nameoff = rd(b, s, 4);
      if (nameoff >= strsize) return bad("symbol name outside the string table");
      const char* p = reinterpret_cast<const char*>(b.data() + stroff + nameoff);
      std::uint64_t len = 0;
      while (nameoff + len < strsize && p[len] != '\0') ++len;
      sym.name.assign(p, len);
      const std::uint8_t st_info = b[s + 4];
      sym.type = st_info & 0xf;
      sym.binding = st_info >> 4;
      sym.section = static_cast<std::uint16_t>(rd(b, s + 6, 2));
      sym.size = rd(b, s + 16, 8);
      info.symbols.push_back(std::move(sym));
    }
  }
  return info;
}

}  // namespace udf

#include "udf/artifact/container.h"

#include <algorithm>
#include <cstring>

#include "udf/support/hash.h"

namespace udf {
namespace {

constexpr std::uint8_t kMagicArtifact[8] = {0x89, 'U', 'D', 'F', 'A', 'R', 'T', '\n'};
constexpr std::uint8_t kMagicModule[8] = {0x89, 'U', 'D', 'F', 'M', 'O', 'D', '\n'};

void put_u16(Bytes& b, std::size_t at, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_u32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_u64(Bytes& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint64_t get(std::span<const std::uint8_t> b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(b[at + i]) << (8 * i);
  return v;
}
std::uint64_t align16(std::uint64_t x) { return (x + 15) & ~std::uint64_t{15}; }

const char* kind_name(ContainerKind k) { return k == ContainerKind::Artifact ? "UDF artifact" : "UDF module"; }

}  // namespace

const char* to_string(SectionKind k) {
  switch (k) {
    case SectionKind::Manifest: return "manifest";
    case SectionKind::LtoIr: return "lto-ir";
    case SectionKind::Cubin: return "cubin";
    case SectionKind::Fatbin: return "fatbin";
  }
  return "unknown";
}

std::optional<ContainerKind> sniff_container(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < 8) return std::nullopt;
  if (std::memcmp(bytes.data(), kMagicArtifact, 8) == 0) return ContainerKind::Artifact;
  if (std::memcmp(bytes.data(), kMagicModule, 8) == 0) return ContainerKind::Module;
  return std::nullopt;
}

Bytes write_container(const Container& c) {
  std::vector<const Bytes*> datas;
  std::vector<std::pair<SectionKind, std::uint32_t>> heads;
  Bytes manifest(c.manifest_json.begin(), c.manifest_json.end());
  datas.push_back(&manifest);
  heads.emplace_back(SectionKind::Manifest, 0);
  for (const auto& s : c.payloads) {
    datas.push_back(&s.data);
    heads.emplace_back(s.kind, s.tag);
  }
  const std::uint32_t n = static_cast<std::uint32_t>(datas.size());
  std::uint64_t off = align16(kHeaderSize + kSectionEntrySize * n);
  std::vector<std::uint64_t> offsets;
  for (const auto* d : datas) {
    offsets.push_back(off);
    off = align16(off + d->size());
  }
  const std::uint64_t file_size = off + kTrailerSize;
  Bytes out(file_size, 0);
  std::memcpy(out.data(), c.kind == ContainerKind::Artifact ? kMagicArtifact : kMagicModule, 8);
  put_u16(out, 8, kContainerMajor);
  put_u16(out, 10, c.minor);
  put_u32(out, 12, static_cast<std::uint32_t>(kHeaderSize));
  put_u64(out, 16, file_size);
  put_u32(out, 24, n);
  put_u64(out, 32, kHeaderSize);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::size_t e = kHeaderSize + kSectionEntrySize * i;
    put_u32(out, e, static_cast<std::uint32_t>(heads[i].first));
    put_u32(out, e + 4, heads[i].second);
    put_u64(out, e + 8, offsets[i]);
    put_u64(out, e + 16, datas[i]->size());
    Sha256 h = sha256(*datas[i]);
    std::memcpy(out.data() + e + 24, h.data(), 32);
    if (!datas[i]->empty()) std::memcpy(out.data() + offsets[i], datas[i]->data(), datas[i]->size());
  }
  Sha256 total = sha256(std::span(out.data(), file_size - kTrailerSize));
  std::memcpy(out.data() + file_size - kTrailerSize, total.data(), 32);
  return out;
}

Expected<Container> read_container(std::span<const std::uint8_t> b, const std::string& name, ContainerKind expected) {
  auto bad = [&](const std::string& what) { return diagnosed(DiagCode::BadContainer, name + ": " + what); };
  const char* want = kind_name(expected);
  if (b.empty()) return bad(std::string("empty file; expected a ") + want);
  auto sniffed = sniff_container(b);
  if (!sniffed) return bad(std::string("not a ") + want + " (bad magic)");
  if (*sniffed != expected)
    return bad(std::string("is a ") + kind_name(*sniffed) + ", expected a " + want);
  if (b.size() < kHeaderSize + kTrailerSize)
    return bad("truncated: " + std::to_string(b.size()) + " bytes, smaller than the header");
  const auto major = get(b, 8, 2), minor = get(b, 10, 2);
  if (major != kContainerMajor)
    return bad("unsupported format version " + std::to_string(major) + "." + std::to_string(minor) +
               " (this tool reads " + std::to_string(kContainerMajor) + ".x)");
  if (get(b, 12, 4) != kHeaderSize) return bad("bad header_size " + std::to_string(get(b, 12, 4)));
  const std::uint64_t file_size = get(b, 16, 8);
  if (file_size != b.size()) {
    if (file_size > b.size())
      return bad("truncated: header says " + std::to_string(file_size) + " bytes, file has " +
                 std::to_string(b.size()));
    return bad("trailing data: header says " + std::to_string(file_size) + " bytes, file has " +
               std::to_string(b.size()));
  }
  Sha256 total = sha256(b.subspan(0, file_size - kTrailerSize));
  if (std::memcmp(total.data(), b.data() + file_size - kTrailerSize, 32) != 0)
    return bad("checksum mismatch: the file is corrupt");
  // From here on the bytes are what the writer wrote; the checks below catch
  // a writer bug or a crafted file with a recomputed checksum.
  const std::uint64_t n = get(b, 24, 4);
  if (get(b, 28, 4) != 0) return bad("reserved header field at offset 28 is not zero");
  for (std::size_t i = 40; i < 64; ++i)
    if (b[i] != 0) return bad("reserved header bytes 40..63 are not zero");
  if (n == 0 || n > kMaxSections) return bad("bad section_count " + std::to_string(n));
  const std::uint64_t table = get(b, 32, 8);
  if (table != kHeaderSize) return bad("bad section_table_offset " + std::to_string(table));
  const std::uint64_t data_begin = table + kSectionEntrySize * n;
  const std::uint64_t data_end = file_size - kTrailerSize;
  if (data_begin > data_end) return bad("section table (" + std::to_string(n) + " entries) overruns the file");
  Container c;
  c.kind = expected;
  c.minor = static_cast<std::uint16_t>(minor);
  std::uint64_t prev_end = data_begin;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::size_t e = table + kSectionEntrySize * i;
    const std::string sec = "section " + std::to_string(i);
    const auto kind = get(b, e, 4);
    const auto tag = static_cast<std::uint32_t>(get(b, e + 4, 4));
    const auto off = get(b, e + 8, 8), size = get(b, e + 16, 8);
    if (get(b, e + 56, 8) != 0) return bad(sec + ": reserved field is not zero");
    if (kind < 1 || kind > 4) return bad(sec + ": unknown kind " + std::to_string(kind));
    if ((i == 0) != (kind == static_cast<std::uint32_t>(SectionKind::Manifest)))
      return bad(sec + ": the manifest must be section 0 and appear once");
    if (off % 16 != 0) return bad(sec + ": offset " + std::to_string(off) + " is not 16-byte aligned");
    if (off < prev_end) return bad(sec + ": overlaps the previous section or the section table");
    if (off > data_end || size > data_end - off)
      return bad(sec + ": offset " + std::to_string(off) + " + size " + std::to_string(size) +
                 " lies outside the file");
    auto data = b.subspan(off, size);
    Sha256 h = sha256(data);
    if (std::memcmp(h.data(), b.data() + e + 24, 32) != 0) return bad(sec + ": SHA-256 mismatch");
    prev_end = off + size;
    if (i == 0) {
      c.manifest_json.assign(data.begin(), data.end());
    } else {
      c.payloads.push_back(Section{static_cast<SectionKind>(kind), tag, Bytes(data.begin(), data.end())});
    }
  }
  return c;
}

}  // namespace udf

// The artifact container and the artifact on top of it: round trips, and every
// kind of damage a reader must reject.  Structural checks behind the trailing
// checksum are reached by editing a file and recomputing the checksum(s).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "udf/artifact/artifact.h"
#include "udf/artifact/container.h"
#include "udf/support/hash.h"

namespace udf {
namespace {

Bytes payload(std::size_t n, std::uint8_t seed) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(seed + i * 7);
  return b;
}

Artifact sample_artifact() {
  Artifact a;
  auto& m = a.manifest;
  m.source_name = "l2.cu";
  m.source_sha256 = std::string(64, 'a');
  m.symbol = "l2";
  m.finalize = "l2_sqrt";
  m.captures = {Capture{"weights", CaptureType::F32, true}, Capture{"scale", CaptureType::F32, false}};
  m.udfc_version = "0.1.0";
  m.compiler = "nvrtc 13.0";
  m.compiler_options = {"-rdc=true", "-dlto"};
  m.cache_key = std::string(64, 'b');
  a.ltoir[90] = payload(1000, 3);  // not a multiple of 16: padding follows
  a.ltoir[80] = payload(37, 9);
  return a;
}

std::string error_text(const Error& e) {
  std::string s;
  for (const auto& d : e.diagnostics()) s += d.message + "\n";
  return s;
}

void put_u32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_u64(Bytes& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint64_t get_u64(const Bytes& b, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(b[at + i]) << (8 * i);
  return v;
}
// Recomputes the trailing whole-file checksum after an edit.
void reseal(Bytes& b) {
  Sha256 h = sha256(std::span(b.data(), b.size() - kTrailerSize));
  std::memcpy(b.data() + b.size() - kTrailerSize, h.data(), 32);
}
std::size_t entry(std::size_t i) { return kHeaderSize + kSectionEntrySize * i; }

// Expects parse_artifact to fail with a message containing `want`.
void expect_rejected(const Bytes& b, const std::string& want) {
  auto r = parse_artifact(b, "x.udfa");
  ASSERT_FALSE(r) << "accepted; expected: " << want;
  EXPECT_NE(error_text(r.error()).find(want), std::string::npos) << error_text(r.error());
  EXPECT_EQ(r.error().kind(), ErrorKind::Diagnosed);
}

TEST(Artifact, RoundTripIsByteIdentical) {
  Artifact a = sample_artifact();
  Bytes bytes = serialize_artifact(a);
  auto parsed = parse_artifact(bytes, "x.udfa");
  ASSERT_TRUE(parsed) << error_text(parsed.error());
  EXPECT_EQ(parsed->ltoir, a.ltoir);
  ASSERT_EQ(parsed->manifest.targets.size(), 2u);
  EXPECT_EQ(parsed->manifest.targets[0].arch, 80);
  EXPECT_EQ(parsed->manifest.targets[1].arch, 90);
  EXPECT_EQ(parsed->manifest.targets[1].size, 1000u);
  EXPECT_EQ(parsed->manifest.targets[1].sha256, sha256_hex(a.ltoir[90]));
  EXPECT_EQ(parsed->manifest.captures, a.manifest.captures);
  EXPECT_EQ(parsed->manifest.finalize, a.manifest.finalize);
  ASSERT_NE(parsed->payload_for(80), nullptr);
  EXPECT_EQ(*parsed->payload_for(80), a.ltoir[80]);
  EXPECT_EQ(parsed->payload_for(75), nullptr);
  EXPECT_EQ(serialize_artifact(*parsed), bytes);
}

TEST(Artifact, SerializationIsDeterministic) {
  EXPECT_EQ(serialize_artifact(sample_artifact()), serialize_artifact(sample_artifact()));
  Artifact other = sample_artifact();
  other.ltoir[90][0] ^= 1;
  EXPECT_NE(serialize_artifact(other), serialize_artifact(sample_artifact()));
}

TEST(Artifact, LayoutIsAligned) {
  Bytes b = serialize_artifact(sample_artifact());
  EXPECT_EQ(b.size() % 16, 0u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(get_u64(b, entry(i) + 8) % 16, 0u) << "section " << i;
}

TEST(Artifact, EveryTruncationIsRejected) {
  Bytes b = serialize_artifact(sample_artifact());
  for (std::size_t n = 0; n < b.size(); ++n) {
    Bytes cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = parse_artifact(cut, "x.udfa");
    ASSERT_FALSE(r) << "a file truncated to " << n << " of " << b.size() << " bytes was accepted";
    EXPECT_FALSE(r.error().message().empty());
  }
}

TEST(Artifact, BitFlipsAreRejected) {
  Bytes b = serialize_artifact(sample_artifact());
  int tried = 0;
  for (std::size_t pos = 0; pos < b.size(); pos += 3) {
    for (int bit : {0, 7}) {
      Bytes c = b;
      c[pos] ^= static_cast<std::uint8_t>(1u << bit);
      auto r = parse_artifact(c, "x.udfa");
      ASSERT_FALSE(r) << "flipping bit " << bit << " of byte " << pos << " was not noticed";
      EXPECT_NE(r.error().message().find("x.udfa"), std::string::npos) << r.error().message();
      ++tried;
    }
  }
  EXPECT_GT(tried, 1000);
}

TEST(Artifact, WrongMagicAndOtherKinds) {
  Bytes b = serialize_artifact(sample_artifact());
  Bytes bad = b;
  bad[1] = 'X';
  expect_rejected(bad, "not a UDF artifact (bad magic)");
  expect_rejected(Bytes{}, "empty file");
  std::string text = "extern \"C\" __device__ float f();";
  expect_rejected(Bytes(text.begin(), text.end()), "bad magic");

  Container module{ContainerKind::Module, 0, "{}", {}};
  Bytes mod = write_container(module);
  EXPECT_EQ(sniff_container(mod), ContainerKind::Module);
  EXPECT_EQ(sniff_container(b), ContainerKind::Artifact);
  expect_rejected(mod, "is a UDF module, expected a UDF artifact");
  auto as_module = read_container(b, "x.udfa", ContainerKind::Module);
  ASSERT_FALSE(as_module);
  EXPECT_NE(as_module.error().message().find("is a UDF artifact, expected a UDF module"), std::string::npos);
}

TEST(Artifact, SizeAndVersionFields) {
  Bytes b = serialize_artifact(sample_artifact());
  Bytes longer = b;
  longer.resize(b.size() + 16, 0);
  expect_rejected(longer, "trailing data");

  Bytes major = b;
  major[8] = 2;
  reseal(major);
  expect_rejected(major, "unsupported format version 2.0");

  Bytes minor = b;
  minor[10] = 7;  // a newer minor version is read
  reseal(minor);
  auto r = read_container(minor, "x.udfa", ContainerKind::Artifact);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->minor, 7);

  Bytes header = b;
  put_u32(header, 12, 128);
  reseal(header);
  expect_rejected(header, "bad header_size 128");

  Bytes fsize = b;
  put_u64(fsize, 16, b.size() + 1000);
  reseal(fsize);
  expect_rejected(fsize, "truncated: header says");
}

TEST(Artifact, ChecksumMismatch) {
  Bytes b = serialize_artifact(sample_artifact());
  b[b.size() - 1] ^= 0xff;
  expect_rejected(b, "checksum mismatch");
}

TEST(Artifact, SectionCountAndTable) {
  Bytes b = serialize_artifact(sample_artifact());
  Bytes zero = b;
  put_u32(zero, 24, 0);
  reseal(zero);
  expect_rejected(zero, "bad section_count 0");

  Bytes huge = b;
  put_u32(huge, 24, kMaxSections + 1);
  reseal(huge);
  expect_rejected(huge, "bad section_count 4097");

  Bytes overrun = b;
  put_u32(overrun, 24, 1000);
  reseal(overrun);
  expect_rejected(overrun, "section table (1000 entries) overruns the file");

  Bytes table = b;
  put_u64(table, 32, 128);
  reseal(table);
  expect_rejected(table, "bad section_table_offset 128");

  Bytes fewer = b;  // two sections are read; the manifest lists two targets
  put_u32(fewer, 24, 2);
  reseal(fewer);
  expect_rejected(fewer, "the manifest lists 2 targets but the file holds 1 payloads");
}

TEST(Artifact, SectionBounds) {
  Bytes b = serialize_artifact(sample_artifact());
  Bytes size = b;
  put_u64(size, entry(2) + 16, std::uint64_t{1} << 62);
  reseal(size);
  expect_rejected(size, "section 2: offset");
  expect_rejected(size, "lies outside the file");

  Bytes off = b;
  put_u64(off, entry(2) + 8, 0xfffffffffffffff0ull);
  reseal(off);
  expect_rejected(off, "lies outside the file");

  Bytes overlap = b;
  put_u64(overlap, entry(2) + 8, get_u64(b, entry(1) + 8));
  reseal(overlap);
  expect_rejected(overlap, "section 2: overlaps the previous section");

  Bytes into_table = b;
  put_u64(into_table, entry(0) + 8, kHeaderSize);
  reseal(into_table);
  expect_rejected(into_table, "section 0: overlaps the previous section or the section table");

  Bytes misaligned = b;
  put_u64(misaligned, entry(1) + 8, get_u64(b, entry(1) + 8) + 4);
  reseal(misaligned);
  expect_rejected(misaligned, "section 1: offset");
  expect_rejected(misaligned, "is not 16-byte aligned");

  Bytes hash = b;
  hash[get_u64(b, entry(1) + 8)] ^= 1;  // payload byte, whole-file checksum redone
  reseal(hash);
  expect_rejected(hash, "section 1: SHA-256 mismatch");
}

TEST(Artifact, ReservedFieldsMustBeZero) {
  Bytes b = serialize_artifact(sample_artifact());
  Bytes r28 = b;
  r28[28] = 1;
  reseal(r28);
  expect_rejected(r28, "reserved header field at offset 28 is not zero");
  for (std::size_t at : {40u, 51u, 63u}) {
    Bytes r = b;
    r[at] = 0x80;
    reseal(r);
    expect_rejected(r, "reserved header bytes 40..63 are not zero");
  }
  Bytes rs = b;
  rs[entry(1) + 56] = 1;
  reseal(rs);
  expect_rejected(rs, "section 1: reserved field is not zero");
}

TEST(Artifact, SectionKinds) {
  Bytes b = serialize_artifact(sample_artifact());
  Bytes unknown = b;
  put_u32(unknown, entry(1), 9);
  reseal(unknown);
  expect_rejected(unknown, "section 1: unknown kind 9");

  Bytes second_manifest = b;
  put_u32(second_manifest, entry(1), static_cast<std::uint32_t>(SectionKind::Manifest));
  reseal(second_manifest);
  expect_rejected(second_manifest, "the manifest must be section 0 and appear once");

  Bytes cubin = b;  // valid container, but an artifact holds LTO-IR only
  put_u32(cubin, entry(1), static_cast<std::uint32_t>(SectionKind::Cubin));
  reseal(cubin);
  ASSERT_TRUE(read_container(cubin, "x.udfa", ContainerKind::Artifact));
  expect_rejected(cubin, "section 1 is cubin, expected lto-ir");
}

// Containers whose manifest disagrees with the payloads.
Bytes with_payloads(const ArtifactManifest& m, std::vector<Section> payloads) {
  Container c{ContainerKind::Artifact, 0, to_json(m), std::move(payloads)};
  return write_container(c);
}

TEST(Artifact, ManifestMustMatchSections) {
  Artifact a = sample_artifact();
  Bytes good = serialize_artifact(a);
  auto parsed = parse_artifact(good, "x.udfa");
  ASSERT_TRUE(parsed);
  const ArtifactManifest& m = parsed->manifest;

  expect_rejected(with_payloads(m, {Section{SectionKind::LtoIr, 80, a.ltoir[80]}}),
                  "the manifest lists 2 targets but the file holds 1 payloads");
  expect_rejected(with_payloads(m, {Section{SectionKind::LtoIr, 86, a.ltoir[80]}, Section{SectionKind::LtoIr, 90, a.ltoir[90]}}),
                  "section 1 is for arch 86, but targets[0] is sm_80");
  Bytes changed = a.ltoir[90];
  changed[5] ^= 1;
  expect_rejected(with_payloads(m, {Section{SectionKind::LtoIr, 80, a.ltoir[80]}, Section{SectionKind::LtoIr, 90, changed}}),
                  "section 2 does not match targets[1] (size or sha256)");
  Bytes shorter(a.ltoir[80].begin(), a.ltoir[80].end() - 1);
  expect_rejected(with_payloads(m, {Section{SectionKind::LtoIr, 80, shorter}, Section{SectionKind::LtoIr, 90, a.ltoir[90]}}),
                  "section 1 does not match targets[0]");
  // Several mismatches are all reported.
  auto r = parse_artifact(with_payloads(m, {Section{SectionKind::LtoIr, 86, shorter}, Section{SectionKind::LtoIr, 90, changed}}), "x.udfa");
  ASSERT_FALSE(r);
  EXPECT_GE(r.error().diagnostics().size(), 3u) << error_text(r.error());

  // A manifest that is not JSON, or breaks the manifest rules.
  Container bad_json{ContainerKind::Artifact, 0, "{not json", {}};
  expect_rejected(write_container(bad_json), "the manifest is not valid JSON");
  Container not_object{ContainerKind::Artifact, 0, "[1, 2]", {}};
  expect_rejected(write_container(not_object), "the manifest is not a JSON object");
}

}  // namespace
}  // namespace udf

// The binary container shared by artifacts (.udfa) and linked modules (.udfm).
//
// Layout (all integers little-endian):
//
//   0   magic[8]          "\x89UDFART\n" (artifact) or "\x89UDFMOD\n" (module)
//   8   u16 major = 1, u16 minor = 0
//   12  u32 header_size = 64
//   16  u64 file_size           whole file, trailer included
//   24  u32 section_count       1 .. kMaxSections; section 0 is the JSON manifest
//   28  u32 reserved = 0
//   32  u64 section_table_offset = 64
//   40  24 bytes reserved = 0
//   64  section table: section_count entries of 64 bytes
//         u32 kind, u32 tag (arch number for code, e.g. 90), u64 offset, u64 size,
//         u8 sha256[32], u64 reserved = 0
//   ..  section data, each starting 16-byte aligned, zero padding between
//   end-32  u8 sha256[32] of every byte before it
//
// The reader checks everything before handing anything out: magic, version,
// sizes against the real file size, the trailing checksum, that sections lie
// inside the data area, are aligned and do not overlap, and each section's
// SHA-256.  This file owns that format; nothing else reads or writes it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "udf/support/error.h"
#include "udf/support/fs.h"

namespace udf {

enum class ContainerKind { Artifact, Module };

enum class SectionKind : std::uint32_t {
  Manifest = 1,  // JSON manifest, always section 0
  LtoIr = 2,     // NVVM LTO-IR for one arch
  Cubin = 3,     // linked ELF cubin for one arch
  Fatbin = 4,    // nvFatbin image holding every arch
};

const char* to_string(SectionKind k);

struct Section {
  SectionKind kind;
  std::uint32_t tag = 0;  // arch number (90 for sm_90) for code sections
  Bytes data;
};

struct Container {
  ContainerKind kind;
  std::uint16_t minor = 0;
  std::string manifest_json;
  std::vector<Section> payloads;  // every section after the manifest, in order
};

inline constexpr std::uint16_t kContainerMajor = 1;
inline constexpr std::uint16_t kContainerMinor = 0;
inline constexpr std::uint32_t kMaxSections = 4096;
inline constexpr std::uint64_t kHeaderSize = 64;
inline constexpr std::uint64_t kSectionEntrySize = 64;
inline constexpr std::uint64_t kTrailerSize = 32;

/// Serializes a container.  Deterministic: same inputs, same bytes.
Bytes write_container(const Container& c);

/// Parses and fully validates a container; `name` is used in diagnostics.
/// `expected` is the kind the caller wants; a file of the other kind is an error
/// that says what the file is.
Expected<Container> read_container(std::span<const std::uint8_t> bytes, const std::string& name,
                                   ContainerKind expected);

/// Which kind a file claims to be by its magic, without validating it.
std::optional<ContainerKind> sniff_container(std::span<const std::uint8_t> bytes);

}  // namespace udf

// A small ELF64 reader for cubins: just enough to list symbols, with every
// offset bounds-checked.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "udf/support/error.h"

namespace udf {

struct ElfSymbol {
  std::string name;
  std::uint8_t type = 0;     // STT_FUNC = 2, STT_OBJECT = 1, ...
  std::uint8_t binding = 0;  // STB_LOCAL = 0, STB_GLOBAL = 1, STB_WEAK = 2
  std::uint16_t section = 0;
  std::uint64_t size = 0;
  bool is_function() const { return type == 2; }
};

struct ElfInfo {
  std::uint16_t machine = 0;  // EM_CUDA = 190
  std::uint32_t flags = 0;    // for cubins: holds the SM version
  std::vector<ElfSymbol> symbols;
};

Expected<ElfInfo> read_elf(std::span<const std::uint8_t> image, const std::string& name);

}  // namespace udf

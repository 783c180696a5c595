// Which of the kernel pack's LTO-IR files one nvcc run makes (kernels/CMakeLists.txt).
//
// The pack is one LTO-IR file per family of variants (gen_manifest.py
// --list-files names them): an nvJitLink run parses every input it is given,
// so a link should be given only the families its entries use.
// One source defines every family; the run for file F is compiled with
// -DUDF_PACK_FILE_F=UDF_PACK_PROBE, and UDF_PACK_WHEN(F, code) keeps `code`
// only there (the preprocessor's "probe" idiom: an undefined
// UDF_PACK_FILE_F is a lone token, a defined one expands to two).
#pragma once

#define UDF_PACK_CAT_(a, b) a##b
#define UDF_PACK_CAT(a, b) UDF_PACK_CAT_(a, b)
#define UDF_PACK_SECOND_(a, b, ...) b
#define UDF_PACK_SECOND(...) UDF_PACK_SECOND_(__VA_ARGS__)
#define UDF_PACK_PROBE ~, 1
#define UDF_PACK_IS_PROBE(x) UDF_PACK_SECOND(x, 0, ~)
#define UDF_PACK_IF_1(...) __VA_ARGS__
#define UDF_PACK_IF_0(...)
#define UDF_PACK_WHEN(file, ...) \
  UDF_PACK_CAT(UDF_PACK_IF_, UDF_PACK_IS_PROBE(UDF_PACK_CAT(UDF_PACK_FILE_, file)))(__VA_ARGS__)

#!/usr/bin/env python3
"""Lists what a CUDA fatbin holds: one line per image, and the function
symbols of every ELF cubin in it.

    fatbin-info.py [--symbols | --functions] FILE

FILE is a udf module (.udfm: the container of include/udf/artifact/container.h,
whose fatbin sections are read: one per linked entry since module 1.7), a raw
fatbin (udf-link --emit fatbin, or `fatbinary --create`), or a single ELF
cubin (udf-link --emit cubin, --save-temps).  Prints, for each fatbin (after
"section N: " when a module holds several)

    fatbin: N image(s), SIZE bytes
    cubin sm_90 SIZE [name NAME]           (a lone cubin: its arch from the ELF header's e_flags)
      func GLOBAL udf_ivf_scan_v1__l2__f32_f32_min_k32      (with --symbols, sorted)
    ptx sm_90 SIZE

With --functions, only the function symbols of every cubin of the file,
whichever fatbin holds them, one line each, by arch then name:

    sm_90 GLOBAL udf_ivf_merge_v1_min_k32

Exit status: 0, or 1 when the file is malformed (every size is checked
against the file), 2 for a bad command line.

The fatbin layout, checked against files written by nvFatbin 13.0 and by
CUDA 13.0's `fatbinary --create` (all integers little-endian):

    header (16 bytes): u32 magic 0xBA55ED50, u16 version (1), u16 header size (16),
                       u64 size of the entries that follow
    entry header:      0  u16 kind (1 = PTX, 2 = ELF, 4 = LTO-IR)
                       2  u16 (0x0101)
                       4  u32 entry header size (64 for fatbinary, 88 with a name from nvFatbin)
                       8  u64 payload size
                       16 u32 compressed size (0: not compressed)
                       20 u32 0
                       24 u16 minor, u16 major  (8, 1)
                       28 u32 sm arch (90 for sm_90)
                       32 u32 name offset in the entry header (0: none), 36 u32 name length
                       40 u64 flags ...
    payload:           header size bytes after the entry header; the next
                       entry follows the payload.
"""
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
MODULE_MAGIC = b"\x89UDFMOD\n"
ARTIFACT_MAGIC = b"\x89UDFART\n"
SECTION_FATBIN = 4
KINDS = {1: "ptx", 2: "cubin", 4: "lto-ir"}
STT_FUNC = 2
BINDINGS = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK"}


class Malformed(Exception):
    pass


def need(cond, what):
    if not cond:
        raise Malformed(what)


def fatbins_of_module(b):
    """Every fatbin section of a module, in section order (one a linked entry since module 1.7)."""
    need(len(b) >= 64 + 32, "module shorter than its header")
    (count,) = struct.unpack_from("<I", b, 24)
    (table,) = struct.unpack_from("<Q", b, 32)
    need(table + 64 * count <= len(b), "section table outside the file")
    out = []
    for i in range(count):
        kind, _tag, off, size = struct.unpack_from("<IIQQ", b, table + 64 * i)
        if kind == SECTION_FATBIN:
            need(off + size <= len(b), "fatbin section outside the file")
            out.append(b[off:off + size])
    need(out, "the module has no fatbin section")
    return out


def fatbin_of_module(b):
    """The module's only fatbin (raises Malformed when it has several)."""
    fats = fatbins_of_module(b)
    need(len(fats) == 1, "the module holds %d fatbins" % len(fats))
    return fats[0]


def elf_arch(b):
    """The SM version of a cubin: e_flags bits 8..15 for CUDA's ELF ABI (OSABI 0x41), else None."""
    if len(b) >= 52 and b[:4] == b"\x7fELF" and b[7] == 0x41:
        return (struct.unpack_from("<I", b, 48)[0] >> 8) & 0xFF
    return None


def elf_functions(b):
    """(binding, name) of every STT_FUNC symbol of an ELF64 little-endian file."""
    need(len(b) >= 64 and b[:4] == b"\x7fELF", "not an ELF file")
    need(b[4] == 2 and b[5] == 1, "not ELF64 little-endian")
    (shoff,) = struct.unpack_from("<Q", b, 40)
    shentsize, shnum = struct.unpack_from("<HH", b, 58)
    need(shentsize == 64 and shoff + 64 * shnum <= len(b), "section headers outside the file")

    def sh(i):
        return struct.unpack_from("<IIQQQQIIQQ", b, shoff + 64 * i)

    out = []
    for i in range(shnum):
        _name, typ, _flags, _addr, off, size, link, _info, _align, entsize = sh(i)
        if typ != 2:  # SHT_SYMTAB
            continue
        need(entsize == 24 and off + size <= len(b) and link < shnum, "bad symbol table")
        stroff, strsize = sh(link)[4], sh(link)[5]
        need(stroff + strsize <= len(b), "string table outside the file")
        for s in range(off, off + size - size % 24, 24):
            (nameoff,) = struct.unpack_from("<I", b, s)
            info = b[s + 4]
            if info & 0xF != STT_FUNC:
                continue
            need(nameoff < strsize, "symbol name outside the string table")
            end = b.index(b"\0", stroff + nameoff, stroff + strsize) if b"\0" in b[stroff + nameoff:stroff + strsize] \
                else stroff + strsize
            out.append((BINDINGS.get(info >> 4, str(info >> 4)), b[stroff + nameoff:end].decode("ascii", "replace")))
    return sorted(out, key=lambda x: x[1])


def images(fat):
    need(len(fat) >= 16, "fatbin shorter than its header")
    magic, version, hsize, total = struct.unpack_from("<IHHQ", fat, 0)
    need(magic == FATBIN_MAGIC, "bad fatbin magic 0x%08X" % magic)
    need(version == 1 and hsize == 16, "unknown fatbin version %d / header size %d" % (version, hsize))
    need(hsize + total <= len(fat), "fatbin header says %d bytes, the data holds %d" % (total, len(fat) - hsize))
    pos, end, out = hsize, hsize + total, []
    while pos < end:
        need(pos + 32 <= end, "entry header outside the fatbin")
        kind, _x, ehsize, psize, csize = struct.unpack_from("<HHIQI", fat, pos)
        (arch,) = struct.unpack_from("<I", fat, pos + 28)
        name_off, name_len = struct.unpack_from("<II", fat, pos + 32) if ehsize >= 40 else (0, 0)
        need(ehsize >= 32 and pos + ehsize + psize <= end, "entry payload outside the fatbin")
        name = ""
        if name_off and name_len and name_off + name_len <= ehsize:
            name = fat[pos + name_off:pos + name_off + name_len].split(b"\0")[0].decode("ascii", "replace")
        out.append((KINDS.get(kind, "kind%d" % kind), arch, fat[pos + ehsize:pos + ehsize + psize], csize, name))
        pos += ehsize + psize
    need(pos == end, "entries overrun the fatbin")
    return out


def main(argv):
    symbols = "--symbols" in argv
    functions = "--functions" in argv
    files = [a for a in argv if a not in ("--symbols", "--functions")]
    if len(files) != 1 or files[0].startswith("-"):
        sys.stderr.write("usage: fatbin-info.py [--symbols | --functions] FILE\n")
        return 2
    path = files[0]
    try:
        with open(path, "rb") as f:
            b = f.read()
        if b[:8] == ARTIFACT_MAGIC:
            raise Malformed("a UDF artifact (.udfa), not a module: it holds LTO-IR, not a fatbin")
        fats = fatbins_of_module(b) if b[:8] == MODULE_MAGIC else [b]
        if functions:  # every cubin's function symbols, whatever image holds them: "sm_XX BINDING NAME", sorted
            lines = set()
            for fat in fats:
                ims = [("cubin", elf_arch(fat), fat, 0, "")] if fat[:4] == b"\x7fELF" else images(fat)
                for kind, arch, payload, csize, _name in ims:
                    if kind == "cubin" and not csize:
                        lines |= {"sm_%s %s %s" % (arch, binding, fn) for binding, fn in elf_functions(payload)}
            sys.stdout.write("".join(line + "\n" for line in sorted(lines, key=lambda x: (int(x.split()[0][3:]), x))))
            return 0
        for n, fat in enumerate(fats):
            if len(fats) > 1:
                sys.stdout.write("section %d: " % (n + 1))
            if fat[:4] == b"\x7fELF":
                ims = [("cubin", elf_arch(fat), fat, 0, "")]
            else:
                ims = images(fat)
                sys.stdout.write("fatbin: %d image(s), %d bytes\n" % (len(ims), len(fat)))
            for kind, arch, payload, csize, name in ims:
                where = "" if arch is None else " sm_%d" % arch
                sys.stdout.write("%s%s %d%s%s\n" % (kind, where, len(payload), " compressed" if csize else "",
                                                    " name " + name if name else ""))
                if kind == "cubin" and not csize and elf_arch(payload) not in (None, arch):
                    raise Malformed("the sm_%s image holds a cubin for sm_%s" % (arch, elf_arch(payload)))
                if symbols and kind == "cubin" and not csize:
                    for binding, fn in elf_functions(payload):
                        sys.stdout.write("  func %s %s\n" % (binding, fn))
    except OSError as e:
        sys.stderr.write("fatbin-info: error: %s: %s\n" % (path, e))
        return 1
    except (Malformed, struct.error, ValueError) as e:
        sys.stderr.write("fatbin-info: error: %s: malformed: %s\n" % (path, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What a linked firmware image holds, read from its ELF file (32-bit, little-endian: the
Arm and the RISC-V images of both parts).

`--build` sizes the RISC-V half of a dual-core project with this reader rather than with
the RISC-V toolchain's `size`, whose name depends on the toolchain that built it; the
firmware tests use it to check where the linker put each section. Only the headers,
the section table and the symbol table are read.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import Ai8xError

SHT_SYMTAB = 2
SHT_NOBITS = 8
SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
PT_LOAD = 1
_MAGIC = b"\x7fELF\x01\x01"  # ELFCLASS32, little-endian


@dataclass(frozen=True)
class Section:
    """One section: where it runs (`addr`), where its bytes come from (`load`, the flash
    address of initialised data; `addr` for everything else), its size and flags."""

    name: str
    kind: int
    flags: int
    addr: int
    load: int
    size: int
    offset: int

    @property
    def allocated(self) -> bool:
        return bool(self.flags & SHF_ALLOC) and self.size > 0

    @property
    def has_bytes(self) -> bool:
        return self.kind != SHT_NOBITS


@dataclass(frozen=True)
class Elf:
    """A parsed image: its sections and symbols (name -> value)."""

    path: Path
    machine: int
    sections: tuple[Section, ...]
    symbols: dict[str, int]

    def allocated(self) -> tuple[Section, ...]:
        return tuple(s for s in self.sections if s.allocated)

    def bytes_at(self, addr: int, size: int) -> bytes:
        """The file's contents for `size` bytes at run address `addr` (one section)."""
        for sec in self.sections:
            if sec.allocated and sec.has_bytes and sec.addr <= addr \
                    and addr + size <= sec.addr + sec.size:
                start = sec.offset + addr - sec.addr
                return self.path.read_bytes()[start:start + size]
        raise Ai8xError("build.elf", str(self.path),
                        f"no section holds {size} bytes at 0x{addr:08x}", "rebuild the project")


def berkeley_sizes(elf: Elf) -> tuple[int, int, int]:
    """text, data, bss as GNU size's Berkeley format counts them: allocated sections that
    are code or read-only are text, other sections with contents data, the rest bss."""
    text = data = bss = 0
    for sec in elf.allocated():
        if sec.flags & SHF_EXECINSTR or not sec.flags & SHF_WRITE:
            text += sec.size
        elif sec.has_bytes:
            data += sec.size
        else:
            bss += sec.size
    return text, data, bss


def _fail(path: Path, why: str) -> Ai8xError:
    return Ai8xError("build.elf", str(path), why, "rebuild the project")


def _cstring(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("ascii", "replace")


def _load_addresses(raw: bytes, phoff: int, phentsize: int, phnum: int) -> list[tuple]:
    """(file offset, file size, physical address) of each loaded segment."""
    out = []
    for i in range(phnum):
        kind, offset, _vaddr, paddr, filesz = struct.unpack_from(
            "<5I", raw, phoff + i * phentsize)
        if kind == PT_LOAD:
            out.append((offset, filesz, paddr))
    return out


def read_elf(path: Path) -> Elf:
    """Parse `path`; an Ai8xError (build.elf) when it is not a 32-bit little-endian ELF."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise _fail(path, f"cannot be read: {err.strerror}") from None
    if not raw.startswith(_MAGIC) or len(raw) < 52:
        raise _fail(path, "not a 32-bit little-endian ELF file")
    machine, = struct.unpack_from("<H", raw, 18)
    phoff, shoff = struct.unpack_from("<2I", raw, 28)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<5H", raw, 42)
    if shoff + shnum * shentsize > len(raw) or shstrndx >= shnum:
        raise _fail(path, "its section table lies outside the file")
    heads = [struct.unpack_from("<10I", raw, shoff + i * shentsize) for i in range(shnum)]
    names = raw[heads[shstrndx][4]:heads[shstrndx][4] + heads[shstrndx][5]]
    segments = _load_addresses(raw, phoff, phentsize, phnum)
    sections = []
    for name, kind, flags, addr, offset, size, *_ in heads:
        load = addr
        for seg_off, seg_size, paddr in segments:
            if kind != SHT_NOBITS and seg_off <= offset < seg_off + seg_size:
                load = paddr + offset - seg_off
                break
        sections.append(Section(_cstring(names, name), kind, flags, addr, load, size, offset))
    symbols: dict[str, int] = {}
    for head in heads:
        if head[1] != SHT_SYMTAB:
            continue
        strtab = heads[head[6]]
        strings = raw[strtab[4]:strtab[4] + strtab[5]]
        for pos in range(head[4], head[4] + head[5], 16):
            name, value = struct.unpack_from("<2I", raw, pos)
            if name:
                symbols.setdefault(_cstring(strings, name), value)
    return Elf(path=path, machine=machine, sections=tuple(sections), symbols=symbols)

"""The firmware's flash and SRAM, estimated from a project's sources before it is written
(issue 27 item 7): a project whose arrays do not fit the part fails at link time, long
after the conversion said nothing (a large U-Net with the default check lines needs
113 % of the MAX78000's flash).

What the estimate counts, read from the generated C itself so that it follows whatever
the emitter writes:

- the arrays: every `static [const] uintN_t name[] = MACRO;` (or with a size and no
  initializer, or with a size and its values in place, as the Arm-core layers of
  --cpu-fallback write them) in the project's .c files, a macro's element count read
  from its initializer in the headers (the expected output only where main.c checks
  it). A const array is flash; an initialized one is flash and SRAM (its initial values
  are copied at start-up); one without initializer is SRAM. The Arm-core layers'
  constant arrays and window records (cpu_layers.c) are weights.
- the code: a fixed part (the SDK's start-up, drivers and C library a project links)
  plus a cost per C statement of the project's own sources (register writes, mostly).
  The fixed part is the device's (`Device.firmware_code_bytes`); both are calibrated on
  the projects tests/emit/test_firmware_build.py builds with the MSDK and
  arm-none-eabi-gcc -Os (that test checks the estimate against the linked sizes).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..devices import Device
from ..errors import Ai8xError

# Calibration (tests/emit/test_firmware_build.py, the MSDK's make flow, -Os, six
# projects of 208 to 678 statements): the linked text+data of a project minus its
# arrays grows by about 4.5 bytes per statement of its own sources over a fixed part
# (Device.firmware_code_bytes); within 300 bytes on every project measured.
CODE_BYTES_PER_TWO_STATEMENTS = 9

_ELEMENT = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4,
            "uint32_t": 4}
_ARRAY = re.compile(r"^\s*static\s+(const\s+)?(u?int(?:8|16|32)_t)\s+(\w+)\s*"
                    r"\[\s*(\w*)\s*\]\s*(?:=\s*(\w+)\s*;|;|=\s*\{)", re.M)
# a constant record of 32-bit fields with its values in place (the Arm-core layers'
# `cpu_window_t` geometry, cpu/templates/cpu_layers.c.j2)
_RECORD = re.compile(r"^\s*static\s+const\s+\w+_t\s+\w+\s*=\s*\{([^{};]*)\}\s*;", re.M)


@dataclass(frozen=True)
class Footprint:
    """Estimated bytes of the linked firmware."""

    code: int  # flash: instructions, the SDK's and the project's
    weights: int  # flash: the kernel stream and the biases
    known_answer: int  # flash: the sample input and the expected output
    other_flash: int  # flash: the project's other constant arrays
    sram: int  # data + bss: the SDK's share, stack, and the project's variables

    @property
    def flash(self) -> int:
        return self.code + self.weights + self.known_answer + self.other_flash


_MACRO_HEAD = re.compile(r"#define\s+(\w+)\s*\{")
_EMPTY_BETWEEN = re.compile(r",\s*,")


def _macro_bodies(text: str):
    """(name, body) of each `#define NAME { body }` starting a line (found with str.find:
    a regular expression anchored at line starts tries every character of the sample
    data and the kernel stream)."""
    start = text.find("#define")
    while start >= 0:
        head = _MACRO_HEAD.match(text, start) if start == 0 or text[start - 1] == "\n" \
            else None
        end = text.find("}", head.end()) if head else -1
        if end < 0:
            start = text.find("#define", start + 1)
            continue
        yield head.group(1), text[head.end():end]
        start = text.find("#define", end + 1)


def _items(body: str) -> int:
    """The comma-separated items of an initializer that hold something."""
    if _EMPTY_BETWEEN.search(body):
        return len([t for t in body.split(",") if t.strip()])
    first = body.find(",")
    if first < 0:
        return 1 if body.strip() else 0
    last = body.rfind(",")
    return (body.count(",") + 1 - (not body[:first].strip())
            - (not body[last + 1:].strip()))


def _macros(sources: dict[str, str]) -> dict[str, int]:
    """Element count of every `#define NAME { ... }` initializer."""
    counts = {}
    for text in sources.values():
        for name, body in _macro_bodies(text):
            counts[name] = _items(re.sub(r"\\\n", " ", body))
    return counts


def _statements(text: str) -> int:
    """C statements outside array initializers and comments (one `;` each)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return text.count(";")


def estimate(files: Mapping[str, bytes | str], device: Device) -> Footprint:
    """The footprint of the project made of `files` (name -> contents, as written or as
    rendered text)."""
    sources = {name: data if isinstance(data, str) else data.decode("utf-8", "replace")
               for name, data in files.items() if name.endswith((".c", ".h"))}
    counts = _macros(sources)
    # with --no-kat main.c no longer calls check_output(), and the linker
    # (--gc-sections) drops it with the expected output it reads
    checked = sum(text.count("check_output(") for text in sources.values()) > 1
    weights = known = other = sram = 0
    statements = 0
    for name, text in sources.items():
        if not name.endswith(".c"):
            continue
        statements += _statements(text)
        cpu = name.endswith("cpu_layers.c")
        for m in _RECORD.finditer(text):
            weights += 4 * len([f for f in m.group(1).split(",") if f.strip()])
        for m in _ARRAY.finditer(text):
            const, kind, array, size, macro = m.groups()
            inline = m.group(0).rstrip().endswith("{")
            n = counts.get(macro, 0) if macro else (int(size) if size.isdigit() else 0)
            nbytes = n * _ELEMENT[kind]
            if not (const or macro or inline):
                sram += nbytes
                continue
            if not const:
                sram += nbytes
            if array == "sample_output" and not checked:
                continue
            if cpu or array.startswith(("kernels", "bias")):
                weights += nbytes
            elif array.startswith(("input", "sample_output")):
                known += nbytes
            else:
                other += nbytes
    code = device.firmware_code_bytes + CODE_BYTES_PER_TWO_STATEMENTS * statements // 2
    return Footprint(code=code, weights=weights, known_answer=known, other_flash=other,
                     sram=device.firmware_sram_bytes + sram)


def check_fit(footprint: Footprint, device: Device, where: str) -> None:
    """Refuse a project whose firmware would not fit the part (the user may write it
    anyway with --allow-oversize)."""
    over = []
    if footprint.flash > device.flash_bytes:
        over.append(f"about {footprint.flash:,} B of flash (code {footprint.code:,}, "
                    f"weights {footprint.weights:,}, known-answer data "
                    f"{footprint.known_answer:,}), the {device.name} has "
                    f"{device.flash_bytes:,} B")
    if footprint.sram > device.sram_bytes:
        over.append(f"about {footprint.sram:,} B of SRAM, the {device.name} has "
                    f"{device.sram_bytes:,} B")
    if not over:
        return
    hint = ("check fewer output words (--max-checklines N) or leave the known-answer "
            "test out (--no-kat)" if footprint.known_answer else
            "use fewer or narrower weights, or the larger part")
    raise Ai8xError("emit.firmware-size", where,
                    "the firmware would not fit: it needs " + "; ".join(over),
                    hint + "; --allow-oversize writes the project anyway")


def project_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in Path(directory).iterdir()
            if p.is_file() and p.suffix in (".c", ".h")}


__all__ = ["Footprint", "check_fit", "estimate", "project_files"]

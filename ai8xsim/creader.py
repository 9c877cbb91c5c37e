"""Read a generated C project into the ordered list of what it does to the accelerator.

The reader follows `main()` of the project: each call of a function defined in the
project's C files is entered (in call order), and inside a function the statement forms
that touch the accelerator are collected in source order:

- `*((volatile uint32_t *) 0xADDR) = | |= | &= VALUE;` register and memory writes;
- `memcpy32((uint32_t *) 0xADDR, array, n)`: n words (sample input);
- `memcpy_8to32((uint32_t *) 0xADDR, array, n)`: n bytes, one per word (bias memory);
- the kernel loader: a loop over a `{address, count, words...}` table ending in 0 (the
  `KERNELS` stream); a byte write to `address | 1` before each run marks the express
  (packed) loader; the vendor's older loader (`--old-kernel-loader`) writes that byte
  store itself and a `memcpy32` per processor (both are plain statements here; where
  the bytes land is the express counter's business, `ai8xsim.machine`);
- `cnn_unload`: `addr = (volatile uint32_t *) 0xADDR;` followed by `*out_buf++ = *addr++;`
  reads;
- the known-answer check: a loop over a `{address, mask, count, words...}` table ending
  in 0 (`SAMPLE_OUTPUT`).

Both the onnx2ai8x emitter and the vendor tool write these forms (the vendor's SDK
examples `mnist` and `kws20_demo` use them too). A statement the reader does not know is
skipped; it cannot touch the accelerator through a constant address. The accelerator
starts when quadrant 0's enable bit is set (`ai8xsim.machine`), so the order of the
writes is kept exactly.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MASK32 = 0xFFFFFFFF


@dataclass(frozen=True)
class Write:
    """A 32-bit store (`op` is "=", "|=" or "&="), or a byte store (`width` 8)."""

    address: int
    value: int
    op: str = "="
    width: int = 32


@dataclass(frozen=True)
class Load:
    """Consecutive 32-bit stores from `address` (a memcpy or one run of the kernel loop);
    `express`: the run starts with the express loader's byte store to `address | 1`."""

    address: int
    words: tuple[int, ...]
    express: bool = False


@dataclass(frozen=True)
class Feed:
    """Words written one after the other to the same address (a FIFO data register), as a
    loop `for (i = 0; i < n; i++) *fifo = *src++;` does."""

    address: int
    words: tuple[int, ...]


@dataclass(frozen=True)
class LoadSample:
    """`SAMPLE_INPUT_<n>` into processor n's data memory at layer 0's read pointer (the
    vendor's known-answer `load_input`), for projects whose `main()` has no test."""

    processor: int
    words: tuple[int, ...]


@dataclass(frozen=True)
class Unload:
    """`cnn_unload`: (address, word count) runs read into the output buffer."""

    runs: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Check:
    """The project's known-answer check: (address, mask, words) groups."""

    groups: tuple[tuple[int, int, tuple[int, ...]], ...]


@dataclass(frozen=True)
class Call:
    """Entering (`enter=True`) or leaving a function of the project."""

    name: str
    enter: bool


@dataclass(frozen=True)
class Project:
    """What the project's `main()` does, in order."""

    device: str
    operations: tuple
    files: tuple[str, ...]
    # main() runs no known-answer test (an application such as the SDK's kws20_demo): the
    # operations drive the project's API with SAMPLE_INPUT_n and SAMPLE_OUTPUT instead
    driven: bool = False


class CReadError(Exception):
    """The project cannot be read (missing file, no main, unknown device)."""


_WRITE = re.compile(
    r"\*\s*\(\s*\(\s*volatile\s+uint(32|8)_t\s*\*\s*\)\s*(0x[0-9a-fA-F]+)[uUlL]*\s*\)\s*"
    r"(\|=|&=|=)\s*([^;]+);")
_MEMCPY = re.compile(
    r"\b(memcpy32|memcpy_8to32)\s*\(\s*\(\s*(?:volatile\s+)?uint32_t\s*\*\s*\)\s*"
    r"(0x[0-9a-fA-F]+)[uUlL]*\s*,\s*(?:\([^)]*\)\s*)?(\w+)\s*,([^;]*)\)\s*;")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_FUNC = re.compile(
    r"^[ \t]*(?:static\s+)?(?:inline\s+)?(?:const\s+)?[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)"
    r"\s*\(([^;{)]*)\)\s*\{", re.M)
_MACRO = re.compile(r"#define\s+(\w+)[\s\\]*\{([^{}]*)\}")
_ARRAY = re.compile(
    r"(?:static\s+)?(?:const\s+)?uint(?:8|32)_t\s+(\w+)\s*\[[^\]]*\]\s*=\s*(\w+|\{[^}]*\})\s*;")
_UNLOAD_ADDR = re.compile(r"\w+\s*=\s*\(\s*volatile\s+uint32_t\s*\*\s*\)\s*(0x[0-9a-fA-F]+)")
_UNLOAD_READ = re.compile(r"\*\s*\w+\s*\+\+\s*=\s*\*\s*\w+\s*\+\+")
_DEVICE = re.compile(r"\b(MAX7800[02])\b")
_TARGET = re.compile(r"^\s*TARGET\s*[:?]?=\s*(MAX7800[02])", re.M)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def c_int(expr: str) -> int | None:
    """A constant C integer expression (literals with suffixes, ~ | & << >> + - *)."""
    clean = re.sub(r"(?<=[0-9a-fA-F])[uUlL]+\b", "", expr).strip()
    clean = re.sub(r"\(\s*u?int(?:8|16|32)_t\s*\)", "", clean)
    if not clean or not re.fullmatch(r"[0-9a-fA-FxX\s()|&~<>+\-*]+", clean):
        return None
    if re.search(r"\b0[0-7]+\b", clean):  # C octal literals: not in generated projects
        return None
    try:
        return eval(clean, {"__builtins__": {}}) & MASK32  # noqa: S307 - checked charset
    except Exception:  # noqa: BLE001 - a malformed constant is simply not a constant
        return None


def _functions(text: str) -> dict[str, str]:
    out = {}
    for m in _FUNC.finditer(text):
        name = m.group(1)
        if name in ("if", "while", "for", "switch", "return", "sizeof"):
            continue
        start = m.end() - 1
        depth, i = 0, start
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        out[name] = text[start + 1:i]
    return out


_TABLE_CHARS = re.compile(r"[\s,\\0-9a-fA-FxXuUlL]*")


def _values(body: str) -> list[int]:
    if _TABLE_CHARS.fullmatch(body):
        # The common case, a table of plain literals: no expression evaluation needed.
        try:
            return [int(tok.strip().rstrip("uUlL"), 0) & MASK32
                    for tok in body.replace("\\", " ").split(",") if tok.strip()]
        except ValueError:
            pass
    vals = []
    for v in body.replace("\\\n", " ").replace("\\", " ").split(","):
        v = v.strip()
        if v:
            n = c_int(v)
            if n is None:
                raise CReadError(f"cannot read the table value `{v[:40]}`")
            vals.append(n)
    return vals


def _macros(texts: dict[str, str]) -> dict[str, list[int]]:
    macros: dict[str, list[int]] = {}
    for t in texts.values():
        for name, body in _MACRO.findall(t):
            try:
                macros[name] = _values(body)
            except CReadError:
                continue
    return macros


def _arrays(texts: dict[str, str]) -> dict[str, list[int]]:
    macros = _macros(texts)
    arrays = {}
    for t in texts.values():
        for var, init in _ARRAY.findall(t):
            if init.startswith("{"):
                try:
                    arrays[var] = _values(init[1:-1])
                except CReadError:
                    continue
            elif init in macros:
                arrays[var] = macros[init]
    return arrays


def _device(texts: dict[str, str], raw: dict[str, str]) -> str:
    for name in ("project.mk", "Makefile"):
        if name in raw:
            m = _TARGET.search(raw[name])
            if m:
                return m.group(1)
    for name in ("cnn.c", "cnn.h", "main.c"):
        m = _DEVICE.search(raw.get(name, ""))
        if m:
            return m.group(1)
    # The register window tells the parts apart: MAX78002's quadrants are 16 MiB apart.
    if re.search(r"0x51[0-9a-fA-F]{6}", texts.get("cnn.c", "")):
        return "MAX78002"
    raise CReadError("cannot tell the device: no TARGET in project.mk or Makefile and no "
                     "MAX78000/MAX78002 in cnn.c, cnn.h or main.c")


def _kernel_stream(data: list[int], express: bool) -> list:
    ops = []
    i = 0
    while i < len(data) and data[i] != 0:
        if i + 1 >= len(data):
            raise CReadError(f"kernel table ends inside the run header at 0x{data[i]:08x}")
        addr, n = data[i], data[i + 1]
        words = data[i + 2:i + 2 + n]
        if len(words) != n:
            raise CReadError(f"kernel table ends inside the run at 0x{addr:08x}")
        ops.append(Load(addr, tuple(words), express))
        i += 2 + n
    return ops


def _check_groups(data: list[int]) -> Check:
    groups = []
    i = 0
    while i < len(data) and data[i] != 0:
        if i + 2 >= len(data):
            raise CReadError("expected-output table ends inside the group header at "
                             f"0x{data[i]:08x}")
        addr, mask, n = data[i], data[i + 1], data[i + 2]
        words = tuple(data[i + 3:i + 3 + n])
        if len(words) != n:
            raise CReadError(f"expected-output table ends inside the group at 0x{addr:08x}")
        groups.append((addr, mask, words))
        i += 3 + n
    return Check(tuple(groups))


_PTR_CONST = re.compile(r"\b(\w+)\s*=\s*\(\s*volatile\s+uint32_t\s*\*\s*\)\s*"
                        r"(0x[0-9a-fA-F]+)[uUlL]*\s*;")
_PTR_ARRAY = re.compile(r"\b(\w+)\s*=\s*&?\s*(\w+)\s*(?:\[\s*0\s*\])?\s*;")
_FOR_COUNT = re.compile(r"\bfor\s*\([^;]*;\s*\w+\s*<\s*(\d+)[uUlL]*\s*;")
_FEED_VAR = re.compile(r"\*\s*(\w+)\s*=\s*\*\s*(\w+)\s*\+\+\s*;")
_FEED_CONST = re.compile(r"\*\s*\(\s*\(\s*volatile\s+uint32_t\s*\*\s*\)\s*(0x[0-9a-fA-F]+)"
                         r"[uUlL]*\s*\)\s*=\s*\*\s*(\w+)\s*\+\+\s*;")


def _feeds(body: str, arrays: dict[str, list[int]]) -> list[Feed]:
    """FIFO feeding loops: each `*dst = *src++;` in a counted loop, in source order."""
    loop = _FOR_COUNT.search(body)
    if loop is None:
        return []
    count = int(loop.group(1))
    consts = {v: int(a, 16) for v, a in _PTR_CONST.findall(body)}
    sources = {v: a for v, a in _PTR_ARRAY.findall(body) if a in arrays}
    stores = [(m.start(), consts.get(m.group(1)), m.group(2))
              for m in _FEED_VAR.finditer(body[loop.end():])]
    stores += [(m.start(), int(m.group(1), 16), m.group(2))
               for m in _FEED_CONST.finditer(body[loop.end():])]
    feeds = []
    for _, addr, src in sorted(stores, key=lambda t: t[0]):
        if addr is None or src not in sources:
            continue
        data = arrays[sources[src]]
        feeds.append(Feed(addr, tuple(data[:count])))
    return feeds


_STREAM_LOOP = re.compile(r"while\s*\(\s*\(\s*\w+\s*=\s*\(\s*volatile\s+uint32_t\s*\*\s*\)")


def _body_ops(name: str, body: str, funcs: dict[str, str], arrays: dict[str, list[int]],
              depth: int) -> list:
    """Operations of one function body, entering the project's functions it calls."""
    refs = [a for a in arrays if re.search(rf"\b{a}\b", body)]
    if _STREAM_LOOP.search(body) and refs:
        table = arrays[refs[0]]
        if re.search(r"\bmask\b", body):
            return [_check_groups(table)]
        if re.search(r"uint8_t\s*\*\s*\)\s*\(\s*\(\s*u?int\w*\s*\)\s*\w+\s*\|\s*1\s*\)", body) \
                or re.search(r"uint8_t\s*\*\s*\)\s*\(\s*\(\s*uintptr_t\s*\)\s*\w+\s*\|\s*1\s*\)",
                             body):
            return _kernel_stream(table, express=True)
        if re.search(r"if\s*\(\s*\*\s*\w+\s*\+\+\s*!=", body):
            return []  # a read-back check of the kernels changes nothing
        return _kernel_stream(table, express=False)
    feeds = _feeds(body, arrays)
    if feeds:
        return feeds
    if _UNLOAD_READ.search(body) and _UNLOAD_ADDR.search(body):
        runs = []
        pos = [(m.start(), int(m.group(1), 16)) for m in _UNLOAD_ADDR.finditer(body)]
        for k, (start, addr) in enumerate(pos):
            end = pos[k + 1][0] if k + 1 < len(pos) else len(body)
            runs.append((addr, len(_UNLOAD_READ.findall(body[start:end]))))
        return [Unload(tuple(runs))]
    ops: list = []
    events = []
    for m in _WRITE.finditer(body):
        events.append((m.start(), "w", m))
    for m in _MEMCPY.finditer(body):
        events.append((m.start(), "m", m))
    if depth < 8:
        for m in _CALL.finditer(body):
            callee = m.group(1)
            if callee in funcs and callee not in ("memcpy32", "memcpy_8to32", name):
                events.append((m.start(), "c", m))
    events.sort(key=lambda e: e[0])
    for _, kind, m in events:
        if kind == "w":
            value = c_int(m.group(4))
            if value is None:
                continue
            ops.append(Write(int(m.group(2), 16), value, m.group(3), int(m.group(1))))
        elif kind == "m":
            fn, addr, src, count = m.groups()
            if src not in arrays:
                raise CReadError(f"{name}: `{fn}` copies `{src}`, which is not a constant "
                                 "table of the project")
            n = c_int(re.sub(r"sizeof\s*\(\s*u?int(?:8|32)_t\s*\)", "1", count))
            data = arrays[src][:n] if n is not None else arrays[src]
            ops.append(Load(int(addr, 16), tuple(v & MASK32 for v in data)))
        else:
            callee = m.group(1)
            ops.append(Call(callee, True))
            ops.extend(_body_ops(callee, funcs[callee], funcs, arrays, depth + 1))
            ops.append(Call(callee, False))
    return ops


def read_project(directory: str | Path) -> Project:
    """The ordered operations of the project in `directory`."""
    d = Path(directory)
    if not d.is_dir():
        raise CReadError(f"{d}: not a directory")
    raw = {}
    for p in sorted(d.iterdir()):
        if p.is_file() and (p.suffix in (".c", ".h") or p.name in ("project.mk", "Makefile")):
            raw[p.name] = p.read_text(errors="replace")
    for need in ("cnn.c", "main.c"):
        if need not in raw:
            raise CReadError(f"{d}: no {need} (is this a generated C project?)")
    texts = {k: _strip_comments(v) for k, v in raw.items() if k.endswith((".c", ".h"))}
    funcs: dict[str, str] = {}
    for name in sorted(texts):
        if name.endswith(".c"):
            funcs.update(_functions(texts[name]))
    if "main" not in funcs:
        raise CReadError(f"{d}: main.c has no main()")
    arrays = _arrays(texts)
    ops = _body_ops("main", funcs["main"], funcs, arrays, 0)
    driven = not any(isinstance(op, Check) for op in ops)
    if driven:
        ops = _known_answer_sequence(funcs, arrays, _macros(texts))
    return Project(_device(texts, raw), tuple(ops), tuple(sorted(raw)), driven)


_KAT_ORDER = ("cnn_init", "cnn_load_weights", "cnn_load_bias", "cnn_configure")


def _known_answer_sequence(funcs: dict[str, str], arrays: dict[str, list[int]],
                           macros: dict[str, list[int]]) -> list:
    """An application `main()` (a demo reading a sensor) has no known-answer test; the
    project's API is then driven as the generated test does: init, kernels, bias,
    configure, the sample input, start, and the check against SAMPLE_OUTPUT."""
    if "SAMPLE_OUTPUT" not in macros:
        return []
    ops: list = []
    for name in _KAT_ORDER:
        if name in funcs:
            ops += [Call(name, True), *_body_ops(name, funcs[name], funcs, arrays, 1),
                    Call(name, False)]
    inputs = {int(m.group(1)): values for name, values in macros.items()
              if (m := re.fullmatch(r"SAMPLE_INPUT_(\d+)", name))}
    ops += [LoadSample(p, tuple(inputs[p])) for p in sorted(inputs)]
    if "cnn_start" in funcs:
        ops += [Call("cnn_start", True),
                *_body_ops("cnn_start", funcs["cnn_start"], funcs, arrays, 1),
                Call("cnn_start", False)]
    ops.append(_check_groups(macros["SAMPLE_OUTPUT"]))
    return ops

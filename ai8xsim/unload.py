"""Run a project's `cnn_unload()` and record every word it reads from the accelerator.

The phase table (onnx2ai8x.phases) states how many words the unload reads; this runs
the generated function, statement by statement, to count them independently of the
emitter's own bookkeeping. The statement forms are the ones an unload is made of, by
the onnx2ai8x emitter and by the vendor's tool:

- pointer set-up: `addr = (volatile uint32_t *) 0xADDR;`, and the same for the
  mlator's control and read port;
- reads through a pointer: `*out_buf++ = *addr++;`, `val = *addr;`,
  `out_buf32[offs++] = *mlat;`, and the priming read `asm volatile (... "r" (*mlat));`;
- pointer steps: `addr += 0xN;` / `addr -= 0xN;` (in 32-bit words);
- counted loops `for (i = 0; i < N; i++) { ... }` around any of these;
- stores to registers and to the caller's buffer, which read nothing from the
  accelerator.

A statement that dereferences a pointer in any other way is refused (UnloadError):
a count that silently skipped it would not be a count.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .creader import _functions, _strip_comments, c_int

WORD = 4  # bytes per step of a `volatile uint32_t *`


class UnloadError(Exception):
    """cnn_unload() holds a form this runner does not execute."""


@dataclass(frozen=True)
class UnloadRun:
    """What one run of cnn_unload() read: the address of each word, in order (the
    mlator's port address for each mlator read)."""

    reads: tuple[int, ...]

    @property
    def words(self) -> int:
        return len(self.reads)


_CAST_ADDR = re.compile(r"^(\w+)\s*=\s*\(\s*volatile\s+uint32_t\s*\*\s*\)\s*"
                        r"(0x[0-9a-fA-F]+)[uUlL]*$")
_STEP = re.compile(r"^(\w+)\s*([+-])=\s*(\w+)$")
_DEREF = re.compile(r"\*\s*(\w+)\s*(\+\+)?")
_CONST_DEREF = re.compile(r"\*\s*\(\s*\(\s*volatile\s+uint(?:8|32)_t\s*\*\s*\)")
_DECLARATION = re.compile(r"^(?:volatile\s+)?(?:const\s+)?(?:u?int(?:8|16|32)_t|int)\b")
_FOR = re.compile(r"^for\s*\(\s*(\w+)\s*=\s*0\s*;\s*\1\s*<\s*(\w+)\s*;\s*\1\s*\+\+\s*\)$")


def _statements(body: str) -> list:
    """The body as a list of statements: a string, or ("for", count, [statements])."""
    out: list = []
    i, n = 0, len(body)
    while i < n:
        if body[i].isspace() or body[i] == ";":
            i += 1
            continue
        if body.startswith("for", i) and re.match(r"for\s*\(", body[i:]):
            close = _matching(body, body.index("(", i), "(", ")")
            head = re.sub(r"\s+", " ", body[i:close + 1]).strip()
            loop = _FOR.match(head)
            count = c_int(loop.group(2)) if loop else None
            if count is None:
                raise UnloadError(f"a loop this runner does not count: `{head[:60]}`")
            j = close + 1
            while j < n and body[j].isspace():
                j += 1
            if j < n and body[j] == "{":
                end = _matching(body, j, "{", "}")
                inner = _statements(body[j + 1:end])
                i = end + 1
            else:
                end = _statement_end(body, j)
                inner = _statements(body[j:end + 1])
                i = end + 1
            out.append(("for", count, inner))
            continue
        if body[i] == "{":
            end = _matching(body, i, "{", "}")
            out.extend(_statements(body[i + 1:end]))
            i = end + 1
            continue
        end = _statement_end(body, i)
        out.append(re.sub(r"\s+", " ", body[i:end]).strip())
        i = end + 1
    return out


def _matching(text: str, start: int, opening: str, closing: str) -> int:
    depth = 0
    for k in range(start, len(text)):
        if text[k] == opening:
            depth += 1
        elif text[k] == closing:
            depth -= 1
            if depth == 0:
                return k
    raise UnloadError(f"unbalanced `{opening}` in cnn_unload()")


def _statement_end(text: str, start: int) -> int:
    """The index of the `;` ending the statement at `start` (outside parentheses)."""
    depth = 0
    for k in range(start, len(text)):
        if text[k] == "(":
            depth += 1
        elif text[k] == ")":
            depth -= 1
        elif text[k] == ";" and depth == 0:
            return k
    raise UnloadError("a statement of cnn_unload() has no `;`")


class _Runner:
    def __init__(self) -> None:
        self.pointers: dict[str, int] = {}  # accelerator pointers -> address
        self.reads: list[int] = []

    def run(self, statements: list) -> None:
        for st in statements:
            if isinstance(st, tuple):
                for _ in range(st[1]):
                    self.run(st[2])
            else:
                self.statement(st)

    def _read(self, text: str) -> None:
        """Every read through an accelerator pointer in `text`, in order."""
        if _CONST_DEREF.search(text):
            raise UnloadError(f"a read through a constant address: `{text[:60]}`")
        for m in _DEREF.finditer(text):
            name = m.group(1)
            if name not in self.pointers:
                continue  # the caller's buffer, not the accelerator
            self.reads.append(self.pointers[name])
            if m.group(2):
                self.pointers[name] += WORD

    def statement(self, st: str) -> None:
        if st.startswith("return") or st.startswith("int i") or st == "":
            return
        if st.startswith("asm"):
            # an asm statement's input operands (after the second colon) are read
            parts = st.split(":")
            self._read(":".join(parts[2:]) if len(parts) > 2 else "")
            return
        if _DECLARATION.match(st):
            if "=" in st and "(volatile" in st.replace(" ", ""):
                raise UnloadError(f"a pointer set where it is declared: `{st[:60]}`")
            return  # a declaration (the byte view of the caller's buffer included)
        m = _CAST_ADDR.match(st)
        if m:
            self.pointers[m.group(1)] = int(m.group(2), 16)
            return
        m = _STEP.match(st)
        if m and m.group(1) in self.pointers:
            step = c_int(m.group(3))
            if step is None:
                raise UnloadError(f"a pointer step that is not a constant: `{st[:60]}`")
            self.pointers[m.group(1)] += (step if m.group(2) == "+" else -step) * WORD
            return
        lhs, op, rhs = _assignment(st)
        if lhs is None:
            if re.fullmatch(r"\w+\s*(\+\+|--)", st):
                return  # a counter (`offs++`)
            raise UnloadError(f"a statement this runner does not execute: `{st[:60]}`")
        self._read(rhs)
        target = re.fullmatch(r"\*\s*(\w+)\s*(\+\+)?", lhs)
        if target and target.group(1) in self.pointers:
            if target.group(2):  # a store through an accelerator pointer that moves it
                self.pointers[target.group(1)] += WORD
            return  # a register store (the mlator's control)
        if op != "=" and re.fullmatch(r"\w+", lhs) and lhs in self.pointers:
            raise UnloadError(f"pointer arithmetic this runner does not follow: `{st[:60]}`")


def _assignment(st: str) -> tuple[str | None, str, str]:
    """`lhs op rhs` of an assignment statement (op one of = += -= |= &=)."""
    depth = 0
    for k, ch in enumerate(st):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "=" and depth == 0 and st[k + 1:k + 2] != "=" \
                and st[k - 1:k] not in ("=", "!", "<", ">"):
            op = st[k - 1] + "=" if st[k - 1:k] in ("+", "-", "|", "&") else "="
            lhs = st[:k - 1] if len(op) == 2 else st[:k]
            return lhs.strip(), op, st[k + 1:].strip()
    return None, "", ""


def run_unload(directory: str | Path) -> UnloadRun:
    """Run `cnn_unload()` of the project in `directory` (its .c files); raises
    UnloadError when the project has none or it holds a form not executed here."""
    funcs: dict[str, str] = {}
    for path in sorted(Path(directory).glob("*.c")):
        funcs.update(_functions(_strip_comments(path.read_text(errors="replace"))))
    if "cnn_unload" not in funcs:
        raise UnloadError(f"{directory}: no cnn_unload()")
    runner = _Runner()
    runner.run(_statements(funcs["cnn_unload"]))
    return UnloadRun(tuple(runner.reads))


__all__ = ["UnloadError", "UnloadRun", "run_unload"]

"""The statement structure of a generated C project, for comparing what an option changes.

c2trace compares register writes, memories and the known answer; it does not look at
main()'s loops, its sleep calls or the power monitor's triggers. Here a project's
functions become sequences of normalized statements: comments and whitespace go,
printf texts become `printf` (wording is ours to choose), constant-address register
writes go (c2trace's business), so do local declarations without initializer (they do
nothing; the vendor declares a loop counter it may not use), and the two spellings of
an accelerator clock switch (our `cnn_clock(source, divider)` helper, an inline
`MXC_GCR->pclkdiv` update) become one form. An option's effect is then the statements
it adds and removes relative to the same project without it; for the same option, ours
must add and remove what the vendor tool's does.
"""
from __future__ import annotations

import difflib
import re
from pathlib import Path

# Functions whose statements an option may change (main.c, main_riscv.c, cnn.c)
FUNCTIONS = ("main", "fail", "CNN_ISR", "CNN_IRQHandler", "cnn_start")
HOOKS = ("CNN_START", "CNN_COMPLETE", "SYS_START", "SYS_COMPLETE")

_REG_WRITE = re.compile(r"^\*\(\(volatileuint32_t\*\)0x[0-9a-fA-F]+\)")
_CLOCK_INLINE = re.compile(
    r"MXC_GCR->pclkdiv=\(MXC_GCR->pclkdiv&~\(MXC_F_GCR_PCLKDIV_CNNCLKDIV\|"
    r"MXC_F_GCR_PCLKDIV_CNNCLKSEL\)\)\|MXC_S_GCR_PCLKDIV_CNNCLKDIV_(DIV\d+)\|"
    r"MXC_S_GCR_PCLKDIV_CNNCLKSEL_(\w+)")
_CLOCK_CALL = re.compile(r"cnn_clock\(MXC_S_GCR_PCLKDIV_CNNCLKSEL_(\w+),"
                         r"MXC_S_GCR_PCLKDIV_CNNCLKDIV_(DIV\d+)\)")
_DECLARATION = re.compile(r"\s*(?:static\s+)?(?:unsigned\s+)?(?:int|u?int\d+_t|q\d+_t)"
                          r"\s+[\w\s,\*\[\]]+")
_PRINTF = re.compile(r'printf\("(?:[^"\\]|\\.)*"(?:,[^;]*)?\)')


def _strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r"^\s*#(?:if|ifdef|ifndef|else|endif|define|include)\b[^\n]*", " ", text,
                  flags=re.M)


def _bodies(text: str) -> dict[str, str]:
    """Top-level function name -> body text (between its braces)."""
    out = {}
    for m in re.finditer(r"^[A-Za-z_][\w \t\*\(\)\"]*?\b(\w+)\s*\([^;{)]*\)\s*\{", text,
                         re.M):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.setdefault(m.group(1), text[m.end():i - 1])
    return out


def statements(body: str) -> list[str]:
    """The body's statements, normalized: split at `;` outside parentheses, `{` and `}`
    as statements of their own, whitespace removed; a statement inside a block carries
    its nesting depth (`1:cnn_start()`), so that moving it into a loop is a change."""
    out, cur, depth = [], [], 0
    for ch in body:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if depth == 0 and ch in ";{}":
            out.append("".join(cur))
            if ch != ";":
                out.append(ch)
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur))
    norm, nest = [], 0
    for stmt in out:
        if _DECLARATION.fullmatch(stmt):
            continue  # a local without initializer does nothing (and may go unused)
        if stmt in "{}" and stmt:
            nest += 1 if stmt == "{" else -1
            norm.append(stmt)
            continue
        s = re.sub(r"\s+", "", stmt)
        s = _PRINTF.sub("printf", s)
        s = _CLOCK_INLINE.sub(lambda m: f"clock({m.group(2)},{m.group(1)})", s)
        s = _CLOCK_CALL.sub(lambda m: f"clock({m.group(1)},{m.group(2)})", s)
        if s and not _REG_WRITE.match(s):
            norm.append(f"{nest}:{s}" if nest else s)
    return norm


def structure(project: Path) -> dict[str, list[str]]:
    """Function name -> normalized statements, for FUNCTIONS in the project's C files
    (main() of a dual-core project's RISC-V half as `main_riscv`)."""
    out: dict[str, list[str]] = {}
    for path in sorted(Path(project).glob("*.c")):
        bodies = _bodies(_strip(path.read_text(errors="replace")))
        for name in FUNCTIONS:
            if name in bodies:
                key = "main_riscv" if name == "main" and path.name == "main_riscv.c" else name
                out[key] = statements(bodies[name])
    return out


def hooks(project: Path) -> dict[str, str]:
    """The power-measurement hook macros as cnn.h defines them (whitespace removed)."""
    text = (Path(project) / "cnn.h").read_text(errors="replace")
    found = {}
    for m in re.finditer(r"^\s*#define\s+(\w+)[ \t]*([^\n]*)$", text, re.M):
        if m.group(1) in HOOKS:
            found[m.group(1)] = re.sub(r"\s+", "", m.group(2).split("//")[0])
    return found


def changes(before: dict[str, list[str]], after: dict[str, list[str]]
            ) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Per function: (statements removed, statements added) from `before` to `after`,
    each in source order."""
    out = {}
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name, []), after.get(name, [])
        removed, added = [], []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b,
                                                           autojunk=False).get_opcodes():
            if tag in ("delete", "replace"):
                removed += a[i1:i2]
            if tag in ("insert", "replace"):
                added += b[j1:j2]
        if removed or added:
            out[name] = (tuple(removed), tuple(added))
    return out

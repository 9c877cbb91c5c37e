"""Paths the SDK's make flow cannot build in, refused before anything is written.

A generated project is built by GNU make with the MSDK's makefiles, which use the
project's absolute path (CURDIR, the build directory, every source and object file)
unquoted in targets, prerequisites and shell commands. Measured by building the digits
project with the trimmed SDK under a parent directory named `a<c>b`, one character at a
time (issue 35): a space or tab splits the path into two targets (`mixed implicit and
normal rules`), `:` makes `multiple target patterns`, `%` a pattern, `$` a variable, `;`
ends the rule, `\\` escapes, and the shell meets `( ) " ' & | < > \\``; a newline
ends the line. `# = * ? [ ] ! ~ , { } @ ^ + é - _ .` built.
"""
from __future__ import annotations

from pathlib import Path

from .errors import EXIT_USAGE, Ai8xError

# each character make or the SDK's shell commands cannot take in a path, by its name
MAKE_UNSAFE = {" ": "a space", "\t": "a tab", "\n": "a line break", "\r": "a carriage return",
               ":": "a colon", "$": "a dollar sign", "%": "a percent sign",
               ";": "a semicolon", "\\": "a backslash", "(": "a parenthesis",
               ")": "a parenthesis", '"': "a double quote", "'": "a single quote",
               "&": "an ampersand", "|": "a vertical bar", "<": "a less-than sign",
               ">": "a greater-than sign", "`": "a backquote"}


def unsafe_character(path: Path) -> str | None:
    """The first character of `path`'s absolute form that make cannot take, or None."""
    text = str(Path(path).resolve())
    for ch in text:
        if ch in MAKE_UNSAFE or ord(ch) < 0x20 or ord(ch) == 0x7F:
            return ch
    return None


def check_make_path(path: Path, what: str, option: str) -> None:
    """Refuse a project (or SDK) directory the SDK's make cannot build in: its absolute
    path must not hold spaces, tabs, line breaks or any of : $ % ; \\ ( ) " ' & | < > `
    (make splits, patterns or expands them, and the shell commands break on them)."""
    ch = unsafe_character(path)
    if ch is None:
        return
    name = MAKE_UNSAFE.get(ch, f"the control character {ord(ch):#04x}")
    shown = " ".join(sorted({c for c in MAKE_UNSAFE if c.isprintable() and c != " "}))
    raise Ai8xError("usage.make-path", str(path),
                    f"the {what}'s full path ({str(Path(path).resolve())!r}) holds {name} "
                    f"({ch!r}); the SDK's make cannot build there (it splits, expands or "
                    "passes the path unquoted to the shell)",
                    f"choose {option} whose full path has no spaces, tabs or any of {shown}",
                    exit_code=EXIT_USAGE)

"""Errors as values: a code, where it happened, what limit was violated and how to fix it.

The CLI renders these; no traceback reaches a user (guide: "No tracebacks for users").
"""
from __future__ import annotations

from dataclasses import dataclass

# Exit codes documented in README.md.
EXIT_OK = 0
EXIT_INVALID = 1  # invalid model, sidecar, or a device limit exceeded
EXIT_USAGE = 2  # bad command line, missing file


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a model or sidecar."""

    code: str
    where: str
    message: str
    hint: str = ""

    def render(self) -> str:
        text = f"error[{self.code}] {self.where}: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class Ai8xError(Exception):
    """A user-facing error carrying one or more diagnostics."""

    def __init__(self, code: str, where: str, message: str, hint: str = "",
                 exit_code: int = EXIT_INVALID,
                 diagnostics: tuple[Diagnostic, ...] = ()) -> None:
        self.diagnostics = diagnostics or (Diagnostic(code, where, message, hint),)
        self.exit_code = exit_code
        super().__init__(self.render())

    @classmethod
    def many(cls, diagnostics: list[Diagnostic]) -> Ai8xError:
        first = diagnostics[0]
        return cls(first.code, first.where, first.message, first.hint,
                   diagnostics=tuple(diagnostics))

    @property
    def code(self) -> str:
        return self.diagnostics[0].code

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)

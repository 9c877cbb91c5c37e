"""The values every recognizer returns (`Recognition`) and the model after all of them
(`Canonical`): their own module, so a recognizer imports them without importing the
package that imports the recognizers (no import cycle)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import Diagnostic


@dataclass(frozen=True)
class Recognition:
    """One recognizer's result.

    `rewrites` are one line each, naming the dialect, the nodes and the exact rewrite
    (they are printed in the report); `warnings` are diagnostics the user should see on
    stderr (e.g. nodes taken as an export artefact and dropped, with the reason);
    `facts` are named values the later stages need (for example the input units of the
    source: "input_scale" = how many integer units one float unit of the input is)."""

    model: object  # onnx.ModelProto
    dialect: str
    rewrites: tuple[str, ...] = ()
    warnings: tuple[Diagnostic, ...] = ()
    facts: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Canonical:
    """The model after every recognizer ran, and what each did (in order)."""

    model: object  # onnx.ModelProto
    recognitions: tuple[Recognition, ...] = ()

    @property
    def dialects(self) -> tuple[str, ...]:
        return tuple(r.dialect for r in self.recognitions)

    @property
    def rewrites(self) -> tuple[str, ...]:
        return tuple(f"[{r.dialect}] {line}" for r in self.recognitions for line in r.rewrites)

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(w for r in self.recognitions for w in r.warnings)

    def fact(self, name: str, default=None):
        """The last value a recognizer gave for `name`."""
        for r in reversed(self.recognitions):
            if name in r.facts:
                return r.facts[name]
        return default

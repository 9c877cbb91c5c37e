"""Errors as values: a code, where it happened, what limit was violated and how to fix it.

The CLI renders these; no traceback reaches a user (guide: "No tracebacks for users").
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Exit codes documented in README.md.
EXIT_OK = 0
EXIT_INVALID = 1  # invalid model, sidecar, or a device limit exceeded
EXIT_USAGE = 2  # bad command line, missing file
EXIT_NOT_MODELLED = 3  # verify: the project uses a feature the accelerator model does not execute


# Bounds on what one error prints (issue 15: a value quoted from a hostile input, such as
# an expanded YAML alias, made a 7 MB message). Enough for any path, layer name and limit.
MAX_WHERE = 300
MAX_MESSAGE = 800
MAX_HINT = 400
MAX_SHOWN = 20  # diagnostics rendered; the rest are counted


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def show(value: object) -> str:
    """A value as a message shows it: numbers plainly, sequences (lists, tuples, numpy
    arrays) as `[1, 2]` / `(1, 2)` of plain numbers, bytes as text. Python's repr of a
    numpy number (`np.int64(8)`) or array (`array([...], dtype=...)`) means nothing to
    a user (issue 24), and a list of numpy numbers formats as exactly that."""
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        value = value.tolist()  # numpy scalars and arrays: Python numbers and lists
    if isinstance(value, bool | int | str):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, list | tuple):
        inner = ", ".join(show(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else \
            f"({inner}{',' if len(value) == 1 else ''})"
    return str(value)


# What Python's repr makes of numpy values inside a formatted list or tuple (numpy 2:
# `np.int64(-1)`, `np.float32(0.5)`, `np.True_`, `np.str_('x')`), and of arrays.
_NUMPY_SCALAR = re.compile(r"np\.(?:u?int|float|complex|str_|bytes_|longdouble)\w*\(([^()]*)\)")
_NUMPY_BOOL = re.compile(r"np\.(True|False)_")
_NUMPY_ARRAY = re.compile(r"array\((\[[^()]*\])(?:, dtype=\w+)?\)")


def plain(text: str) -> str:
    """`text` with numpy reprs replaced by their plain values: the last line of defence
    for a message that formatted a list of numpy numbers (messages should use show())."""
    if "np." not in text and "array(" not in text:
        return text
    text = _NUMPY_SCALAR.sub(r"\1", text)
    text = _NUMPY_BOOL.sub(r"\1", text)
    return _NUMPY_ARRAY.sub(lambda m: " ".join(m.group(1).split()), text)


# ---- one diagnostic, two fronts (issue 35) --------------------------------------------
# A diagnostic names the options that fix it as the command line spells them
# (`--overlap-data`): that is its one stored form. The command line prints it so; the
# Python API (str() of an Ai8xError) names the keyword argument of the same option
# (`overlap_data=True`). The options the API takes under another name, and the ones
# that take a value (the rest are switches, True when given):
API_KEYWORDS = {"sample-input": "sample", "output": "output", "o": "output",
                "checkpoint-file": "checkpoint_file", "config-file": "config_file"}
VALUE_OPTIONS = frozenset({
    "device", "output", "sidecar", "sample-input", "sample", "calibration", "labels",
    "calibration-method", "percentile", "shift-quantile", "weight-bits", "max-checklines",
    "timer", "boost", "board", "clock-divider", "model", "stop-after", "layer-order",
    "input", "config-file", "checkpoint-file", "report"})
# command-line switches with no keyword argument (the API caller builds, prints, ...)
CLI_ONLY = frozenset({"build", "verify", "maxim-path", "json", "quiet", "help", "debug",
                      "version"})
_NUMBER = r"-?\d+(\.\d+)?(,\d+)*|0x[0-9a-fA-F]+"
_WORDS = frozenset({"max", "mse", "percentile", "MAX78000", "MAX78002", "EvKit_V1",
                    "FTHR_RevA"})  # option values that read as words
_FLAG = re.compile(r"(?<![\w-])--(no-)?([a-z][a-z0-9]*(?:-[a-z0-9]+)*)"
                   r"(?:([ =])([^\s,;:()`'\"]+))?")


def as_keywords(text: str) -> str:
    """`text` with each command-line option named as the API's keyword argument:
    `--overlap-data` -> `overlap_data=True`, `--no-mexpress` -> `mexpress=False`,
    `--calibration-method max` -> `calibration_method="max"`."""
    def keyword(m: re.Match) -> str:
        neg, name, sep, value = m.groups()
        if name in CLI_ONLY or (neg and name in VALUE_OPTIONS):
            return m.group(0)
        kw = API_KEYWORDS.get(name, name.replace("-", "_"))
        if name in VALUE_OPTIONS:
            if value is not None and re.fullmatch(_NUMBER, value):
                return f"{kw}={value}"
            if value is not None and (value in _WORDS or re.search(r"[./]", value)):
                return f'{kw}="{value}"'
            return kw + (f"{sep}{value}" if value is not None else "")  # prose follows
        tail = f"{sep}{value}" if value is not None else ""
        return f"{kw}={'False' if neg else 'True'}{tail}"

    return _FLAG.sub(keyword, text) if "--" in text else text


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a model or sidecar (each part bounded in length)."""

    code: str
    where: str
    message: str
    hint: str = ""
    # the sidecar key the problem is about (`out_offset`, ...), when a checker knows it:
    # a hand-written sidecar's message then names the key and its line (convert._place)
    key: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", clip(self.code, 80))
        object.__setattr__(self, "where", clip(plain(self.where), MAX_WHERE))
        object.__setattr__(self, "message", clip(plain(self.message), MAX_MESSAGE))
        object.__setattr__(self, "hint", clip(plain(self.hint), MAX_HINT))

    def render(self, front: str = "cli") -> str:
        """The diagnostic as the command line prints it (`front` "cli": options as
        flags) or as the Python API shows it ("api": options as keyword arguments)."""
        text = f"error[{self.code}] {self.where}: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return as_keywords(text) if front == "api" else text


class Ai8xError(Exception):
    """A user-facing error carrying one or more diagnostics."""

    def __init__(self, code: str, where: str, message: str, hint: str = "",
                 exit_code: int = EXIT_INVALID,
                 diagnostics: tuple[Diagnostic, ...] = ()) -> None:
        self.diagnostics = diagnostics or (Diagnostic(code, where, message, hint),)
        self.exit_code = exit_code
        # str() is what a Python caller reads: options as keyword arguments
        super().__init__(self.render(front="api"))

    def __reduce__(self):
        # Pickled by its fields, not by the rendered text Exception keeps in `args` (the
        # constructor takes other arguments): a sweep's worker process returns a refused
        # candidate's error as a value (api.check_many), and it must arrive whole.
        return (_rebuild_error, (type(self), dict(self.__dict__)))

    @classmethod
    def many(cls, diagnostics: list[Diagnostic]) -> Ai8xError:
        first = diagnostics[0]
        return cls(first.code, first.where, first.message, first.hint,
                   diagnostics=tuple(diagnostics))

    @property
    def code(self) -> str:
        return self.diagnostics[0].code

    def render(self, front: str = "cli") -> str:
        shown = [d.render(front) for d in self.diagnostics[:MAX_SHOWN]]
        if len(self.diagnostics) > MAX_SHOWN:
            shown.append(f"... and {len(self.diagnostics) - MAX_SHOWN} more errors")
        return "\n".join(shown)


def _rebuild_error(cls: type, state: dict) -> Ai8xError:
    """An Ai8xError (or subclass) from its pickled fields (Ai8xError.__reduce__)."""
    error = cls.__new__(cls)
    error.__dict__.update(state)
    Exception.__init__(error, error.render())
    return error

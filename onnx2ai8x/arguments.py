"""The Python API's arguments checked by kind before any work (issue 35, item 6).

A caller of `onnx2ai8x.api` passes Python values, not command-line text: a number
where a path belongs, an array as a switch, a path as a timer. Each is an Ai8xError
(usage.bad-input, exit 2) naming the argument, what it takes and what it got; never
a TypeError or AttributeError from deep inside a stage.
"""
from __future__ import annotations

import os

from .errors import EXIT_USAGE, Ai8xError


def _refuse(name: str, takes: str, value: object) -> Ai8xError:
    return Ai8xError("usage.bad-input", name, f"takes {takes}, not "
                     f"{type(value).__name__}", f"pass {name}= as {takes}",
                     exit_code=EXIT_USAGE)


def _is_path(value: object) -> bool:
    return isinstance(value, str | os.PathLike)


def check_model(value: object, name: str = "model") -> None:
    """A model: a path, the bytes of an ONNX file, a ModelProto or a Network."""
    if _is_path(value) or isinstance(value, bytes | bytearray):
        return
    if hasattr(value, "SerializeToString") or hasattr(value, "layers"):
        return
    raise _refuse(name, "a path, the bytes of an ONNX file, a ModelProto or a Network",
                  value)


def check_path(value: object, name: str, *, array: bool = False,
               required: bool = False) -> None:
    """A file or directory argument (`array`: an in-memory numpy array also fits)."""
    if value is None and not required:
        return
    if _is_path(value) or (array and hasattr(value, "__array__")
                           and not isinstance(value, str | bytes)):
        return
    raise _refuse(name, "a path" + (" or a numpy array" if array else ""), value)


def check_option(name: str, kind: str, value: object) -> None:
    """One option by the kind its field declares (`bool`, `int | None`, ...); None
    leaves an option at its default (the command line passes it so)."""
    optional = kind.endswith("| None")
    if value is None:
        return
    base = kind.split("|")[0].strip()
    ok = {"bool": lambda v: isinstance(v, bool),
          "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
          "str": lambda v: isinstance(v, str),
          "tuple[int, ...]": lambda v: isinstance(v, tuple | list) and all(
              isinstance(x, int) and not isinstance(x, bool) for x in v)}.get(base)
    if ok is not None and not ok(value):
        takes = {"bool": "True or False", "int": "an integer", "str": "a string",
                 "tuple[int, ...]": "a tuple of integers"}[base]
        raise _refuse(name, takes + (" or None" if optional else ""), value)


def check_layer_order(value: object) -> None:
    if value is not None:
        check_option("layer_order", "tuple[int, ...]", value)


def check_count(value: object, name: str) -> None:
    """A count that may be left out (stop_after)."""
    if value is not None:
        check_option(name, "int", value)

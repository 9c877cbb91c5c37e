"""Parse and validate a sidecar: the vendor's YAML network description (seed 004).

Every key the language defines is accepted with all its spellings; anything else is an
error with a "did you mean". Per-layer defaults follow the vendor tool (izer/yamlcfg.py):
the language is only useful if a file means the same here as there.
"""
from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import yaml

from ..errors import EXIT_USAGE, Ai8xError, Diagnostic
from ..network import (
    ACT_ABS,
    ACT_RELU,
    ELTWISE_ADD,
    ELTWISE_NONE,
    ELTWISE_OR,
    ELTWISE_SUB,
    ELTWISE_XOR,
    Op,
)
from ..safeyaml import check_bounds
from .model import DATA_BUFFER, INPUT, STOP, DataBuffer, Pair, Sidecar, SidecarLayer, Unload

GLOBAL_KEYS = ("arch", "dataset", "layers", "output_map", "unload", "data_buffer", "snoop",
               "bias", "weights")

LAYER_KEYS = (
    "name", "sequence", "next_sequence", "processors", "output_processors", "in_offset",
    "out_offset", "output_width", "data_format", "operation", "op", "operator",
    "convolution", "eltwise", "dilation", "groups", "conv_groups", "pool_first", "operands",
    "activate", "activation", "quantization", "output_shift", "kernel_size", "stride", "pad",
    "max_pool", "avg_pool", "pool_dilation", "pool_stride", "in_channels", "in_dim",
    "in_crop", "in_sequences", "out_channels", "streaming", "flatten", "write_gap",
    "read_gap", "in_skip", "in_channel_skip", "bias_group", "bias_quadrant", "output",
    "weight_source", "buffer_shift", "buffer_insert", "simulated_sequence", "snoop_sequence",
    "bypass", "calcx4", "readahead", "tcalc", "output_pad",
)

UNLOAD_KEYS = ("processors", "channels", "dim", "offset", "width", "write_gap")
DATA_BUFFER_KEYS = ("processors", "channels", "dim", "offset", "width", "name")

# Keys that are different spellings of one setting (seed 004: `operation`, `activate`).
SYNONYMS = (
    ("operation", "op", "operator", "convolution"),
    ("activate", "activation"),
    ("groups", "conv_groups"),
    ("read_gap", "in_skip"),
    ("bias_group", "bias_quadrant"),
    ("max_pool", "avg_pool"),
)

# operation values (lower case) -> (operator, element-wise op); element-wise operations
# are passthrough layers with two operands by default (seed 004, `operation` table).
OPERATIONS = {
    "conv1d": (Op.CONV1D, ELTWISE_NONE),
    "conv2d": (Op.CONV2D, ELTWISE_NONE),
    "convtranspose2d": (Op.CONVTRANSPOSE2D, ELTWISE_NONE),
    "none": (Op.NONE, ELTWISE_NONE),
    "passthrough": (Op.NONE, ELTWISE_NONE),
    "linear": (Op.LINEAR, ELTWISE_NONE),
    "fc": (Op.LINEAR, ELTWISE_NONE),
    "mlp": (Op.LINEAR, ELTWISE_NONE),
    "add": (Op.NONE, ELTWISE_ADD),
    "sub": (Op.NONE, ELTWISE_SUB),
    "or": (Op.NONE, ELTWISE_OR),
    "bitwiseor": (Op.NONE, ELTWISE_OR),
    "bitwise_or": (Op.NONE, ELTWISE_OR),
    "xor": (Op.NONE, ELTWISE_XOR),
    "bitwisexor": (Op.NONE, ELTWISE_XOR),
    "bitwise_xor": (Op.NONE, ELTWISE_XOR),
}
ELTWISE_VALUES = {"add": ELTWISE_ADD, "sub": ELTWISE_SUB, "or": ELTWISE_OR, "xor": ELTWISE_XOR}
ACTIVATIONS = {"relu": ACT_RELU, "abs": ACT_ABS, "none": None}

DEFAULT_2D_KERNEL = (3, 3)
DEFAULT_1D_KERNEL = (9, 1)  # vendor default for Conv1d without kernel_size
RESERVED_NAMES = ("stop", "input")


# What a key takes, shown as the fix when a value is wrong (seed 004, per-layer keys).
KEY_HINTS = {
    "processors": "a 64-bit hex mask, e.g. `processors: 0x000000000000000f`",
    "output_processors": "a 64-bit hex mask, e.g. `output_processors: 0x00000000000000f0`",
    "output_map": "a 64-bit hex mask, e.g. `output_map: 0x0000000000000ff0`",
    "in_offset": "a byte offset in data memory, e.g. `in_offset: 0x4000`",
    "out_offset": "a byte offset in data memory, e.g. `out_offset: 0x4000`",
    "output_width": "`output_width: 8` (default) or `output_width: 32`",
    "kernel_size": "Conv2d: `1x1` or `3x3`; Conv1d: 1 to 9; ConvTranspose2d: `3x3`",
    "quantization": "`quantization: 1`, `2`, `4`, `8` or `binary` (MAX78002)",
    "output_shift": "an integer; the total shift must stay within [-15, 15]",
    "pad": "`pad: 0`, `1` or `2`",
    "stride": "`stride: 1` (ConvTranspose2d: 2)",
    "operands": "`operands: 2` to `16`",
    "activate": "`activate: ReLU`, `Abs` or `None`",
    "activation": "`activation: ReLU`, `Abs` or `None`",
    "data_format": "`data_format: HWC` (default) or `CHW`",
    "in_dim": "`in_dim: [H, W]` or a 1-D length `in_dim: L`",
    "in_crop": "`in_crop: [start, end]`",
    "sequence": "a layer number not used by another layer",
    "bias_group": "a bias group 0..3 or a list of them",
}
BOOL_HINT = "write `true` or `false`"
INT_HINT = "write a whole number"


# libyaml's parser when PyYAML has it (the pure-Python one takes ~20 ms per zoo sidecar,
# a twentieth of a conversion, issue 5); both build the same nodes with the same marks.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (a silent overwrite hides typos)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False):
    loader.flatten_mapping(node)
    mapping = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise Ai8xError("sidecar.yaml", f"line {key_node.start_mark.line + 1}",
                            f"unusable mapping key {key!r}", "keys are plain words") from None
        if key in mapping:
            raise Ai8xError("sidecar.duplicate-key", f"line {key_node.start_mark.line + 1}",
                            f"key `{key}` is given twice in the same mapping",
                            "remove one of them")
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                 _construct_mapping)


class _Ctx:
    """Where we are, for messages; one per parse call (no module state)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def where(self, yaml_index: int | None = None, name: str | None = None,
              key: str | None = None) -> str:
        text = self.source
        if yaml_index is not None:
            text += f": layer {yaml_index}" + (f" ({name})" if name else "")
        if key:
            text += f", `{key}`"
        return text

    def fail(self, code: str, message: str, hint: str = "", *, layer: int | None = None,
             name: str | None = None, key: str | None = None) -> Ai8xError:
        if not hint and key:
            hint = KEY_HINTS.get(key.split(".")[-1], "")
        return Ai8xError(code, self.where(layer, name, key), message, hint)


def _distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, prev2[j - 2] + 1)
            row.append(cost)
        prev2, prev = prev, row
    return prev[-1]


def closest(word: object, choices) -> str | None:
    """The choice `word` most likely misspells (case ignored: a slip of a letter or two,
    or difflib's likeness), else None."""
    text = str(word).lower()
    lowered = {str(c).lower(): c for c in choices}
    if text in lowered:
        return lowered[text]
    near = sorted((_distance(text, low), low) for low in lowered)
    if near and near[0][0] <= max(1, len(text) // 3):
        return lowered[near[0][1]]
    close = difflib.get_close_matches(text, list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None


def _suggest(word: str, choices: tuple[str, ...]) -> str:
    close = closest(word, choices)
    return f"did you mean `{close}`?" if close is not None else \
        "known keys: " + ", ".join(sorted(choices))


# No field of the accelerator or of the generated C is wider than 32 bits, apart from
# the processor masks (64 bits, read by _mask). A larger integer is a typing slip or a
# hostile file; refused here it never reaches the writers (an ONNX attribute holds at
# most 64 bits, issue 24: `dilation: 99999999999999999999` escaped as a ValueError).
MAX_INT = 1 << 32


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    """A whole number of at most 32 bits (plus sign) of magnitude (see MAX_INT)."""
    return _whole(value) and -MAX_INT <= value <= MAX_INT


def _int_message(key: str, value: object, what: str) -> str:
    if _whole(value):
        return f"`{key}` is {value}, out of the range of any hardware field (±{MAX_INT})"
    return f"`{key}` must be {what}, got {value!r}"


class _LayerReader:
    """Typed access to one layer mapping, with messages naming layer and key."""

    def __init__(self, ctx: _Ctx, index: int, data: dict,
                 names: list[str | None] = (), buffer_names: set[str] = frozenset()) -> None:
        self.ctx = ctx
        self.index = index
        self.data = data
        self.names = names  # layer names, for references by name
        self.buffer_names = buffer_names
        name = data.get("name")
        self.name = name if isinstance(name, str) else None

    def fail(self, key: str, message: str, hint: str = "",
             code: str = "sidecar.value") -> Ai8xError:
        return self.ctx.fail(code, message, hint, layer=self.index, name=self.name, key=key)

    def has(self, key: str) -> bool:
        return key in self.data

    def int(self, key: str, low: int | None = None, high: int | None = None) -> int:
        value = self.data[key]
        if not _is_int(value):
            raise self.fail(key, _int_message(key, value, "an integer"),
                            KEY_HINTS.get(key, INT_HINT), code="sidecar.type")
        if (low is not None and value < low) or (high is not None and value > high):
            rng = f"{low if low is not None else '-inf'} to {high if high is not None else 'inf'}"
            raise self.fail(key, f"`{key}` is {value}; it must be {rng}",
                            KEY_HINTS.get(key, f"use a value from {rng}"))
        return value

    def bool(self, key: str) -> bool:
        value = self.data[key]
        if isinstance(value, bool) or value in (0, 1):
            return bool(value)
        raise self.fail(key, f"`{key}` must be true or false, got {value!r}", BOOL_HINT,
                        code="sidecar.type")

    def word(self, key: str) -> str:
        value = self.data[key]
        if value is None:  # YAML `null`/`~`: treat as the word "none"
            return "none"
        if not isinstance(value, str):
            raise self.fail(key, f"`{key}` must be a word, got {value!r}", code="sidecar.type")
        return value.lower()

    def mask(self, key: str, bits: int = 64) -> int:
        return _mask(self.data[key], bits, lambda msg, code: self.fail(key, msg, code=code),
                     key)

    def pair(self, key: str, low: int = 1) -> Pair:
        """An integer for both dimensions, or `[H, W]`."""
        value = self.data[key]
        if _is_int(value):
            items = [value, value]
        elif isinstance(value, list) and len(value) in (1, 2) and all(map(_is_int, value)):
            items = list(value) * (2 // len(value))
        else:
            shown = next((v for v in (value if isinstance(value, list) else [value])
                          if _whole(v) and not _is_int(v)), value)
            raise self.fail(key, _int_message(key, shown, "an integer or a list [H, W] of "
                                                          "integers"), code="sidecar.type")
        if min(items) < low:
            raise self.fail(key, f"`{key}` is {value!r}; values must be at least {low}")
        return items[0], items[1]

    def reference(self, key: str, value: object) -> int | str:
        if isinstance(value, str):
            return value.lower()
        if _is_int(value):
            return value
        raise self.fail(key, f"`{key}` must name a layer (number or `name`), got {value!r}",
                        code="sidecar.type")


def _mask(value: object, bits: int, fail, key: str) -> int:
    """A processor mask: an int, or hex text where dots, underscores and `0x` are ignored."""
    if isinstance(value, str):
        text = value.replace(".", "").replace("_", "").strip()
        try:
            value = int(text, 16)
        except ValueError:
            raise fail(f"`{key}` must be a hexadecimal mask, got {value!r}",
                       "sidecar.type") from None
    if not _whole(value):  # 64 bits: bounded by the processor count below
        raise fail(f"`{key}` must be a hexadecimal mask, got {value!r}", "sidecar.type")
    if not 1 <= value < 2 ** bits:
        raise fail(f"`{key}` is {value:#x}; it must select 1 to {bits} processors "
                   f"(1 .. 2**{bits}-1)", "sidecar.value")
    return value


def _check_keys(ctx: _Ctx, data: dict, allowed: tuple[str, ...], what: str,
                layer: int | None = None, name: str | None = None) -> None:
    for key in data:
        if key not in allowed:
            raise ctx.fail("sidecar.unknown-key", f"unknown {what} key `{key}`",
                           _suggest(str(key), allowed), layer=layer, name=name,
                           key=str(key))
    for group in SYNONYMS:
        given = [k for k in group if k in data]
        if len(given) > 1:
            raise ctx.fail("sidecar.conflict",
                           f"{' and '.join(f'`{k}`' for k in given)} set the same thing",
                           f"keep only one of them (`{given[0]}`)", layer=layer, name=name,
                           key=given[1])


def load_yaml(text: str, source: str = "<string>") -> dict:
    ctx = _Ctx(source)
    check_bounds(text, source)  # depth and alias expansion before PyYAML builds anything
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except Ai8xError as exc:
        raise Ai8xError(exc.code, f"{source}: {exc.diagnostics[0].where}",
                        exc.diagnostics[0].message, exc.diagnostics[0].hint) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "file"
        raise ctx.fail("sidecar.yaml", f"not valid YAML at {where}: "
                       f"{getattr(exc, 'problem', None) or exc}",
                       "check indentation and that list items start with `- `") from None
    if not isinstance(data, dict):
        raise ctx.fail("sidecar.structure", "the sidecar must be a YAML mapping with `arch`, "
                       "`dataset` and `layers`", "see the example in the documentation")
    return data


def key_lines(text: str) -> dict[tuple[int | None, str], int]:
    """Where each key is written, for messages about a hand-written sidecar: line
    numbers (1-based) of the global keys `(None, key)`, of the records of a global list
    and their keys `(None, "unload[0]")`, `(None, "unload[0].offset")`, of each layer
    entry's keys `(position in layers, key)` and of the entry itself `(position, "")`.
    Empty when the text has no such shape (load_yaml has already refused invalid YAML)."""
    try:
        root = yaml.compose(text, Loader=_SafeLoader)  # noqa: S506 - nodes only
    except yaml.YAMLError:
        return {}
    lines: dict[tuple[int | None, str], int] = {}
    if not isinstance(root, yaml.MappingNode):
        return lines
    for key, value in root.value:
        if not isinstance(key, yaml.ScalarNode):
            continue
        lines[(None, key.value)] = key.start_mark.line + 1
        if not isinstance(value, yaml.SequenceNode):
            continue
        for pos, entry in enumerate(value.value):
            at = (pos, "") if key.value == "layers" else (None, f"{key.value}[{pos}]")
            lines[at] = entry.start_mark.line + 1
            if isinstance(entry, yaml.MappingNode):
                for k, _ in entry.value:
                    if isinstance(k, yaml.ScalarNode):
                        lines[(at[0], f"{at[1]}.{k.value}" if at[1] else k.value)] = \
                            k.start_mark.line + 1
    return lines


# How the parser and the resolver name a place after the file: `layer 3 (fc), `key``,
# `layer 3`, `key` (a global key), or `layers[4]` (an entry by its position).
_PARSED_WHERE = re.compile(r"(?:layer (?P<layer>\d+)(?: \([^)]*\))?)?(?:, )?"
                           r"(?:`(?P<key>[^`]+)`)?")
_ENTRY_WHERE = re.compile(r"layers\[(?P<pos>\d+)\]")


def with_line(diag: Diagnostic, source: str, lines: dict,
              positions: list[int] | None = None) -> Diagnostic:
    """`diag` from the parser or resolver placed at `SOURCE:LINE:`, the line of the key
    it names (else of the layer entry, else of `layers:`). `positions`: sidecar layer
    number -> position in `layers` (the file order, when `sequence` reorders it);
    None: the same."""
    where = diag.where
    for sep in (": ", ", "):
        if where.startswith(source + sep):
            rest = where[len(source) + len(sep):]
            break
    else:
        if where.startswith(f"{source}:"):  # placed already (FILE:LINE)
            return diag
        rest = where
    pos, key = None, ""
    entry = _ENTRY_WHERE.match(rest)
    found = _PARSED_WHERE.match(rest)
    if entry is not None:
        pos = int(entry.group("pos"))
    elif found is not None and found.group(0):
        key = found.group("key") or ""
        if found.group("layer") is not None:
            pos = int(found.group("layer"))
            if positions is not None and pos < len(positions):
                pos = positions[pos]
    line = (lines.get((pos, key)) or lines.get((pos, key.split(".")[0]))
            or lines.get((pos, "")) or lines.get((None, "layers")))
    return replace(diag, where=f"{source}:{line}: {rest}" if line else f"{source}: {rest}")


def parse_file(path: str | Path) -> Sidecar:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise Ai8xError("usage.missing-file", str(path), "sidecar file not found",
                        "check the --config-file path", exit_code=EXIT_USAGE) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise Ai8xError("sidecar.unreadable", str(path), f"cannot read the sidecar ({exc})",
                        "pass a UTF-8 YAML file") from None
    return parse_text(text, str(path))


def parse_text(text: str, source: str = "<string>") -> Sidecar:
    """The sidecar `text`; every error names `source` and the line of the key."""
    data = load_yaml(text, source)
    try:
        return parse_dict(data, source)
    except Ai8xError as err:
        lines = key_lines(text)
        named = Ai8xError.many([with_line(d, source, lines) for d in err.diagnostics])
        named.exit_code = err.exit_code
        raise named from None


def parse_dict(cfg: dict, source: str = "<string>") -> Sidecar:
    """Validate a loaded YAML mapping and apply the language's per-layer defaults."""
    ctx = _Ctx(source)
    _check_keys(ctx, cfg, GLOBAL_KEYS, "global")
    for key in ("arch", "dataset", "layers"):
        if key not in cfg:
            raise ctx.fail("sidecar.missing-key", f"the mandatory global key `{key}` is missing",
                           "a sidecar needs `arch`, `dataset` and `layers`", key=key)
    for key in ("arch", "dataset"):
        if not isinstance(cfg[key], str | int | float) or isinstance(cfg[key], bool):
            raise ctx.fail("sidecar.type", f"`{key}` must be a name, got {cfg[key]!r}", key=key)
    layers_cfg = cfg["layers"]
    if not isinstance(layers_cfg, list) or not layers_cfg:
        raise ctx.fail("sidecar.type", "`layers` must be a non-empty list of layer mappings",
                       "start each layer with `- `", key="layers")

    buffers = _data_buffers(ctx, cfg.get("data_buffer"))
    buffer_names = {b.name.lower() for b in buffers or ()}

    parsed: dict[int, tuple[dict, int]] = {}
    sequence = 0
    for yaml_index, entry in enumerate(layers_cfg):
        if not isinstance(entry, dict):
            raise ctx.fail("sidecar.type", f"layer entries must be mappings, got {entry!r}",
                           "write each layer as `- key: value` lines", layer=yaml_index)
        rd = _LayerReader(ctx, yaml_index, entry)
        _check_keys(ctx, entry, LAYER_KEYS, "layer", yaml_index, rd.name)
        if rd.has("sequence"):
            sequence = rd.int("sequence", 0)
        if sequence in parsed:
            raise rd.fail("sequence", f"sequence {sequence} is used by two layers "
                          f"(file positions {parsed[sequence][1]} and {yaml_index})",
                          "give every layer its own `sequence`", code="sidecar.duplicate")
        parsed[sequence] = (entry, yaml_index)
        sequence += 1

    # Sequence numbers may have gaps: layers run in sorted order (seed 004, `sequence`).
    order = sorted(parsed)
    names: list[str | None] = []
    for seq in order:
        entry, yaml_index = parsed[seq]
        name = entry.get("name")
        if name is None:
            names.append(None)
            continue
        if not isinstance(name, str) or not name:
            raise ctx.fail("sidecar.type", f"`name` must be a word, got {name!r}",
                           layer=yaml_index, key="name")
        if name.lower() in RESERVED_NAMES:
            raise ctx.fail("sidecar.value", f"`{name}` is a reserved name",
                           "`stop` and `input` have special meaning; pick another name",
                           layer=yaml_index, name=name, key="name")
        if name.lower() in [n.lower() for n in names if n] or name.lower() in buffer_names:
            raise ctx.fail("sidecar.duplicate", f"the layer name `{name}` is used twice",
                           "layer names must be unique (case does not count)",
                           layer=yaml_index, name=name, key="name")
        names.append(name)

    layers = []
    for index, seq in enumerate(order):
        entry, yaml_index = parsed[seq]
        layers.append(_parse_layer(ctx, index, yaml_index, entry, names, buffer_names))
    layers = _apply_shared_padding_quirk(layers)

    for lay in layers:
        if buffers and lay.in_sequences == (DATA_BUFFER,):
            missing = [k for k in ("in_offset", "out_offset", "in_dim", "in_channels")
                       if k not in json.loads(lay.raw)]
            if missing:
                raise ctx.fail("sidecar.missing-key",
                               "reading the data buffer needs "
                               + ", ".join(f"`{k}`" for k in missing),
                               "give `in_offset`, `out_offset`, `in_dim` and `in_channels`",
                               layer=lay.index, name=lay.name, key=missing[0])

    output_map = None
    if "output_map" in cfg:
        output_map = _mask(cfg["output_map"], 64,
                           lambda msg, code: ctx.fail(code, msg, key="output_map"),
                           "output_map")
    snoop = None
    if "snoop" in cfg:
        val = cfg["snoop"]
        if not isinstance(val, list) or not all(map(_is_int, val)):
            raise ctx.fail("sidecar.type", "`snoop` must be a list of integers", key="snoop")
        snoop = tuple(val)
    bias = None
    if "bias" in cfg:
        val = cfg["bias"]
        if not isinstance(val, list) or not all(map(_is_int, val)):
            raise ctx.fail("sidecar.type", "`bias` must be a list of integers", key="bias")
        bias = tuple(val)
    return Sidecar(
        source=source, arch=str(cfg["arch"]), dataset=str(cfg["dataset"]),
        layers=tuple(layers), output_map=output_map, unload=_unloads(ctx, cfg.get("unload")),
        data_buffer=buffers, snoop=snoop, bias=bias,
        weights=json.dumps(cfg["weights"], sort_keys=True, default=str)
        if "weights" in cfg else None)


def _find(rd: _LayerReader, key: str, ref: int | str, allow_stop: bool = False) -> int:
    names, buffer_names = rd.names, rd.buffer_names
    if isinstance(ref, int):
        return ref
    if ref == "input":
        return INPUT
    if allow_stop and ref == "stop":
        return STOP
    for i, n in enumerate(names):
        if n is not None and n.lower() == ref:
            return i
    if ref in buffer_names:
        return DATA_BUFFER
    known = tuple(n.lower() for n in names if n) + tuple(buffer_names)
    raise rd.fail(key, f"`{key}` names `{ref}`, but no layer has that name",
                  _suggest(ref, known + ("input",)) if known else
                  "give the layer a `name`, or use its number", code="sidecar.reference")


# --------------------------------------------------------------------------- layer keys
# One small parser per key (or per group of keys that decide together, such as the
# operation and its default padding); `LAYER_PARSERS` runs them in order, each writing
# SidecarLayer fields into `v`. The order is the order the checks report problems in.

LayerParser = Callable[[_LayerReader, dict], None]


def _plain(field: str, read: Callable[[_LayerReader, str], object], default: object,
           *keys: str) -> LayerParser:
    """A key read as is (`keys`: its spellings, the first one present wins)."""
    spellings = keys or (field,)

    def parse(rd: _LayerReader, v: dict) -> None:
        key = next((k for k in spellings if rd.has(k)), None)
        v[field] = default if key is None else read(rd, key)
    return parse


def _int_from(low: int | None = None, high: int | None = None
              ) -> Callable[[_LayerReader, str], int]:
    return lambda rd, key: rd.int(key, low, high)


def _flag(rd: _LayerReader, key: str) -> bool:
    return rd.bool(key)


def _processors(rd: _LayerReader, v: dict) -> None:
    if not rd.has("processors") or rd.data["processors"] in (None, 0):
        raise rd.fail("processors", "`processors` is missing or zero; every layer needs the "
                      "mask of processors that read its input",
                      "e.g. `processors: 0x000000000000000f` for 4 channels",
                      code="sidecar.missing-key")
    v["processors"] = rd.mask("processors")
    v["output_processors"] = rd.mask("output_processors") if rd.has("output_processors") \
        else None


def _pooling(rd: _LayerReader, v: dict) -> None:
    v["pooling"] = False
    v["pool_average"] = False
    v["pool"] = (1, 1)
    for key in ("max_pool", "avg_pool"):
        if rd.has(key):
            v["pool"] = rd.pair(key)
            v["pooling"] = True
            v["pool_average"] = key == "avg_pool"
    v["pool_stride"] = rd.pair("pool_stride") if rd.has("pool_stride") else None


def _quantization(rd: _LayerReader, v: dict) -> None:
    quantization = None
    if rd.has("quantization"):
        given = rd.data["quantization"]
        val = given.lower() if isinstance(given, str) else given
        if val in ("bin", "binary"):
            quantization = -1
        elif _is_int(val) and val in (1, 2, 4, 8):
            quantization = val
        else:
            raise rd.fail("quantization", f"`quantization` is {given!r}; "
                          "it must be 1, 2, 4, 8 or binary")
    v["quantization"] = quantization


def _in_dim(rd: _LayerReader, v: dict) -> None:
    v["in_dim"] = None
    if rd.has("in_dim"):
        val = rd.data["in_dim"]
        if _is_int(val):
            val = [val, 1]  # 1-D length L is [L, 1]
        if not isinstance(val, list) or len(val) not in (1, 2) or not all(map(_is_int, val)) \
                or min(val) < 1:
            raise rd.fail("in_dim", f"`in_dim` must be a length or [H, W], got "
                          f"{rd.data['in_dim']!r}", code="sidecar.type")
        v["in_dim"] = (val[0], val[1] if len(val) > 1 else 1)


def _in_crop(rd: _LayerReader, v: dict) -> None:
    v["in_crop"] = (0, 0)
    if rd.has("in_crop"):
        val = rd.data["in_crop"]
        if not isinstance(val, list) or len(val) != 2 or not all(map(_is_int, val)) \
                or min(val) < 0:
            raise rd.fail("in_crop", f"`in_crop` must be [start, end] counts, got {val!r}",
                          code="sidecar.type")
        v["in_crop"] = (val[0], val[1])


def _out_offset(rd: _LayerReader, v: dict) -> None:
    v["out_offset"] = rd.int("out_offset", 0) if rd.has("out_offset") else 0
    v["out_offset_given"] = rd.has("out_offset")


def _activation(rd: _LayerReader, v: dict) -> None:
    v["activation"] = None
    for key in ("activate", "activation"):
        if rd.has(key):
            word = rd.word(key)
            if word not in ACTIVATIONS:
                raise rd.fail(key, f"`{key}` is {rd.data[key]!r}; it must be ReLU, Abs or "
                              "None", _suggest(word, tuple(ACTIVATIONS)))
            v["activation"] = ACTIVATIONS[word]


def _operation(rd: _LayerReader, v: dict) -> None:
    """The operation, and the defaults it implies (padding, kernel, operands)."""
    operator, eltwise, operands = Op.CONV2D, ELTWISE_NONE, 1
    padding: Pair = (1, 1)
    kernel: Pair = DEFAULT_2D_KERNEL
    op_key = next((k for k in ("convolution", "operation", "operator", "op") if rd.has(k)),
                  None)
    if op_key:
        word = rd.word(op_key)
        if word not in OPERATIONS:
            raise rd.fail(op_key, f"`{op_key}` is {rd.data[op_key]!r}, not an operation",
                          _suggest(word, tuple(OPERATIONS)))
        operator, eltwise = OPERATIONS[word]
        if operator.passthrough:
            padding = (0, 0)
        if eltwise != ELTWISE_NONE:
            operands = 2
        if operator == Op.LINEAR:
            kernel, padding = (1, 1), (0, 0)
    v.update(operator=operator, eltwise=eltwise, operands=operands, padding=padding,
             pad_given=False, kernel_size=kernel, operator_given=op_key is not None)


def _pad(rd: _LayerReader, v: dict) -> None:
    if rd.has("pad"):
        pad = rd.int("pad", 0)
        v["padding"], v["pad_given"] = (pad, pad), True


def _dilation(rd: _LayerReader, v: dict) -> None:
    v["dilation"] = (1, 1)
    if rd.has("dilation"):
        v["dilation"] = rd.pair("dilation")
        if v["operator"].passthrough:
            raise rd.fail("dilation", "`dilation` needs a convolution; this layer has none",
                          "remove `dilation` or set `operation: conv1d/conv2d`")


def _eltwise(rd: _LayerReader, v: dict) -> None:
    if rd.has("eltwise"):
        word = rd.word("eltwise")
        if word not in ELTWISE_VALUES:
            raise rd.fail("eltwise", f"`eltwise` is {rd.data['eltwise']!r}; it must be add, "
                          "sub, or or xor", _suggest(word, tuple(ELTWISE_VALUES)))
        v["eltwise"], v["operands"] = ELTWISE_VALUES[word], 2


def _operands(rd: _LayerReader, v: dict) -> None:
    if rd.has("operands"):
        if v["eltwise"] == ELTWISE_NONE:
            raise rd.fail("operands", "`operands` only applies to element-wise operations",
                          "add `eltwise: add` (or use `operation: add`), or remove `operands`")
        v["operands"] = rd.int("operands", 2, 16)


def _data_format(rd: _LayerReader, v: dict) -> None:
    v["big_data"] = False
    if rd.has("data_format"):
        word = rd.word("data_format")
        if word in ("chw", "big"):
            v["big_data"] = True
        elif word not in ("hwc", "little"):
            raise rd.fail("data_format", f"`data_format` is {rd.data['data_format']!r}; it "
                          "must be HWC (little) or CHW (big)")


def _output_width(rd: _LayerReader, v: dict) -> None:
    v["output_width"] = 8
    if rd.has("output_width"):
        width = rd.int("output_width")
        if width not in (8, 32):
            raise rd.fail("output_width", f"`output_width` is {width}; it must be 8 or 32")
        v["output_width"] = width


def _kernel_size(rd: _LayerReader, v: dict) -> None:
    operator = v["operator"]
    v["kernel_given"] = rd.has("kernel_size")
    if not rd.has("kernel_size"):
        if operator.one_d:
            v["kernel_size"] = DEFAULT_1D_KERNEL
        return
    given = rd.data["kernel_size"]
    if operator == Op.LINEAR:
        raise rd.fail("kernel_size", "a linear layer has no `kernel_size` (it is 1x1)",
                      "remove `kernel_size`")
    text = str(given).lower().replace(" ", "")
    if operator == Op.CONV2D:
        if text not in ("1x1", "3x3"):
            raise rd.fail("kernel_size", f"`kernel_size` is {given!r}; "
                          "Conv2d supports 1x1 or 3x3")
        v["kernel_size"] = (int(text[0]), int(text[2]))
    elif operator == Op.CONVTRANSPOSE2D:
        if text != "3x3":
            raise rd.fail("kernel_size", f"`kernel_size` is {given!r}; "
                          "ConvTranspose2d supports 3x3 only")
        v["kernel_size"] = (3, 3)
    else:
        if not text.isdigit() or not 1 <= int(text) <= 9:
            raise rd.fail("kernel_size", f"`kernel_size` is {given!r}; "
                          "Conv1d supports 1 to 9",
                          "Conv1d kernels are one number, e.g. `kernel_size: 3`")
        v["kernel_size"] = (int(text), 1)


def _stride(rd: _LayerReader, v: dict) -> None:
    v["stride"] = (1, 1)
    if not rd.has("stride"):
        return
    val = rd.data["stride"]
    if isinstance(val, list):
        if len(val) != 2 or not all(map(_is_int, val)) or val[0] != val[1]:
            raise rd.fail("stride", f"`stride` is {val!r}; both dimensions must be equal")
        val = val[0]
    if not _is_int(val) or val < 1:
        raise rd.fail("stride", f"`stride` must be a positive integer, got {val!r}",
                      code="sidecar.type")
    if v["pooling"] and val != 1:
        raise rd.fail("stride", "a layer that pools must use `stride: 1`",
                      "stride with `pool_stride` instead")
    if v["operator"].transposed and val != 2:
        raise rd.fail("stride", f"ConvTranspose2d always uses stride 2, not {val}",
                      "remove `stride`")
    v["stride"] = (val, val)


def _in_sequences(rd: _LayerReader, v: dict) -> None:
    v["in_sequences"] = None
    if rd.has("in_sequences"):
        val = rd.data["in_sequences"]
        items = val if isinstance(val, list) else [val]
        if not items:
            raise rd.fail("in_sequences", "`in_sequences` is an empty list",
                          "list the layers (numbers or names) whose outputs are the input")
        v["in_sequences"] = tuple(
            _find(rd, "in_sequences", rd.reference("in_sequences", x)) for x in items)


def _links(rd: _LayerReader, v: dict) -> None:
    for key in ("next_sequence", "simulated_sequence"):
        v[key] = None
        if rd.has(key):
            v[key] = _find(rd, key, rd.reference(key, rd.data[key]), allow_stop=True)


def _bias_group(rd: _LayerReader, v: dict) -> None:
    v["bias_group"] = None
    key = "bias_quadrant" if rd.has("bias_quadrant") else "bias_group"
    if rd.has(key):
        val = rd.data[key]
        items = [val] if _is_int(val) else val
        if not isinstance(items, list) or not items or not all(map(_is_int, items)) \
                or not all(0 <= g <= 3 for g in items):
            raise rd.fail(key, f"`{key}` must be a group 0..3 or a list of them, got {val!r}")
        v["bias_group"] = tuple(items)


def _pool_dilation(rd: _LayerReader, v: dict) -> None:
    v["pool_dilation"] = (1, 1)
    if rd.has("pool_dilation"):
        v["pool_dilation"] = rd.pair("pool_dilation")
        if not v["pooling"]:
            raise rd.fail("pool_dilation", "`pool_dilation` needs pooling in the same layer",
                          "add `max_pool`/`avg_pool`, or remove `pool_dilation`")


def _output_pad(rd: _LayerReader, v: dict) -> None:
    if rd.has("output_pad"):
        out_pad = rd.int("output_pad", 0)
        v["output_padding"] = (out_pad, out_pad)
    else:
        v["output_padding"] = (1, 1) if v["operator"].transposed else (0, 0)


def _weight_source(rd: _LayerReader, v: dict) -> None:
    v["weight_source"] = None
    if rd.has("weight_source"):
        v["weight_source"] = _find(rd, "weight_source",
                                   rd.reference("weight_source", rd.data["weight_source"]))


def _buffers(rd: _LayerReader, v: dict) -> None:
    v["buffer_shift"] = None
    if rd.has("buffer_shift"):
        v["buffer_shift"] = rd.int("buffer_shift", 1)
        if not rd.has("in_sequences"):
            raise rd.fail("buffer_shift", "`buffer_shift` needs `in_sequences` naming the "
                          "data buffer", "add `in_sequences: <the data_buffer's name>` "
                          "(seed 000, Rolling Buffers)", code="sidecar.missing-key")
    v["buffer_insert"] = None
    if rd.has("buffer_insert"):
        v["buffer_insert"] = rd.int("buffer_insert", 1)
        if not rd.has("out_offset"):
            raise rd.fail("buffer_insert", "`buffer_insert` needs `out_offset`",
                          "add `out_offset`: the data buffer's offset + 4 x (its positions "
                          "- buffer_insert)", code="sidecar.missing-key")


LAYER_PARSERS: tuple[LayerParser, ...] = (
    _processors, _pooling, _quantization,
    _plain("output_shift", _int_from(-15 - 7, 15), None),
    _plain("in_channels", _int_from(1), None),
    _in_dim, _in_crop,
    _plain("read_gap", _int_from(0), 0, "in_skip", "read_gap"),
    _plain("in_channel_skip", _int_from(0), 0),
    _plain("in_offset", _int_from(0), None),
    _plain("out_channels", _int_from(1), None),
    _out_offset, _activation, _operation, _pad, _dilation, _eltwise,
    _plain("pool_first", _flag, True),
    _operands, _data_format, _output_width, _kernel_size, _stride,
    _plain("streaming", _flag, False),
    _plain("flatten", _flag, False),
    _in_sequences, _links,
    _plain("snoop_sequence", _int_from(), None),
    _plain("conv_groups", _int_from(1), 1, "conv_groups", "groups"),
    _plain("write_gap", _int_from(0), 0),
    _plain("bypass", _flag, False),
    _bias_group,
    _plain("calcx4", _flag, False),
    _plain("tcalc", _flag, None),
    _plain("readahead", _flag, False),
    _pool_dilation, _output_pad,
    _plain("output", _flag, False),
    _weight_source, _buffers,
)


def _one_dimensional(rd: _LayerReader, v: dict) -> None:
    """What the operation fixes after all keys are read: 1-D layers have no second
    dimension (the vendor tool forces it to 1/0), a passthrough has no kernel and a
    transposed convolution always strides 2; `pool_first: false` needs both pooling and
    an element-wise operation."""
    operator = v["operator"]
    if operator.one_d:
        v["padding"] = (v["padding"][0], 0)
        v["pool"] = (v["pool"][0], 1)
        v["pool_stride"] = (v["pool_stride"][0], 1) if v["pool_stride"] else None
        v["stride"] = (v["stride"][0], 1)
        v["dilation"] = (v["dilation"][0], 1)
        v["pool_dilation"] = (v["pool_dilation"][0], 1)
    elif operator == Op.NONE:
        v["kernel_size"] = (1, 1)
    elif operator == Op.CONVTRANSPOSE2D:
        v["stride"] = (2, 2)
    if not v["pool_first"] and (v["operands"] == 1 or v["pool"] == (1, 1)):
        raise rd.fail("pool_first", "`pool_first: false` only matters with both pooling and "
                      "an element-wise operation", "remove `pool_first`")


def _parse_layer(ctx: _Ctx, index: int, yaml_index: int, entry: dict,
                 names: list[str | None], buffer_names: set[str]) -> SidecarLayer:
    rd = _LayerReader(ctx, yaml_index, entry, names, buffer_names)
    v: dict = {}
    for parse in LAYER_PARSERS:
        parse(rd, v)
    _one_dimensional(rd, v)
    v["pool_stride"] = v["pool_stride"] or (1, 1)
    return SidecarLayer(index=index, yaml_index=yaml_index, name=rd.name,
                        raw=json.dumps(entry, sort_keys=True, default=str), **v)


def _apply_shared_padding_quirk(layers: list[SidecarLayer]) -> list[SidecarLayer]:
    """Reproduce how the vendor tool's default padding behaves across layers.

    The vendor parser gives every convolution without `pad` one *shared* default [1, 1]
    list and zeroes its second entry in place for a Conv1d layer; so as soon as one Conv1d
    layer relies on the default pad, every layer relying on it gets padding [1, 0]. This
    is invisible for 1-D networks and changes mixed 1-D/2-D networks only when pad is left
    out; we do the same so a sidecar means what it meant to the vendor tool.
    """
    from dataclasses import replace

    def uses_shared(lay: SidecarLayer) -> bool:
        return not lay.pad_given and lay.operator.convolution

    if not any(uses_shared(lay) and lay.operator.one_d for lay in layers):
        return layers
    return [replace(lay, padding=(lay.padding[0], 0)) if uses_shared(lay) else lay
            for lay in layers]


def _records(ctx: _Ctx, value: object, name: str, allowed: tuple[str, ...],
             required: tuple[str, ...], not_a_list: str, needs: str
             ) -> Iterator[tuple[str, dict]]:
    """A global list of records (`unload`, `data_buffer`): a non-empty list of mappings
    with only `allowed` keys and every `required` one; each with its key path, checked
    as it is read (an earlier record's values fail before a later record's keys)."""
    if not isinstance(value, list) or not value:
        raise ctx.fail("sidecar.type", not_a_list, key=name)
    for i, item in enumerate(value):
        where_key = f"{name}[{i}]"
        if not isinstance(item, dict):
            raise ctx.fail("sidecar.type", f"`{where_key}` must be a mapping", key=where_key)
        for key in item:
            if key not in allowed:
                raise ctx.fail("sidecar.unknown-key", f"unknown `{name}` key `{key}`",
                               _suggest(str(key), allowed), key=f"{where_key}.{key}")
        for key in required:
            if key not in item:
                raise ctx.fail("sidecar.missing-key", needs.format(key=key),
                               key=f"{where_key}.{key}")
        yield where_key, item


def _region(ctx: _Ctx, item: dict, where_key: str) -> dict:
    """The memory region a record describes: processors, channels, dim, offset and
    width (8 unless given)."""
    return dict(
        processors=_mask(item["processors"], 64,
                         lambda msg, code, k=where_key: ctx.fail(code, msg, key=k),
                         "processors"),
        channels=_plain_int(ctx, item["channels"], f"{where_key}.channels", 1),
        dim=_dim(ctx, item["dim"], f"{where_key}.dim"),
        offset=_plain_int(ctx, item["offset"], f"{where_key}.offset", 0),
        width=_plain_int(ctx, item.get("width", 8), f"{where_key}.width", 8))


def _unloads(ctx: _Ctx, value: object) -> tuple[Unload, ...] | None:
    if value is None:
        return None
    records = _records(ctx, value, "unload", UNLOAD_KEYS,
                       ("processors", "channels", "dim", "offset"),
                       "`unload` must be a list of regions", "`unload` items need `{key}`")
    return tuple(
        Unload(**_region(ctx, item, where_key),
               write_gap=_plain_int(ctx, item.get("write_gap", 0), f"{where_key}.write_gap",
                                    0))
        for where_key, item in records)


def _data_buffers(ctx: _Ctx, value: object) -> tuple[DataBuffer, ...] | None:
    if value is None:
        return None
    if isinstance(value, list) and len(value) > 1:
        # seed 000 (Rolling Buffers) describes one buffer, and the vendor tool reads only
        # the first entry; a second one would be silently ignored there
        raise ctx.fail("sidecar.value", f"`data_buffer` lists {len(value)} buffers; a "
                       "network has one data buffer", "keep one entry (the vendor tool "
                       "reads only the first)", key="data_buffer")
    records = _records(ctx, value, "data_buffer", DATA_BUFFER_KEYS,
                       ("processors", "channels", "dim", "offset", "name"),
                       "`data_buffer` must be a list", "`data_buffer` needs `{key}`")
    items = []
    for where_key, item in records:
        if not isinstance(item["name"], str):
            raise ctx.fail("sidecar.type", "`data_buffer` `name` must be a word",
                           key=f"{where_key}.name")
        items.append(DataBuffer(name=item["name"], **_region(ctx, item, where_key)))
    return tuple(items)


def _plain_int(ctx: _Ctx, value: object, key: str, low: int) -> int:
    if not _is_int(value) or value < low:
        raise ctx.fail("sidecar.type", f"`{key}` must be an integer >= {low}, got {value!r}",
                       key=key)
    return value


def _dim(ctx: _Ctx, value: object, key: str) -> Pair:
    if _is_int(value) and value > 0:
        return value, 1
    if isinstance(value, list) and len(value) == 2 and all(map(_is_int, value)) \
            and min(value) > 0:
        return value[0], value[1]
    raise ctx.fail("sidecar.type", f"`{key}` must be a length or [H, W], got {value!r}",
                   key=key)

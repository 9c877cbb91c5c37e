"""Partial sidecars: hand-tuned processor and offset choices, the rest inferred.

A full sidecar (every layer with `processors`, as `onnx2ai8x sidecar` writes it) fixes the
whole mapping and goes through `resolve_placement`. A partial one lists only the layers a
user wants to pin, by `name`, with any of `processors`, `output_processors` and
`out_offset`; the automatic mapper keeps those and chooses everything else (issue 4,
"fills in only what it leaves out").
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..devices import Device
from ..errors import EXIT_USAGE, Ai8xError, Diagnostic
from ..map.hw import multipass, popcount
from ..map.memory_check import output_bytes
from ..network import Layer, Network
from ..placement import Placement
from .parse import GLOBAL_KEYS, LAYER_KEYS, closest, key_lines, load_yaml, with_line

if TYPE_CHECKING:
    from ..map.lowered import HwNetwork
    from ..options import HwDecision

_LAYER_NAME = re.compile(r"layer `([^`]*)`")
HINT_KEYS = ("processors", "output_processors", "out_offset")
# Keys that describe the network rather than its mapping: a partial sidecar may restate
# them (e.g. copied from a full one) but the ONNX model decides them.
_DESCRIPTIVE = frozenset({"name", "sequence", "op", "operation", "operator", "convolution",
                          "activate", "activation", "kernel_size", "pad", "stride",
                          "max_pool", "avg_pool", "pool_stride", "out_channels",
                          "in_channels", "output_shift", "quantization", "flatten",
                          "in_dim", "eltwise", "operands", "comment"})


@dataclass(frozen=True)
class SidecarText:
    """A sidecar file as loaded YAML, before deciding which kind it is."""

    path: Path
    data: dict
    # line numbers of the keys as written (parse.key_lines): messages about a hand edit
    # name the line
    lines: dict = field(default_factory=dict)

    def locate(self, pos: int | None, key: str = "") -> str:
        """`FILE:LINE: ` for `key` of layer entry `pos` (a global key with None), or of
        the entry when the key is not written there."""
        line = self.lines.get((pos, key)) or self.lines.get((pos, ""))
        return f"{self.path}:{line}" if line else str(self.path)

    def relocate(self, diag: Diagnostic, network: Network,
                 positions: dict[int, int] | list[int]) -> Diagnostic:
        """`diag` (about a network layer) placed at the sidecar line the user wrote:
        the layer's entry (`positions`: layer index -> position in `layers`) and, when
        the checker names the key, that key's line (or the entry's, saying that the key
        is not written there and its value was derived)."""
        names = [lay.name for lay in network.layers]
        found = _LAYER_NAME.match(diag.where)
        ll = names.index(found.group(1)) if found and found.group(1) in names else \
            0 if diag.where == "network input" else None
        pos = dict(enumerate(positions)).get(ll) if isinstance(positions, list) else \
            positions.get(ll) if ll is not None else None
        where = diag.where
        if diag.key and pos is not None:
            where += f", `{diag.key}`"
            if (pos, diag.key) not in self.lines:
                where += " (not written in this entry: derived)"
        return replace(diag, where=f"{self.locate(pos, diag.key)}: {where}")

    def add_line(self, diag: Diagnostic, positions: list[int] | None = None) -> Diagnostic:
        """`diag` from the sidecar's parser or resolver (`FILE: layer N (name), `key``,
        or `layers[N]`) with the file and the line of that key (or of the global key, or
        of the layer entry) added: `FILE:LINE: layer N ...`. `positions`: sidecar layer
        number -> position in `layers` (the file order, when `sequence` reorders it);
        None: the same."""
        return with_line(diag, str(self.path), self.lines, positions)

    @property
    def layer_entries(self) -> list:
        layers = self.data.get("layers")
        return layers if isinstance(layers, list) else []

    def is_full(self, layer_count: int) -> bool:
        """An entry with `processors` for every layer: the sidecar fixes the whole
        mapping. Fewer entries, or entries without processors, only pin choices."""
        entries = self.layer_entries
        return len(entries) >= layer_count and all(
            isinstance(e, dict) and "processors" in e for e in entries)


def read_sidecar_text(path: Path) -> SidecarText:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise Ai8xError("usage.missing-file", str(path), "sidecar not found",
                        "check the --sidecar path", exit_code=EXIT_USAGE) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise Ai8xError("sidecar.unreadable", str(path), f"cannot read the sidecar ({exc})",
                        "pass a UTF-8 YAML file") from None
    sidecar = SidecarText(Path(path), load_yaml(text, str(path)), key_lines(text))
    _check_globals(sidecar)
    return sidecar


# Global keys only a full sidecar can state: the automatic mapper around a partial one's
# pins has no place for them, so they are refused there rather than ignored.
_FULL_ONLY = tuple(k for k in GLOBAL_KEYS if k not in ("arch", "dataset", "layers"))


def _check_globals(sidecar: SidecarText) -> None:
    """Every global key of the sidecar is one the language has (a misspelt `layers:`
    would leave every entry unread, issue 35), and `layers` is there."""
    for key in sidecar.data:
        if key in GLOBAL_KEYS:
            continue
        close = closest(key, GLOBAL_KEYS)
        raise Ai8xError("sidecar.unknown-key", f"{sidecar.locate(None, str(key))}: `{key}`",
                        f"unknown global key `{key}`",
                        f"did you mean `{close}`?" if close else
                        f"the global keys are {', '.join(GLOBAL_KEYS)}")
    if "layers" not in sidecar.data:
        raise Ai8xError("sidecar.missing-key", str(sidecar.path),
                        "the sidecar has no `layers`, so it states nothing to keep",
                        "list the layers under `layers:` (`onnx2ai8x sidecar MODEL.onnx "
                        "-o FILE` writes a full one to start from)")
    if not isinstance(sidecar.data["layers"], list) or not sidecar.data["layers"]:
        raise Ai8xError("sidecar.type", f"{sidecar.locate(None, 'layers')}: `layers`",
                        "`layers` must be a non-empty list of layer mappings",
                        "start each layer with `- `")


def _mask_or_int(value: object, where: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Ai8xError("sidecar.type", where, f"`{key}` must be a non-negative integer "
                        f"(got {value!r})", "write masks as hex, e.g. 0x000000000000000f")
    return int(value)


def _entry_layers(sidecar: SidecarText, names: list[str]) -> list[tuple[int, int, dict]]:
    """(position in `layers`, network layer index, entry) of each partial entry."""
    out = []
    for pos, entry in enumerate(sidecar.layer_entries):
        where = f"{sidecar.locate(pos)}: layers[{pos}]"
        if not isinstance(entry, dict):
            raise Ai8xError("sidecar.structure", where, "a layer entry must be a mapping",
                            "write `- name: conv1` followed by the keys to pin")
        name = entry.get("name")
        if name is None:
            if pos >= len(names):
                raise Ai8xError("sidecar.partial", where,
                                f"entry {pos} has no `name` and the model has only "
                                f"{len(names)} layers", "name the layer the entry pins")
            name = names[pos]
        if name not in names:
            close = closest(name, names)
            raise Ai8xError("sidecar.partial", f"{sidecar.locate(pos, 'name')}: layers[{pos}]",
                            f"no layer named `{name}` in the model",
                            (f"did you mean `{close}`? " if close else "")
                            + f"use one of: {', '.join(names)}")
        out.append((pos, names.index(name), entry))
    return out


def restated(sidecar: SidecarText, layer_count: int) -> tuple[str, ...]:
    """A warning when a partial sidecar's entries restate keys the model decides (copied
    from a full sidecar, or written in the hope they apply): they are read only to be
    known keys, not used, and the user is told so rather than left to believe them
    (issue 35). Empty when they give none but `name`."""
    found = [(pos, key) for pos, entry in enumerate(sidecar.layer_entries)
             if isinstance(entry, dict) for key in entry
             if key in _DESCRIPTIVE and key not in ("name", "comment")]
    if not found:
        return ()
    keys = sorted({str(key) for _, key in found})
    pos, key = found[0]
    entries = len(sidecar.layer_entries)
    why = (f"with {entries} entries for the model's {layer_count} layers it is a partial "
           "sidecar: it " if entries < layer_count else "the partial sidecar ")
    return (f"warning[sidecar.restated] {sidecar.locate(pos, str(key))}: {why}"
            f"restates {', '.join(f'`{k}`' for k in keys)}, which the model "
            "decides; only `processors`, `output_processors` and `out_offset` are used\n"
            "  hint: to change those, edit the model, or write the full sidecar "
            "(`onnx2ai8x sidecar MODEL.onnx -o FILE`) and pass it back",)


def _check_pin(sidecar: SidecarText, pos: int, key: str, value: int, layer: Layer,
               device: Device) -> None:
    """A pinned value the mapper could not honour is refused here, at its line: the
    processor counts the layer's channels need, a whole-word offset inside data memory
    (an offset is never rounded silently)."""
    where = f"{sidecar.locate(pos, key)}: layer `{layer.name}`, `{key}`"
    if key == "out_offset":
        size = output_bytes(layer)
        if value % 4:
            raise Ai8xError("sidecar.alignment", where,
                            f"`out_offset` {value:#06x} is not a multiple of 4; data offsets "
                            f"count whole words (the accelerator would use {value & ~3:#06x})",
                            f"pin `out_offset: {value & ~3:#06x}` or {(value + 3) & ~3:#06x}")
        if value + size > device.data_instance_bytes:
            raise Ai8xError("sidecar.value", where,
                            f"the output ({size} bytes per memory instance) at {value:#06x} "
                            f"ends past the {device.data_instance_bytes:#x}-byte data memory "
                            f"instance of the {device.name}",
                            f"pin `out_offset` at {device.data_instance_bytes - size:#06x} or "
                            "below")
        return
    channels = layer.input_channels if key == "processors" else layer.output_channels
    passes, per_pass = multipass(channels)
    if popcount(value) != per_pass:
        raise Ai8xError("sidecar.value", where,
                        f"{channels} {'input' if key == 'processors' else 'output'} channels "
                        f"need {per_pass} processors per pass ({passes} pass(es)); "
                        f"{value:#018x} enables {popcount(value)}",
                        f"enable exactly {per_pass} processors, or leave `{key}` out")


def partial_hints(sidecar: SidecarText, network: Network, device: Device | None = None
                  ) -> dict[str, dict[str, int]]:
    """{layer name: {hint key: value}} for `onnx2ai8x.map.auto.auto_place`, each pin
    checked against the layer (with `device`, against its data memory too)."""
    names = [lay.name for lay in network.layers]
    for key in _FULL_ONLY:
        if key in sidecar.data:
            raise Ai8xError("sidecar.partial", f"{sidecar.locate(None, key)}: `{key}`",
                            f"`{key}` needs the full mapping; this sidecar pins only some "
                            f"layers' {', '.join(HINT_KEYS)} ({len(sidecar.layer_entries)} "
                            f"of {len(names)} entries, or entries without `processors`)",
                            "write the full sidecar with `onnx2ai8x sidecar MODEL.onnx -o "
                            "FILE`, edit it, and pass it back with --sidecar")
    hints: dict[str, dict[str, int]] = {}
    for pos, ll, entry in _entry_layers(sidecar, names):
        name = names[ll]
        unknown = sorted((k for k in entry if k not in HINT_KEYS and k not in _DESCRIPTIVE),
                         key=str)
        if unknown:
            key = unknown[0]
            close = closest(key, LAYER_KEYS)
            if key not in LAYER_KEYS:
                raise Ai8xError("sidecar.unknown-key",
                                f"{sidecar.locate(pos, key)}: layer `{name}`, `{key}`",
                                f"unknown layer key `{key}`",
                                f"did you mean `{close}`?" if close else
                                f"a partial sidecar pins {', '.join(HINT_KEYS)}")
            raise Ai8xError("sidecar.partial", f"{sidecar.locate(pos, key)}: layer `{name}`",
                            f"a partial sidecar can pin only {', '.join(HINT_KEYS)}; "
                            f"`{key}` needs the full mapping",
                            "write the full sidecar with `onnx2ai8x sidecar MODEL.onnx -o "
                            "FILE`, edit it, and pass it back with --sidecar")
        pinned = {k: _mask_or_int(entry[k], f"{sidecar.locate(pos, k)}: layer `{name}`", k)
                  for k in HINT_KEYS if k in entry}
        if device is not None:
            for key, value in pinned.items():
                _check_pin(sidecar, pos, key, value, network.layers[ll], device)
        if pinned:
            hints[str(name)] = pinned
    return hints


def place_partial(sidecar: SidecarText, network: Network, device: Device, *,
                  decision: HwDecision | None = None) -> HwNetwork:
    """The automatic mapping around a partial sidecar's pins. When it fails and the
    model maps without the pins, the message says that the pins caused it and where
    they are written."""
    from ..map.auto import auto_map, auto_place

    hints = partial_hints(sidecar, network, device)
    names = [lay.name for lay in network.layers]
    positions = {ll: pos for pos, ll, _ in _entry_layers(sidecar, names)}
    try:
        mapped = auto_map(network, device, hints, decision=decision)
    except Ai8xError as err:
        diags = [sidecar.relocate(d, network, positions) for d in err.diagnostics]
        if hints:
            try:
                auto_place(network, device, None, decision=decision)
            except Ai8xError:
                pass
            else:
                pins = "; ".join(
                    f"`{k}: {v:#x}` of `{name}` ({sidecar.locate(positions[names.index(name)], k)})"
                    for name, keys in hints.items() for k, v in keys.items())
                diags.append(Diagnostic(
                    "sidecar.pins", str(sidecar.path),
                    f"the model maps without the sidecar's pins; with them it does not: {pins}",
                    "move or drop the pins named above (pinned layers must leave room for "
                    "the data still needed), or let onnx2ai8x choose them"))
        raise Ai8xError.many(diags) from None
    _pins_kept(sidecar, mapped.placement, hints, positions)
    return mapped


_PLACED = {"processors": "processor_map", "output_processors": "output_processor_map",
           "out_offset": "out_offset"}


def _pins_kept(sidecar: SidecarText, placement: Placement,
               hints: dict[str, dict[str, int]], positions: dict[int, int]) -> None:
    """Every pin is in the mapping, or the conversion stops at its line: a pin the
    mapper could not keep (another layer's choice decides it) is never dropped
    silently."""
    network = placement.network
    names = [lay.name for lay in network.layers]
    diags = []
    for name, keys in hints.items():
        ll = names.index(name)
        for key, value in keys.items():
            got = getattr(placement.layers[ll], _PLACED[key])
            if got == value:
                continue
            width = 18 if "processors" in key else 6
            diags.append(Diagnostic(
                "sidecar.pin-not-kept",
                f"{sidecar.locate(positions[ll], key)}: layer `{name}`, `{key}`",
                f"the pinned {value:#0{width}x} cannot be kept: the mapping around the "
                f"other layers needs {got:#0{width}x} (where the layers that read this "
                "output find it)",
                f"pin `{key}: {got:#0{width}x}`, or pin the reading layers' `processors` "
                "too, or write the full sidecar"))
    if diags:
        raise Ai8xError.many(diags)

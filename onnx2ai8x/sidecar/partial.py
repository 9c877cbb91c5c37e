"""Partial sidecars: hand-tuned processor and offset choices, the rest inferred.

A full sidecar (every layer with `processors`, as `onnx2ai8x sidecar` writes it) fixes the
whole mapping and goes through `resolve_placement`. A partial one lists only the layers a
user wants to pin, by `name`, with any of `processors`, `output_processors` and
`out_offset`; the automatic mapper keeps those and chooses everything else (issue 4,
"fills in only what it leaves out").
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import EXIT_USAGE, Ai8xError
from ..network import Network
from .parse import load_yaml

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
    return SidecarText(Path(path), load_yaml(text, str(path)))


def _mask_or_int(value: object, where: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Ai8xError("sidecar.type", where, f"`{key}` must be a non-negative integer "
                        f"(got {value!r})", "write masks as hex, e.g. 0x000000000000000f")
    return int(value)


def partial_hints(sidecar: SidecarText, network: Network) -> dict[str, dict[str, int]]:
    """{layer name: {hint key: value}} for `onnx2ai8x.map.auto.auto_place`."""
    names = [lay.name for lay in network.layers]
    hints: dict[str, dict[str, int]] = {}
    for pos, entry in enumerate(sidecar.layer_entries):
        where = f"{sidecar.path}: layers[{pos}]"
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
            raise Ai8xError("sidecar.partial", where, f"no layer named `{name}` in the model",
                            f"use one of: {', '.join(names)}")
        where = f"{sidecar.path}: layer `{name}`"
        unknown = sorted(k for k in entry if k not in HINT_KEYS and k not in _DESCRIPTIVE)
        if unknown:
            raise Ai8xError("sidecar.partial", where,
                            f"a partial sidecar can pin only {', '.join(HINT_KEYS)}; "
                            f"`{unknown[0]}` needs the full mapping",
                            "write the full sidecar with `onnx2ai8x sidecar MODEL.onnx -o "
                            "FILE`, edit it, and pass it back with --sidecar")
        pinned = {k: _mask_or_int(entry[k], where, k) for k in HINT_KEYS if k in entry}
        if pinned:
            hints[str(name)] = pinned
    return hints

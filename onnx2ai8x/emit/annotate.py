"""The annotated ONNX written with every conversion, for Netron.

Each layer's main node (named after the layer, docs/design.md section 1) gets metadata
with its hardware layer index, processors, data memory offsets and estimated cycles; the
model's doc string states the device and the totals.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..network import Network
from ..placement import Placement

PREFIX = "ai8x."


def layer_annotations(network: Network, placement: Placement,
                      cycles: Sequence[int]) -> dict[str, dict[str, str]]:
    """Metadata per layer name (values are strings, as ONNX metadata must be)."""
    per_layer = _per_layer_cycles(len(network.layers), cycles)
    notes: dict[str, dict[str, str]] = {}
    for index, (layer, place) in enumerate(zip(network.layers, placement.layers,
                                               strict=True)):
        notes[layer.name] = {
            "hw_layer": str(index),
            "processors": f"0x{place.processor_map:016x}",
            "output_processors": f"0x{place.output_processor_map:016x}",
            "in_offset": f"0x{place.in_offset:04x}",
            "out_offset": f"0x{place.out_offset:04x}",
            "estimated_cycles": str(per_layer[index]),
        }
    return notes


def _per_layer_cycles(count: int, cycles: Sequence[int]) -> list[int]:
    """The latency estimate may carry a leading start-up entry; keep one per layer."""
    values = list(cycles)
    if len(values) == count + 1:
        values = values[1:]
    return (values + [0] * count)[:count]


def annotate_model(model, network: Network, placement: Placement, cycles: Sequence[int],
                   device) -> object:
    """Return a copy of `model` carrying the mapping as node and model metadata."""
    import onnx

    annotated = onnx.ModelProto()
    annotated.CopyFrom(model)
    notes = layer_annotations(network, placement, cycles)
    for node in annotated.graph.node:
        extra = notes.get(node.name)
        if not extra:
            continue
        existing = {p.key: p for p in node.metadata_props}
        for key, value in extra.items():
            full = PREFIX + key
            if full in existing:
                existing[full].value = value
            else:
                node.metadata_props.add(key=full, value=value)
    device_name = getattr(device, "name", str(device))
    total_cycles = sum(_per_layer_cycles(len(network.layers), cycles))
    annotated.doc_string = (f"{network.name} for {device_name}: {len(network.layers)} "
                            f"hardware layers, estimated {total_cycles} cycles")
    props = {p.key: p for p in annotated.metadata_props}
    for key, value in (("ai8x.device", device_name),
                       ("ai8x.estimated_cycles", str(total_cycles))):
        if key in props:
            props[key].value = value
        else:
            annotated.metadata_props.add(key=key, value=value)
    return annotated

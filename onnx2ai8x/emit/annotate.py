"""The annotated ONNX written with every conversion, for Netron.

Each layer's main node (named after the layer, docs/design.md section 1) gets metadata
with its hardware layer index, processors, data memory offsets and estimated cycles; the
model's doc string states the device and the totals.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..map.lowered import HwNetwork
from ..placement import Placement

PREFIX = "ai8x."


def layer_annotations(placement: Placement, cycles: Sequence[int],
                      report: object | None = None) -> dict[str, dict[str, str]]:
    """Metadata per layer name (values are strings, as ONNX metadata must be).

    With the mapping `report` (onnx2ai8x.report.Report) the kernel memory columns and
    MACs of each layer are added too.
    """
    network = placement.network
    per_layer = _per_layer_cycles(len(network.layers), cycles)
    rows = {row.index: row for row in getattr(report, "layers", ())}
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
        row = rows.get(index)
        if row is not None:
            notes[layer.name]["kernel_columns"] = str(row.kernel_columns)
            notes[layer.name]["macs"] = str(row.macs)
    return notes


def _per_layer_cycles(count: int, cycles: Sequence[int]) -> list[int]:
    """The latency estimate may carry a leading start-up entry; keep one per layer."""
    values = list(cycles)
    if len(values) == count + 1:
        values = values[1:]
    return (values + [0] * count)[:count]


# the first ONNX IR version with NodeProto.metadata_props (onnx/onnx.proto, IR 10)
NODE_METADATA_IR = 10


def annotate_model(model, hw: HwNetwork, cycles: Sequence[int], *,
                   report: object | None = None) -> object:
    """Return a copy of `model` (onnx2ai8x.onnxpb or onnx messages) carrying the
    lowered network's mapping (on its device) as node and model metadata."""
    network, placement = hw.network, hw.placement
    annotated = type(model)()
    annotated.CopyFrom(model)
    notes = layer_annotations(placement, cycles, report)
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
    device_name = placement.device.name
    total_cycles = sum(_per_layer_cycles(len(network.layers), cycles))
    totals = [("ai8x.device", device_name), ("ai8x.estimated_cycles", str(total_cycles))]
    doc = (f"{network.name} for {device_name}: {len(network.layers)} hardware layers, "
           f"estimated {total_cycles} cycles")
    if report is not None:
        # the report's total includes the start-up cycles, as the summary table shows
        total_cycles = int(getattr(report, "total_cycles", total_cycles))
        totals[1] = ("ai8x.estimated_cycles", str(total_cycles))
        doc = (f"{network.name} for {device_name}: {len(network.layers)} hardware layers, "
               f"estimated {total_cycles} cycles")
        macs = getattr(report, "total_macs", 0)
        wpct = getattr(report, "weight_memory_pct", 0.0)
        dpct = getattr(report, "data_memory_pct", 0.0)
        doc += f", {macs} MACs, weight memory {wpct}%, data memory {dpct}%"
        totals += [("ai8x.macs", str(macs)), ("ai8x.weight_memory_pct", str(wpct)),
                   ("ai8x.data_memory_pct", str(dpct))]
    annotated.doc_string = doc
    if any(len(node.metadata_props) for node in annotated.graph.node):
        # node metadata_props came with IR version 10 (ONNX 1.16): a file declaring an
        # older IR would carry fields its version does not have
        annotated.ir_version = max(annotated.ir_version, NODE_METADATA_IR)
    props = {p.key: p for p in annotated.metadata_props}
    for key, value in totals:
        if key in props:
            props[key].value = value
        else:
            annotated.metadata_props.add(key=key, value=value)
    return annotated

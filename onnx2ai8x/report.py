"""Summary of a placed network: per layer what runs where, and the totals a user budgets.

Numbers come from the Network and Placement alone (plus the cycle estimate from
onnx2ai8x.map.latency), so the report can be printed for an automatic mapping and for a
hand-written sidecar alike. Memory percentages use the device sizes of
onnx2ai8x.map.memory_check (seed 000, "MAX78000 and MAX78002 Hardware and Resources").
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .devices import PROCESSORS
from .map.hw import multipass, popcount
from .map.kernels import FREE
from .map.latency import execution_order
from .map.lowered import HwNetwork
from .map.memory_check import buffers, input_bytes, output_bytes
from .network import Layer, Op


@dataclass(frozen=True)
class LayerReport:
    """One layer of the report."""

    index: int
    name: str
    operator: str
    in_shape: tuple[int, ...]  # (C, H, W)
    out_shape: tuple[int, ...]
    processors: int  # input processors used (per pass)
    passes: int
    processor_map: str  # hex mask
    kernel_columns: int  # 72-bit kernel-memory columns per input processor
    weight_bytes: int  # the layer's weights at their bit width
    data_in_bytes: int  # per memory instance
    data_out_bytes: int
    in_offset: int
    out_offset: int
    cycles: int
    macs: int


@dataclass(frozen=True)
class BufferReport:
    """Where the data buffer lives (seed 000, Rolling Buffers): it keeps its values from
    one inference to the next, so that memory is taken for good."""

    name: str
    channels: int
    length: int
    processor_map: str
    offset: int
    bytes_per_processor: int


@dataclass(frozen=True)
class Report:
    """The whole network: layers and totals."""

    network: str
    device: str
    layers: tuple[LayerReport, ...]
    startup_cycles: int
    total_cycles: int
    total_macs: int
    weight_bytes: int
    kernel_columns_used: int  # summed over processors
    kernel_columns_total: int
    weight_memory_pct: float  # of the device's kernel memory
    data_memory_peak_bytes: int  # highest byte used in any one memory instance
    data_memory_bytes: int  # per instance
    data_memory_pct: float
    # what the converter added to the model's layers (legalize/rewrite.py: pass-through
    # copies and element-wise layers), one sentence each
    notes: tuple[str, ...] = ()
    data_buffer: BufferReport | None = None


def layer_macs(layer: Layer) -> int:
    """Multiply-accumulates of one layer (0 for passthrough/element-wise only)."""
    if layer.operator.passthrough or layer.weights is None:
        return 0
    if layer.operator == Op.LINEAR:
        return int(layer.weights.size)
    kernel = layer.kernel_size[0] * layer.kernel_size[1]
    per_group_in = layer.input_channels // max(1, layer.conv_groups)
    if layer.operator.transposed:
        # every input pixel meets every kernel tap once
        pixels = layer.pooled_dim[0] * layer.pooled_dim[1]
        return pixels * layer.output_channels * per_group_in * kernel
    pixels = layer.output_dim[0] * layer.output_dim[1]
    return pixels * layer.output_channels * per_group_in * kernel


def _shape(c: int, dim: tuple[int, int]) -> tuple[int, ...]:
    if tuple(dim) == (1, 1):
        return (c,)
    return (c, dim[0]) if dim[1] == 1 else (c, dim[0], dim[1])


def summarize(hw: HwNetwork, cycles: list[int], *, notes: tuple[str, ...] = ()) -> Report:
    """The report of a lowered network on its device; `cycles` is
    onnx2ai8x.map.latency.estimate_cycles'; `notes` say what the converter's rewrites
    added (legalize.rewrite.inserted_layers)."""
    network, placement = hw.network, hw.placement
    facts = placement.device
    order = execution_order(placement)
    startup = cycles[0] if cycles else 0
    per_layer = dict(zip(order, cycles[1:], strict=False))
    # The kernel figures are the allocation's (map/weights.py, the vendor's exact layout
    # the project loads), not the mapper's estimate: per layer its columns per processor
    # (`kern_len`), in total the columns holding a kernel (shared weights stored once).
    kernels = hw.weights.kernels

    rows = []
    for ll, (lay, pl) in enumerate(zip(network.layers, placement.layers, strict=True)):
        passes = multipass(lay.input_channels)[0]
        bits = abs(lay.quantization) or 8
        wbytes = 0 if lay.weights is None else (int(lay.weights.size) * bits + 7) // 8
        rows.append(LayerReport(
            index=ll, name=lay.name, operator=lay.operator_name,
            in_shape=_shape(lay.input_channels, lay.input_dim),
            out_shape=_shape(lay.output_channels, lay.output_dim),
            processors=popcount(pl.processor_map), passes=passes,
            processor_map=f"0x{pl.processor_map:016x}",
            kernel_columns=int(kernels.length[ll]),
            weight_bytes=wbytes, data_in_bytes=input_bytes(network, ll, pl.big_data),
            data_out_bytes=output_bytes(lay), in_offset=pl.in_offset,
            out_offset=pl.out_offset, cycles=int(per_layer.get(ll, 0)),
            macs=layer_macs(lay)))
    total_cols = sum(facts.kernel_words(p) for p in range(PROCESSORS))
    used_cols = int(np.count_nonzero(kernels.owners != FREE))
    peak = 0
    for buf in buffers(hw):  # the rollovers the mapper examined the placement with
        peak = max(peak, buf.end)
    kept = None
    if network.data_buffer is not None and placement.data_buffer is not None:
        db, where = network.data_buffer, placement.data_buffer
        kept = BufferReport(name=db.name, channels=db.channels, length=db.length,
                            processor_map=f"0x{where.processors:016x}", offset=where.offset,
                            bytes_per_processor=4 * db.length)
    return Report(
        network=network.name, device=facts.name, layers=tuple(rows), startup_cycles=startup,
        total_cycles=int(sum(cycles)), total_macs=sum(r.macs for r in rows),
        weight_bytes=sum(r.weight_bytes for r in rows), kernel_columns_used=used_cols,
        kernel_columns_total=total_cols,
        weight_memory_pct=round(100.0 * used_cols / total_cols, 2),
        data_memory_peak_bytes=peak, data_memory_bytes=facts.data_instance_bytes,
        data_memory_pct=round(100.0 * peak / facts.data_instance_bytes, 2),
        notes=tuple(notes), data_buffer=kept)


_COLUMNS = (("#", "index"), ("layer", "name"), ("op", "operator"), ("in", "in_shape"),
            ("out", "out_shape"), ("procs", "processors"), ("passes", "passes"),
            ("kcols", "kernel_columns"), ("in@", "in_offset"), ("out@", "out_offset"),
            ("cycles", "cycles"), ("MACs", "macs"))


def _cell(key: str, value: Any) -> str:
    if key in ("in_shape", "out_shape"):
        return "x".join(str(v) for v in value)
    if key in ("in_offset", "out_offset"):
        return f"{value:#06x}"
    if key in ("cycles", "macs"):
        return f"{value:,}"
    return str(value)


def render_table(report: Report) -> str:
    """The report as a plain-text table (fixed-width, deterministic)."""
    head = [title for title, _ in _COLUMNS]
    body = [[_cell(key, getattr(row, key)) for _, key in _COLUMNS] for row in report.layers]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i not in (1, 2) else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    out = [f"{report.network} on {report.device}", line(head),
           "  ".join("-" * w for w in widths)]
    out += [line(r) for r in body]
    out.append("")
    out.append(f"cycles (estimate): {report.total_cycles:,} (startup {report.startup_cycles:,})")
    out.append(f"MACs: {report.total_macs:,}")
    out.append(f"weights: {report.weight_bytes:,} bytes; kernel memory "
               f"{report.kernel_columns_used:,}/{report.kernel_columns_total:,} columns "
               f"({report.weight_memory_pct:.2f}%)")
    out.append(f"data memory: peak {report.data_memory_peak_bytes:#x} of "
               f"{report.data_memory_bytes:#x} bytes per instance "
               f"({report.data_memory_pct:.2f}%)")
    if report.data_buffer is not None:
        kb = report.data_buffer
        out.append(f"data buffer `{kb.name}`: {kb.channels:,} channels x {kb.length:,} on "
                   f"processors {kb.processor_map} at {kb.offset:#06x} (kept across "
                   "inferences)")
    out += [f"note: {note}" for note in report.notes]
    return "\n".join(out) + "\n"


def to_json(report: Report) -> str:
    """report.json text (sorted keys, stable formatting)."""
    return json.dumps(asdict(report), indent=2, sort_keys=True) + "\n"

"""A float model split between the CPU and the accelerator, quantized from one
calibration (issue 28, item 1): the CPU stem's and head's integer operators, the
accelerator part's ai8x-ONNX, and the integer pipeline that runs them in order.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..devices import Device
from ..errors import EXIT_USAGE, Ai8xError
from ..frontend import QuantizeRequest
from .split import Split, find_split, run_float, submodel


@dataclass(frozen=True, eq=False)
class Partitioned:
    """The CPU segments (onnx2ai8x.cpu.ops.Segment or None) around the accelerator's
    part (`quant`: quantize.ptq.QuantResult of the middle float model)."""

    split: Split
    quant: object
    stem: object | None
    head: object | None
    input_scale: float  # float per unit of the CPU stem's int8 input (stem only)
    scales: dict  # tensor name -> float per integer unit (the CPU's tensors)

    def quantize_input(self, x: np.ndarray) -> np.ndarray:
        """Float samples (N, model input) -> the first segment's int8 input (N, ...)."""
        if self.stem is None:
            return self.quant.mapping.quantize(x)
        return np.clip(np.floor(np.asarray(x, np.float64) / self.input_scale + 0.5),
                       -128, 127).astype(np.int8)

    def run_stem(self, q: np.ndarray) -> np.ndarray:
        """One sample's stem input (int8, per-sample shape) -> the accelerator's input."""
        if self.stem is None:
            return q
        from ..cpu.reference import run_segment

        out = run_segment(self.stem.ops, {self.stem.inputs[0]: q})[self.stem.outputs[0]]
        return out.reshape(self.quant.network.input_shape)

    def run_head(self, acc_out: np.ndarray) -> np.ndarray:
        """The accelerator's output for one sample -> the model's output."""
        if self.head is None:
            return acc_out
        from ..cpu.reference import run_segment

        first = self.head.ops[0]
        x = np.asarray(acc_out).reshape(first.in_shapes[0]).astype(np.int8)
        return run_segment(self.head.ops, {self.head.inputs[0]: x})[self.head.outputs[0]]


def _try_middle(device: Device, request: QuantizeRequest, wide: bool):
    from ..quantize import quantize_file

    def attempt(middle: Path, cal: Path):
        return quantize_file(middle, cal, method=request.method,
                             percentile=request.percentile, device=device, check=True,
                             wide_output=wide)

    return attempt


def partition(model: Path, device: Device, request: QuantizeRequest) -> Partitioned:
    """Split the float model at `model` where the accelerator refuses its layers and
    quantize every part from `request.calibration`."""
    import tempfile

    import onnx

    from ..quantize import load_array

    if request.calibration is None:
        raise Ai8xError("usage.calibration", str(model),
                        "--cpu-fallback quantizes the CPU layers from calibration data",
                        "pass --calibration X.npy", exit_code=EXIT_USAGE)
    x = load_array(request.calibration, "calibration data").astype(np.float32)
    split = find_split(model, device, x, _try_middle(device, request, True))
    with tempfile.TemporaryDirectory(prefix="onnx2ai8x-part-") as tmp:
        middle = Path(tmp) / f"{Path(model).stem}.onnx"
        sub = submodel(split.model, [split.acc_input], [split.acc_output])
        sub.graph.name = split.model.graph.name  # the extractor renames it
        onnx.save(sub, str(middle))
        cal = Path(tmp) / "cal.npy"
        np.save(cal, x if not split.stem else run_float(split.model, x, split.acc_input))
        quant = _try_middle(device, request, not split.head)(middle, cal)
    return _segments(split, quant, x)


def _segments(split: Split, quant, x: np.ndarray) -> Partitioned:
    from ..cpu.ops import segment
    from .quantize_cpu import calibrated_scales, segment_ops
    from .split import graph_input

    by_name = {n.name: n for n in split.model.graph.node}
    fixed = {}
    if split.stem:
        if any(quant.mapping.offset):
            raise Ai8xError("partition.offset", split.acc_input,
                            "the accelerator's part starts by offsetting its input, which "
                            "the CPU stem does not fold in", "drop the offset after the stem")
        fixed[split.acc_input] = float(quant.mapping.scale)
    if split.head:
        fixed[split.acc_output] = float(quant.output_scales[0])
    nodes = [by_name[n] for n in (*split.stem, *split.head)]
    scales = calibrated_scales(split.model, nodes, x, fixed)
    stem = head = None
    if split.stem:
        stem = segment("stem", segment_ops(split.model, split.stem, scales),
                       (split.acc_input,))
    if split.head:
        head = segment("head", segment_ops(split.model, split.head, scales))
    return Partitioned(split=split, quant=quant, stem=stem, head=head,
                       input_scale=scales[graph_input(split.model)], scales=scales)


__all__ = ["Partitioned", "partition"]

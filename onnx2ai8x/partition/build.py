"""A float model split between the CPU and the accelerator, quantized from one
calibration (issue 28, item 1): the CPU segments' integer operators, the accelerator
parts' networks chained into one accelerator network (its ai8x-ONNX), and the integer
pipeline that runs them in order.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..devices import Device
from ..errors import EXIT_USAGE, Ai8xError
from ..frontend import QuantizeRequest
from .split import Split, find_split


@dataclass(frozen=True, eq=False)
class Chain:
    """The accelerator's parts (quantize.ptq.QuantResult each, in order) as the one
    network the accelerator runs: part j+1's first layer reads part j's last layer's
    output, which the CPU segment between them rewrites in place."""

    parts: tuple
    network: object  # the chained onnx2ai8x.network.Network
    model: object  # its ai8x-ONNX (onnxpb.ModelProto)
    last_layers: tuple[str, ...]  # per part but the last: the name of its last layer

    @property
    def mapping(self):
        return self.parts[0].mapping

    @property
    def output_scales(self):
        return self.parts[-1].output_scales

    def report_json(self) -> str:
        if len(self.parts) == 1:
            return self.parts[0].report_json()
        return json.dumps({"parts": [json.loads(p.report_json()) for p in self.parts]})

    def table(self) -> str:
        """Each part's quantization table (QuantResult.table), in order."""
        return "\n\n".join(p.table() for p in self.parts)


@dataclass(frozen=True, eq=False)
class Partitioned:
    """The CPU segments (onnx2ai8x.cpu.ops.Segment, or None / empty) around and between
    the accelerator's parts."""

    split: Split
    quant: Chain
    stem: object | None
    head: object | None
    between: tuple  # Segment per cut, run after the accelerator part before it
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
        out = _run(self.stem, q)
        return out.reshape(self.quant.network.input_shape)

    def run_accelerator(self, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """The accelerator's parts with the CPU segments between them: the last part's
        output, and each between segment's input (the accelerator's value there)."""
        import custom_ops

        seen = []
        for k, part in enumerate(self.quant.parts):
            session = custom_ops.session(part.model)
            name = session.get_inputs()[0].name
            x = np.asarray(session.run(None, {name: np.asarray(x, np.int8)[np.newaxis]})[0])[0]
            if k < len(self.between):
                seen.append(x)
                x = self.next_input(k, _run(self.between[k], x))
        return x, seen

    def next_input(self, k: int, y: np.ndarray) -> np.ndarray:
        """CPU segment k's output as accelerator part k+1's input (the segment ends in
        that part's channels-first order, `_between`; it may change the shape)."""
        return np.asarray(y).reshape(self.quant.parts[k + 1].mapping.shape)

    def run_head(self, acc_out: np.ndarray) -> np.ndarray:
        """The accelerator's output for one sample -> the model's output."""
        if self.head is None:
            return acc_out
        return _run(self.head, acc_out)


def _run(seg, x: np.ndarray) -> np.ndarray:
    from ..cpu.reference import run_segment

    first = seg.ops[0]
    x = np.asarray(x).reshape(first.in_shapes[0]).astype(np.int8)
    return run_segment(seg.ops, {seg.inputs[0]: x})[seg.outputs[0]]


def _try_parts(device: Device, request: QuantizeRequest, wide: bool):
    """Quantize and check each accelerator part; the last one's output is 32-bit when
    `wide` (the model's output, as an ordinary conversion gives it)."""
    from ..quantize import quantize_file

    def attempt(files):
        return [quantize_file(part, cal, method=request.method,
                              percentile=request.percentile, device=device, check=True,
                              wide_output=wide and k == len(files) - 1)
                for k, (part, cal) in enumerate(files)]

    return attempt


def partition(model: Path, device: Device, request: QuantizeRequest) -> Partitioned:
    """Split the float model at `model` where the accelerator refuses its layers and
    quantize every part from `request.calibration`."""
    from ..quantize import load_array

    if request.calibration is None:
        raise Ai8xError("usage.calibration", str(model),
                        "--cpu-fallback quantizes the CPU layers from calibration data",
                        "pass --calibration X.npy", exit_code=EXIT_USAGE)
    x = load_array(request.calibration, "calibration data")
    if x.dtype.kind not in "iuf":
        raise Ai8xError("usage.calibration", str(request.calibration),
                        f"the calibration data holds {x.dtype.name} values, not numbers",
                        "save float samples", exit_code=EXIT_USAGE)
    x = x.astype(np.float32)
    split = find_split(model, device, x, _try_parts(device, request, True))
    _check_start_layer(split, device)
    results = list(split.results)
    if split.head and results:  # the head reads the last part's 8-bit output
        results[-1] = _requantize_last(split, request, device, x)
    return _segments(split, _chain(split, results), x)


def _requantize_last(split: Split, request: QuantizeRequest, device: Device,
                     x: np.ndarray):
    import tempfile

    import onnx

    from .graphs import graph_input, run_float, submodel

    t_in, t_out = split.parts[-1]
    with tempfile.TemporaryDirectory(prefix="onnx2ai8x-part-") as tmp:
        path, cal = Path(tmp) / "last.onnx", Path(tmp) / "cal.npy"
        sub = submodel(split.model, [t_in], [t_out])
        sub.graph.name = split.model.graph.name
        onnx.save(sub, str(path))
        np.save(cal, x if t_in == graph_input(split.model) else
                run_float(split.model, x, t_in))
        return _try_parts(device, request, False)([(path, cal)])[0]


def _chain(split: Split, results: list) -> Chain:
    """The parts' networks as one: part j+1's layers after part j's, its reads of the
    input (-1) now reads of part j's last layer."""
    from custom_ops.builder import build_proto

    from ..network import output_layers, unique_name

    if len(results) == 1:
        r = results[0]
        return Chain(parts=(r,), network=r.network, model=r.model, last_layers=())
    for k in range(len(results) - 1):
        _check_junction(split, k, results[k].network, results[k + 1].network)
    layers, names, lasts = [], set(), []
    for k, r in enumerate(results):
        base = len(layers)
        for lay in r.network.layers:
            seq = None if lay.in_sequences is None else \
                tuple(s + base if s >= -1 else s for s in lay.in_sequences)
            name = unique_name(lay.name, names)
            names.add(name)
            layers.append(dataclasses.replace(lay, name=name, in_sequences=seq))
        if k < len(results) - 1:
            lasts.append(layers[-1].name)
    last = results[-1].network
    base = len(layers) - len(last.layers)
    outs = tuple(o + base for o in output_layers(last))
    first = results[0].network
    network = dataclasses.replace(first, layers=tuple(layers), outputs=outs)
    model = build_proto(network, doc=f"{network.name}: the accelerator's parts of a model "
                        "split by onnx2ai8x --cpu-fallback", outputs=list(outs),
                        avg_pool_rounding=True)
    meta = dict(results[0].mapping.metadata())
    for key in sorted(meta):
        p = model.metadata_props.add()
        p.key, p.value = key, meta[key]
    return Chain(parts=tuple(results), network=network, model=model,
                 last_layers=tuple(lasts))


def _check_start_layer(split: Split, device: Device) -> None:
    """A CPU segment between accelerator layers resumes the accelerator at the layer after
    it: a run that starts at a layer other than 0, which only a part with a start field in
    its layer-count register can do (seed 000: MAX78002 "supports starting a network at
    any pre-programmed layer"; on MAX78000 every run starts at layer 0, so the second run
    would compute the first layers again, over the CPU's result)."""
    if not split.between or device.max_start_layer > 0:
        return
    raise Ai8xError("partition.start-layer", split.between[0][0],
                    f"a CPU segment between accelerator layers needs a second accelerator "
                    f"run starting after it, and {device.name} starts every run at layer 0",
                    "convert for MAX78002 (--device MAX78002), which starts a run at any "
                    "layer, or change the model so that the layers between runs are ones "
                    "the accelerator runs")


def _check_junction(split: Split, k: int, before, after) -> None:
    """CPU segment k may change the tensor's shape (a rank lift, a reshape) where the
    accelerator's next run reads the same data-memory layout: the same channels and
    the same number of values per channel (HWC data is one word per pixel in pixel
    order, whatever the rank). A segment that changes how many values there are (an
    upsampling) or moves values between channels would need the next run's input
    placed anew, which the chained network does not do."""
    last = before.layers[-1]
    chans, pixels = last.output_channels, int(np.prod(last.output_dim))
    if last.flatten or last.operator.word == "linear":
        chans, pixels = chans * pixels, 1
    shape = tuple(after.input_shape)
    if (shape[0], int(np.prod(shape[1:]))) == (chans, pixels):
        return
    t_in, t_out = split.cuts[k]
    raise Ai8xError("partition.between-shape", split.between[k][0],
                    f"the CPU layers between accelerator layers turn {chans} channels of "
                    f"{pixels} values ({t_in}) into {shape[0]} channels of "
                    f"{int(np.prod(shape[1:]))} ({t_out}); the accelerator's next run reads "
                    "its input where the previous run wrote its output, so they must keep "
                    "the channels and the number of values per channel",
                    "keep the channel count and the values per channel across the CPU "
                    "layers between accelerator layers (a reshape or a 1-D/2-D relabel "
                    "is taken; an upsampling or a channel change there is not)")


def _to_part(name: str, ops: list, out: str, mapping, scales: dict):
    """A CPU segment's ops ending in the next accelerator part's input units and
    layout: where that part reads its input channels-last (its mapping's permutation,
    a tf2onnx model's Transpose) the segment's last op is that transpose, so the CPU
    writes its result in the order the accelerator reads (between runs: back over the
    words it read, one table for both); where the part offsets its input first (a
    Keras Normalization or BatchNorm's Add folded into its input mapping) the CPU adds
    that offset, per channel, writing the part's input scale. Returns (ops, output)."""
    from ..cpu.ops import transpose
    from .quantize_cpu import offset_op

    perm = tuple(mapping.perm)
    last = next(op for op in reversed(ops) if op.output == out)
    shape = last.out_shape
    if perm != tuple(range(len(perm))):
        ops.append(transpose(f"{name}_to_accelerator", out, f"{out}/accelerator", shape,
                             [p - 1 for p in perm[1:]]))
        out, shape = f"{out}/accelerator", ops[-1].out_shape
        scales[out] = scales[last.output]
    if any(mapping.offset):
        ops.append(offset_op(f"{name}_offset", out, f"{out}/offset", shape,
                             mapping.offset, scales[out], float(mapping.scale)))
        out = f"{out}/offset"
    return ops, out


def _segments(split: Split, chain: Chain, x: np.ndarray) -> Partitioned:
    from ..cpu.ops import segment
    from .graphs import graph_input
    from .quantize_cpu import calibrated_scales, segment_ops

    by_name = {n.name: n for n in split.model.graph.node}
    parts = chain.parts
    fixed = {}
    for k, (t_in, t_out) in enumerate(split.parts):
        if t_in != graph_input(split.model) and not any(parts[k].mapping.offset):
            fixed[t_in] = float(parts[k].mapping.scale)  # (else _to_part's offset op)
        if t_out != split.model.graph.output[0].name or split.head:
            fixed[t_out] = float(parts[k].output_scales[0])
    groups = (split.stem, *split.between, split.head)
    nodes = [by_name[n] for g in groups for n in g]
    scales = calibrated_scales(split.model, nodes, x, fixed)
    stem = head = None
    if split.stem:
        stem = segment("stem", *_outputs(_to_part(
            "stem", segment_ops(split.model, split.stem, scales), split.acc_input,
            parts[0].mapping, scales)))
    between = tuple(segment(f"between{k}", *_outputs(_to_part(
        f"between{k}", segment_ops(split.model, b, scales), split.cuts[k][1],
        parts[k + 1].mapping, scales))) for k, b in enumerate(split.between))
    if split.head:
        head = segment("head", segment_ops(split.model, split.head, scales))
    return Partitioned(split=split, quant=chain, stem=stem, head=head, between=between,
                       input_scale=scales[graph_input(split.model)], scales=scales)


def _outputs(found: tuple[list, str]) -> tuple[list, tuple[str]]:
    return found[0], (found[1],)


__all__ = ["Chain", "Partitioned", "partition"]

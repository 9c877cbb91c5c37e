"""Post-training quantization: a FloatModel + calibration data -> ai8x-ONNX.

Numerics (seed 000, "Data Format" / "Output Shift"; custom_ops/README.md): a layer reads
int8 codes q_x, accumulates sum(q_x * Wq) + bias_hw * 128, and writes
floor(0.5 + acc * 2**shift / 128) clamped to int8 (ReLU/Abs: to [0, 127]); a wide output
layer writes the 32-bit accumulator itself.

Every tensor gets a float scale s (float value ~ s * code) from its calibrated range R:
s = R / 127. ReLU and Abs are positively homogeneous (f(a x) = a f(x) for a > 0), so a
layer's float weights and bias can absorb any positive factor: with input scale s_x and
output scale s_y, the layer computes q_y = conv(q_x, W * s_x / s_y) + b / s_y, and the
power-of-two shift is chosen so that W * s_x / s_y * 128 / 2**shift uses the weight
range fully while the bias still fits the 8-bit bias memory. Tensors that the hardware
combines without a multiplier (element-wise operands, concatenated parts, a pooling
layer's input and output) share one scale.
"""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ..errors import EXIT_USAGE, Ai8xError
from ..network import ACT_ABS, ACT_RELU, Layer, Network
from .calibrate import DEFAULT_METHOD, DEFAULT_PERCENTILE, METHODS, tensor_range
from .mapping import KEY_OUTPUT_PERM, KEY_OUTPUT_SCALES, KEY_OUTPUT_SHAPE, InputMapping

SHIFT_MIN, SHIFT_MAX = -15, 15  # the final output shift (legalize rule output-shift)
WEIGHT_BITS = (1, 2, 4, 8)
BIAS_MIN, BIAS_MAX = -128, 127  # 8-bit bias memory (seed 000, "Bias")
_CHUNK = 256


@dataclass(frozen=True)
class QuantOptions:
    """How to quantize: calibration method, weight widths, wide output layer."""

    method: str = DEFAULT_METHOD
    percentile: float = DEFAULT_PERCENTILE
    weight_bits: Mapping[str, int] | None = None  # layer or node name -> bits; "default"
    weight_bits_at: Mapping[str, str] | None = None  # name -> `FILE:LINE` it is written at
    wide_output: bool = True


@dataclass(frozen=True)
class LayerReport:
    """One row of the quantization report."""

    index: int
    name: str
    operator: str
    nodes: tuple[str, ...]
    weight_bits: int
    output_shift: int
    output_width: int
    range: float
    clipped: float  # fraction of float values beyond the layer's int8 range
    sqnr_db: float | None


@dataclass(frozen=True, eq=False)
class QuantResult:
    """The quantized Network, its ai8x-ONNX model, the input mapping and the report."""

    network: Network
    mapping: InputMapping
    output_scales: tuple[float, ...]
    model: object  # onnx.ModelProto (ai8x-ONNX)
    layers: tuple[LayerReport, ...]
    summary: dict
    warnings: tuple[str, ...] = ()  # rendered: what the exporter dialects dropped

    def report_json(self) -> str:
        data = dict(self.summary)
        data["layers"] = [dict(vars(r), nodes=list(r.nodes)) for r in self.layers]
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    def table(self) -> str:
        head = ["#", "layer", "op", "wbits", "shift", "out", "range", "clipped %", "SQNR dB"]
        rows = [[str(r.index), r.name, r.operator, str(r.weight_bits) if r.weight_bits
                 else "-", str(r.output_shift), f"{r.output_width}b", f"{r.range:.4g}",
                 f"{100 * r.clipped:.3f}", "-" if r.sqnr_db is None else
                 ("inf" if math.isinf(r.sqnr_db) else f"{r.sqnr_db:.1f}")]
                for r in self.layers]
        widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) if i in (1, 2) else c.rjust(w)
                           for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
                 for row in [head, *rows]]
        s = self.summary
        x = "(x + offset)" if s.get("input_offset") else "x"
        lines.append(f"input: q = clip(floor({x} / {s['input_scale']:.6g} + 0.5), -128, 127)"
                     + (f", layout {s['input_perm']}" if s["input_perm"] != sorted(
                         s["input_perm"]) else "")
                     + (", offset per channel " + ", ".join(
                         f"{v:.6g}" for v in s["input_offset"]) if s.get("input_offset")
                        else ""))
        if s.get("exact"):
            lines.append(f"{s['source']} (no calibration needed)")
        elif not s["calibration_samples"]:
            lines.append(f"{s['source']} (no calibration data: ranges from its scales)")
        else:
            lines.append(f"calibration: {s['calibration_samples']:,} samples, method "
                         f"{s['method']}")
        if s.get("top1_agreement") is not None:
            lines.append(f"top-1 agreement float/quantized {100 * s['top1_agreement']:.2f} "
                         f"% on {s['calibration_samples']:,} samples")
        if s.get("top1_agreement_decided") is not None:
            lines.append(f"  {100 * s['top1_agreement_decided']:.2f} % on the "
                         f"{s['decided_samples']:,} samples the float model decides beyond "
                         "the output's quantization noise")
        if s.get("model_sqnr_db") is not None:
            lines.append(f"output SQNR {s['model_sqnr_db']:.1f} dB")
        if s.get("float_accuracy") is not None:
            lines.append(f"accuracy: float {100 * s['float_accuracy']:.2f} %, quantized "
                         f"{100 * s['quantized_accuracy']:.2f} %")
        for r in s["rewrites"]:
            lines.append(f"rewrite: {r}")
        for op in s["cpu_tail"]:
            lines.append(f"left to the CPU: {op} (the accelerator does not compute it; "
                         "--cpu-tail states the application applies it)")
        if s.get("qdq") and not s.get("exact"):
            lines.append("quantized model: weights taken from its DequantizeLinear nodes, "
                         "requantized to power-of-two shifts, activation ranges "
                         + ("re-calibrated" if s["calibration_samples"] else
                            "from the source's own scales"))
            if s.get("qdq_pow2"):
                lines.append("its scales are powers of two, but it is not the "
                             "accelerator's numbers: a bias off the 8-bit bias grid, "
                             "weights beyond 8 bits, a shift beyond -15..15, or operands "
                             "of one element-wise layer on different scales")
        return "\n".join(lines)


def _usage(where: str, message: str, hint: str) -> Ai8xError:
    return Ai8xError("usage.calibration", where, message, hint, exit_code=EXIT_USAGE)


def read_weight_bits(path) -> tuple[dict[str, int], dict[str, str]]:
    """The per-layer weight widths of a small YAML file (`layer_or_node: bits`, and
    optionally `default: bits`) and where each is written (`FILE:LINE`, for messages).
    A key given twice is refused (YAML would keep the last one without a word)."""
    from ..sidecar.parse import key_lines, load_yaml

    try:
        text = open(path, encoding="utf-8").read()
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8 text
        raise _usage(str(path), f"not a readable YAML file ({exc})",
                     "write lines like `conv1: 4`") from None
    where = {str(key): f"{path}:{line}" for (pos, key), line in key_lines(text).items()
             if pos is None}
    try:
        data = load_yaml(text, str(path)) if text.strip() else None
    except Ai8xError as exc:
        first = exc.diagnostics[0]
        if first.code != "sidecar.structure":  # the sidecar's own wording of "a mapping"
            raise _usage(first.where, first.message, first.hint) from None
        data = None
    if not isinstance(data, dict):
        raise _usage(str(path), "expected a mapping of layer names to weight bits",
                     "write lines like `conv1: 4` and optionally `default: 8`")
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int) or value not in WEIGHT_BITS:
            raise _usage(where.get(str(key), str(path)),
                         f"`{key}: {value!r}`: weight bits must be one of "
                         f"{', '.join(map(str, WEIGHT_BITS))}", "use 1, 2, 4 or 8 bits")
    return {str(k): int(v) for k, v in data.items()}, where


def load_weight_bits(path) -> dict[str, int]:
    """The per-layer weight widths of a weight-bits file (see read_weight_bits)."""
    return read_weight_bits(path)[0]


def _float_outputs(fm, x: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    """The float model's tensors `names` on `x`, run batched on onnxruntime."""
    import onnx
    import onnxruntime as ort

    model = onnx.load_from_string(fm.model_bytes)
    have = {o.name for o in model.graph.output}
    for n in names:
        if n not in have:
            model.graph.output.append(onnx.helper.make_tensor_value_info(
                n, onnx.TensorProto.FLOAT, None))
            have.add(n)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    parts: dict[str, list[np.ndarray]] = {n: [] for n in names}
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        for k in range(0, x.shape[0], _CHUNK):
            outs = sess.run(names, {fm.input_name: x[k:k + _CHUNK].astype(np.float32)})
            for n, o in zip(names, outs, strict=True):
                parts[n].append(np.asarray(o))
    except Exception as exc:  # noqa: BLE001 - onnxruntime's own kinds for a bad graph
        # The walk reads what it maps; onnxruntime checks the whole graph, so a model it
        # cannot run (an operand of the wrong shape, say) is refused here, by name.
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Ai8xError("float.onnxruntime", fm.network.name,
                        f"the float model does not run on onnxruntime: {text[:300]}",
                        "check the model with onnx.checker.check_model(model, "
                        "full_check=True) and re-export it") from None
    return {n: np.concatenate(v) for n, v in parts.items()}


def _layer_view(out: np.ndarray, info) -> np.ndarray:
    """A layer's output (batch first) as its float tensor holds it, flattened."""
    sh, sw = info.subsample
    if (sh, sw) != (1, 1):
        out = out[:, :, ::sh, ::sw] if out.ndim == 4 else out[:, :, ::sh]
    return out.reshape(out.shape[0], -1)


def _sources(i: int, lay: Layer) -> tuple[int, ...]:
    return tuple(lay.in_sequences) if lay.in_sequences is not None else (i - 1,)


def _check_weight_bits_names(fm, options: QuantOptions) -> None:
    """Every name in --weight-bits is a layer or an ONNX node of the model (or
    `default`): a misspelt name would otherwise leave that layer at the default width
    without a word. The message names the file and line of the name."""
    from ..sidecar.parse import closest

    table = options.weight_bits or {}
    known = sorted({lay.name for lay in fm.network.layers}
                   | {node for info in fm.layers for node in info.nodes})
    for key in table:
        if key == "default" or key in known:
            continue
        close = closest(key, ["default", *known])
        raise _usage((options.weight_bits_at or {}).get(key, "--weight-bits"),
                     f"no layer or node named `{key}` in the model",
                     (f"did you mean `{close}`? " if close else "")
                     + f"layers: {', '.join(lay.name for lay in fm.network.layers)}"
                     + " (and `default` for every other layer)")


def _bits_for(lay: Layer, info, options: QuantOptions) -> int:
    table = options.weight_bits or {}
    for key in (lay.name, *info.nodes):
        if key in table:
            return table[key]
    return table.get("default", 8)


def _quantize_layer(lay: Layer, s_x: float, s_y: float, bits: int, wide: bool
                    ) -> tuple[Layer, float]:
    """Integer weights, bias and shift of one layer; returns it and its output scale."""
    w = np.asarray(lay.weights, np.float64)
    b = np.asarray(lay.bias, np.float64)
    qmax = (1 << (bits - 1)) - 1 if bits > 1 else 1
    qmin = -qmax - 1 if bits > 1 else -1
    wmax = float(np.max(np.abs(w))) if w.size else 0.0
    has_bias = bool(np.any(b != 0))
    if wide:
        # 32-bit output: acc = sum(q_x * Wq) + bias_hw * 128, float ~ acc * s_x / c.
        c = qmax / wmax if wmax > 0 else 1.0
        bmax = float(np.max(np.abs(b))) if has_bias else 0.0
        if bmax > 0:
            c = min(c, BIAS_MAX * 128 * s_x / bmax)
        wq = np.clip(np.floor(w * c + 0.5), qmin, qmax).astype(np.int64)
        bias_hw = np.clip(np.floor(b * c / (s_x * 128) + 0.5), BIAS_MIN, BIAS_MAX) \
            .astype(np.int64) if has_bias else None
        new = replace(lay, weights=wq, bias_hw=bias_hw,
                      bias=None if bias_hw is None else bias_hw * 128, output_shift=0,
                      quantization=bits, output_width=32)
        return new, s_x / c
    m = s_x / s_y * 128.0  # weight factor before the shift
    need = []
    if wmax > 0:
        need.append(math.ceil(math.log2(wmax * m / qmax)))
    if has_bias:
        need.append(math.ceil(math.log2(float(np.max(np.abs(b))) / s_y / BIAS_MAX)))
    shift = max(need) if need else 0
    shift = min(max(shift, SHIFT_MIN), SHIFT_MAX)
    wq = np.clip(np.floor(w * m / 2.0 ** shift + 0.5), qmin, qmax).astype(np.int64)
    bias_hw = np.clip(np.floor(b / s_y / 2.0 ** shift + 0.5), BIAS_MIN, BIAS_MAX) \
        .astype(np.int64) if has_bias else None
    new = replace(lay, weights=wq, bias_hw=bias_hw,
                  bias=None if bias_hw is None else bias_hw * 128, output_shift=shift,
                  quantization=bits, output_width=8)
    return new, s_y


def _check_calibration(fm, x: np.ndarray, where: str) -> np.ndarray:
    model_shape = tuple(fm.input_model_shape)
    x = np.asarray(x)
    if x.dtype.kind not in "fiu":
        raise _usage(where, f"the calibration data has dtype {x.dtype}",
                     "store float32 samples")
    if x.ndim == len(model_shape):
        x = x[np.newaxis]
    if tuple(x.shape[1:]) != model_shape:
        raise _usage(where, f"calibration samples have shape {tuple(x.shape[1:])}, the "
                     f"model's input is {model_shape}",
                     "store N samples in the model's own input shape (N x input shape)")
    if not np.all(np.isfinite(x)):
        raise _usage(where, "the calibration data holds NaN or infinity",
                     "store finite float samples")
    if x.shape[0] == 0:
        raise _usage(where, "no calibration samples", "store at least one sample")
    return x.astype(np.float32)


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    noise = float(np.sum((ref - got) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def _grid_range(grid) -> float:
    """The range R (code 127 = R) of a source grid (scale, zero point, qmin, qmax): the
    larger side, so that an int8 grid with zero point 0 keeps its scale exactly."""
    s, z, lo, hi = grid
    return float(s) * max(hi - z, z - lo - 1)


def source_ranges(fm) -> tuple[float, list[float | None]] | None:
    """A quantized model's own ranges (dialects/qdq recorded each tensor's grid): the
    input's and, per layer, that of the tensor holding its value; None when the model
    has none, or a layer whose output scale matters (8-bit output) has none."""
    c = fm.canonical
    grids = c.fact("activation_quant") if c is not None else None
    if not grids or c.fact("input_quant") is None:
        return None
    ranges: list[float | None] = []
    outputs = set(fm.outputs)
    for i, (lay, info) in enumerate(zip(fm.network.layers, fm.layers, strict=True)):
        grid = grids.get(info.tensor) if info.tensor else None
        if grid is None and not lay.operator.passthrough and not (
                i in outputs and lay.activation is None):
            return None
        ranges.append(None if grid is None else _grid_range(grid))
    return _grid_range(c.fact("input_quant")), ranges


def _calibrated(fm, x: np.ndarray | None, views: list, options: QuantOptions
                ) -> tuple[list[Layer], float, list[float]]:
    """Layers quantized from calibrated ranges; the input scale; each layer's output
    scale."""
    from custom_ops.builder import output_layers

    net = fm.network
    x_hw = x
    # Ranges per scale group (the input is group fm.input_group).
    group_range: dict[int, float] = {}

    def merge(g: int, r: float) -> None:
        group_range[g] = max(group_range.get(g, 0.0), r)

    grids = source_ranges(fm) if x is None else None
    if grids is not None:
        # no calibration data: a quantized model's own grids are the ranges
        merge(fm.input_group, grids[0] * fm.input_gain)
    else:
        # The input is fed as the user's data: its full range is kept (no clipping).
        if fm.input_offset:
            x_hw = _mapping(fm, 1.0).values(x)
        merge(fm.input_group, tensor_range(x_hw * fm.input_gain, "max"))
    for i, info in enumerate(fm.layers):
        if grids is not None and grids[1][i] is not None:
            merge(fm.groups[i], grids[1][i])
            continue
        if views[i] is None:
            continue
        if info.clip_max is not None:
            merge(fm.groups[i], info.clip_max)
        else:
            merge(fm.groups[i], tensor_range(views[i], options.method, options.percentile))
    scale = {g: (r if r > 0 else 1.0) / 127.0 for g, r in group_range.items()}
    outputs = set(output_layers(net)) & set(fm.outputs)
    layers: list[Layer] = []
    out_scale: list[float] = []
    for i, lay in enumerate(net.layers):
        g = fm.groups[i]
        src = _sources(i, lay)[0]
        s_x = scale[fm.input_group] if src < 0 else out_scale[src]
        if lay.operator.passthrough:
            layers.append(lay)
            out_scale.append(s_x)
            continue
        bits = _bits_for(lay, fm.layers[i], options)
        wide = options.wide_output and i in outputs and lay.activation is None
        s_y = scale.get(g, s_x)
        new, s_out = _quantize_layer(lay, s_x, s_y, bits, wide)
        layers.append(new)
        out_scale.append(s_out)
    # q = x * gain / s: the model's own input scaling is part of the mapping
    return layers, scale[fm.input_group] / fm.input_gain, out_scale


def _mapping(fm, input_scale: float) -> InputMapping:
    return InputMapping(input_scale, tuple(fm.input_perm), tuple(fm.network.input_shape),
                        tuple(fm.input_offset))


def quantize(fm, calibration: np.ndarray | None, options: QuantOptions = QuantOptions(), *,
             labels: np.ndarray | None = None, where: str = "calibration",
             exact=None) -> QuantResult:
    """Quantize `fm` (onnx2ai8x.importer.float_onnx.FloatModel) with calibration data, or
    take `exact` (onnx2ai8x.quantize.exact.recover's integers) as they are; calibration
    data then only feeds the report."""
    from custom_ops.builder import build_proto

    if options.method not in METHODS:
        raise _usage(where, f"unknown calibration method {options.method!r}",
                     f"use one of {', '.join(METHODS)}")
    if not 0 < options.percentile <= 100:  # NaN too
        raise _usage(where, f"--percentile {options.percentile:g} is not a percentile",
                     "give a value above 0 and at most 100, e.g. 99.99")
    net = fm.network
    _check_weight_bits_names(fm, options)
    n = len(net.layers)
    x, floats, views = None, {}, [None] * n
    if calibration is not None:
        x = _check_calibration(fm, calibration, where)
        tensors = sorted({info.tensor for info in fm.layers if info.tensor} |
                         set(fm.output_tensors))
        floats = _float_outputs(fm, x, tensors)
        views = [_layer_view_float(floats[info.tensor], info) if info.tensor else None
                 for info in fm.layers]
    if exact is not None:
        layers, input_scale, units = exact
        layers, out_scale = list(layers), list(units)
    else:
        layers, input_scale, out_scale = _calibrated(fm, x, views, options)
    qnet = replace(net, layers=tuple(layers))
    mapping = _mapping(fm, input_scale)
    # A float average is closest to the rounded mean (the accelerator's
    # --avg-pool-rounding, seed 000 "Pooling"); an exact vendor export keeps the
    # hardware default its training used (truncation). The mode is one for the whole
    # network, and a Conv1d layer's average pooling truncates whatever it says (the
    # vendor's 1-D pooling, custom_ops.builder): with one, every layer truncates.
    rounding = exact is None and not any(
        lay.operator.one_d and lay.pool_average and tuple(lay.pool) != (1, 1)
        for lay in layers)
    out_idx = list(fm.outputs)
    output_scales = tuple(out_scale[i] for i in out_idx)
    q_outs = _quantized_outputs(qnet, mapping, x, rounding)
    reports = _layer_reports(fm, layers, views, q_outs, out_scale)
    summary = _summary(fm, x, floats, q_outs, options, exact, mapping, output_scales, labels)
    how = (("taken exactly from a quantized model" if fm.qdq else
            "recovered exactly from a vendor export") if exact is not None else
           "requantized from the quantized model's own scales" if x is None else
           f"{x.shape[0]} calibration samples, {options.method}")
    doc = (f"{net.name}: quantized by onnx2ai8x from float ONNX ({how}); input q = "
           f"clip(floor(x / {mapping.scale:.6g} + 0.5), -128, 127)")
    # The onnx package is not imported for this (0.2 s of start-up, issue 24's budget for
    # a recovered export); the message classes are the same, so onnx tools take it.
    model = build_proto(qnet, doc=doc, outputs=out_idx, avg_pool_rounding=rounding)
    if "onnx" in sys.modules:
        from custom_ops import onnx_support

        onnx_support()  # the checker and shape inference know the ai8x ops
    meta = dict(mapping.metadata())
    meta[KEY_OUTPUT_SCALES] = json.dumps([float(s) for s in output_scales])
    if fm.output_perm:  # the host applies the output's layout change (the front end)
        meta[KEY_OUTPUT_PERM] = json.dumps(list(fm.output_perm))
        meta[KEY_OUTPUT_SHAPE] = json.dumps(list(fm.output_shape))
    if net.device:
        meta["ai8x.device"] = net.device
    have = {p.key: p for p in model.metadata_props}
    for key in sorted(meta):
        if key in have:
            have[key].value = meta[key]
        else:
            p = model.metadata_props.add()
            p.key, p.value = key, meta[key]
    return QuantResult(network=qnet, mapping=mapping, output_scales=output_scales,
                       model=model, layers=tuple(reports), summary=summary)


def _quantized_outputs(qnet, mapping: InputMapping, x: np.ndarray | None,
                       rounding: bool) -> list[list[np.ndarray]]:
    """The quantized network's every layer output on the calibration samples (chunks
    per layer), for the SQNR and clipping columns; empty lists without samples."""
    import custom_ops
    from custom_ops.builder import build_model

    n = len(qnet.layers)
    q_outs: list[list[np.ndarray]] = [[] for _ in range(n)]
    if x is None:
        return q_outs
    q_in = mapping.quantize(x)
    sess = custom_ops.session(build_model(qnet, outputs=list(range(n)),
                                          avg_pool_rounding=rounding))
    name = sess.get_inputs()[0].name
    for k in range(0, q_in.shape[0], _CHUNK):
        for i, o in enumerate(sess.run(None, {name: q_in[k:k + _CHUNK]})):
            q_outs[i].append(np.asarray(o))
    return q_outs


def _layer_reports(fm, layers, views, q_outs, out_scale) -> list[LayerReport]:
    """Per layer: bits, shift, range, the share of float values clipped and the SQNR of
    the quantized output against the float one (where the layer has a float view)."""
    reports = []
    for i, lay in enumerate(layers):
        info = fm.layers[i]
        sq, clipped = None, 0.0
        if views[i] is not None:
            got = _layer_view(np.concatenate(q_outs[i]).astype(np.float64), info) \
                * out_scale[i]
            ref = views[i]
            if got.shape == ref.shape:
                sq = _sqnr(ref, got)
            if layers[i].output_width == 8:
                lo = 0.0 if lay.activation in (ACT_RELU, ACT_ABS) else -128 * out_scale[i]
                hi = 127 * out_scale[i]
                clipped = float(np.mean((ref > hi * (1 + 1e-6)) | (ref < lo * (1 + 1e-6))))
        reports.append(LayerReport(
            index=i, name=lay.name, operator=lay.operator.word, nodes=info.nodes,
            weight_bits=0 if lay.operator.passthrough else int(lay.quantization),
            output_shift=int(lay.output_shift), output_width=int(lay.output_width),
            range=float(127 * out_scale[i]) if lay.output_width == 8 else float(
                np.max(np.abs(views[i])) if views[i] is not None else 0.0),
            clipped=clipped, sqnr_db=sq))
    return reports


def _summary(fm, x, floats, q_outs, options: QuantOptions, exact, mapping: InputMapping,
             output_scales, labels) -> dict:
    """The report's model-level part: how the model was quantized and how the first
    output agrees with the float model's (and with the labels, when given)."""
    out_idx = list(fm.outputs)
    agree, model_sqnr, ref0, got0, decided = None, None, None, None, (None, 0)
    if x is not None:
        ref0 = floats[fm.output_tensors[0]].reshape(x.shape[0], -1)
        got0 = np.concatenate(q_outs[out_idx[0]]).reshape(x.shape[0], -1)
        if ref0.shape[1] > 1:
            agree = float(np.mean(np.argmax(ref0, 1) == np.argmax(got0, 1)))
        if ref0.shape == got0.shape:
            model_sqnr = _sqnr(ref0.astype(np.float64),
                               got0.astype(np.float64) * output_scales[0])
            if ref0.shape[1] > 1:
                decided = _decided_agreement(ref0, got0 * output_scales[0])
    source = (("quantized model, requantized to power-of-two shifts" if fm.qdq else
               "float ONNX, post-training quantization") if exact is None else
              "quantized model with power-of-two scales: its integers and shifts taken "
              "exactly (the accelerator rounds half up where the source rounds half to "
              "even)" if fm.qdq else
              "vendor export: integers, shifts and biases recovered exactly, hardware "
              "rounding restored")
    summary = {
        "source": source, "exact": exact is not None,
        "method": None if exact is not None else options.method,
        "percentile": options.percentile
        if options.method == "percentile" and exact is None else None,
        "calibration_samples": 0 if x is None else int(x.shape[0]),
        "input_scale": mapping.scale,
        "input_zero_point": 0, "input_perm": list(mapping.perm),
        "input_offset": list(mapping.offset),
        "output_scales": list(output_scales), "top1_agreement": agree,
        "top1_agreement_decided": decided[0], "decided_samples": decided[1],
        "rewrites": list(fm.rewrites), "cpu_tail": list(fm.cpu_tail), "qdq": fm.qdq,
        "qdq_pow2": bool(fm.canonical is not None and fm.canonical.fact("pow2")),
        "qdq_scales": None if not fm.qdq else "exact" if exact is not None else
        "re-calibrated" if x is not None else "the source's grids",
        "model_sqnr_db": model_sqnr,
        "float_accuracy": None, "quantized_accuracy": None,
    }
    if labels is not None and x is not None:
        y = np.asarray(labels).reshape(-1)
        if y.shape[0] != x.shape[0]:
            raise _usage("labels", f"{y.shape[0]} labels for {x.shape[0]} samples",
                         "give one label per calibration sample")
        summary["float_accuracy"] = float(np.mean(np.argmax(ref0, 1) == y))
        summary["quantized_accuracy"] = float(np.mean(np.argmax(got0, 1) == y))
    return summary


def _decided_agreement(ref: np.ndarray, got: np.ndarray) -> tuple[float | None, int]:
    """Top-1 agreement over the samples the float model decides beyond the output's
    quantization noise (its top-1 logit ahead of the second by more than twice the RMS
    error), and their count. A near-tie of the float model may flip under any
    quantization; a sample decided clearly should not (the silent-loss guard)."""
    ref = np.asarray(ref, np.float64)
    noise = float(np.sqrt(np.mean((ref - np.asarray(got, np.float64)) ** 2)))
    top2 = np.sort(ref, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2.0 * noise
    if not np.any(clear):
        return None, 0
    same = np.argmax(ref[clear], 1) == np.argmax(got[clear], 1)
    return float(np.mean(same)), int(np.sum(clear))


def _layer_view_float(values: np.ndarray, info) -> np.ndarray:
    return np.asarray(values, np.float64).reshape(values.shape[0], -1)


__all__ = ["LayerReport", "QuantOptions", "QuantResult", "load_weight_bits", "quantize",
           "read_weight_bits", "source_ranges"]

"""QONNX (Brevitas `export_qonnx`, the FINN ecosystem's form) -> QDQ.

A QONNX `Quant(x, scale, zeropt, bitwidth; signed, narrow, rounding_mode)` node
quantizes and dequantizes in one (the QONNX operator specification):

    q = clip(round(x / scale + zeropt), qmin, qmax),  y = (q - zeropt) * scale

with qmin, qmax the signed or unsigned `bitwidth`-bit range (narrow: the most negative
signed value, or the largest unsigned one, left out). That is exactly Brevitas' QCDQ
form, `QuantizeLinear` -> `Clip(qmin, qmax)` -> `DequantizeLinear` with an 8-bit
container, so each `Quant` is rewritten to it and the `qdq` dialect (which runs next)
takes the model from there: one meaning, one implementation. A `Quant` of a constant
(weights) is folded here to its integers, read through a `DequantizeLinear` so the
integers and scales stay visible.

Refused with the node's name: rounding other than round-to-nearest on activations
(`QuantizeLinear` rounds half to even), non-integer zero points, more than 8 bits on
activations, `BipolarQuant` and `Trunc` (quantized average pooling).
"""
from __future__ import annotations

import numpy as np

from ...errors import Ai8xError
from .base import Recognition

DIALECT = "qonnx"
OPS = frozenset(("Quant", "BipolarQuant", "Trunc"))
_ROUND = {"ROUND": np.rint, "ROUND_TO_ZERO": np.trunc, "CEIL": np.ceil, "FLOOR": np.floor}


def _fail(node, message: str, hint: str) -> Ai8xError:
    return Ai8xError("float.qonnx", f"node {node.name or node.output[0]} ({node.op_type})",
                     message, hint)


def _attrs(node) -> dict:
    import onnx

    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _range(bits: int, signed: bool, narrow: bool) -> tuple[int, int]:
    if signed:
        return -(1 << (bits - 1)) + (1 if narrow else 0), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1 - (1 if narrow else 0)


def _axis(scale: np.ndarray, ndim: int) -> tuple[np.ndarray, int]:
    """A broadcast scale as ONNX's 1-D per-axis form (size-1 scales stay scalars)."""
    if scale.size == 1:
        return scale.reshape(()), 1
    full = [1] * (ndim - scale.ndim) + list(scale.shape)
    axes = [k for k, n in enumerate(full) if n > 1]
    if len(axes) != 1:
        return None, 0
    return scale.reshape(-1), axes[0]


class _Rewriter:
    def __init__(self, model) -> None:
        from onnx import numpy_helper

        self.model = model
        self.consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        self.nodes: list = []
        self.count = {"weights": 0, "activations": 0}

    def init(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.model.graph.initializer.append(numpy_helper.from_array(value, name))
        self.consts[name] = value
        return name

    def run(self) -> None:
        for node in self.model.graph.node:
            if node.op_type not in OPS:
                self.nodes.append(node)
                if node.op_type == "Constant":
                    self._constant(node)
                continue
            if node.op_type != "Quant":
                raise _fail(node, f"QONNX {node.op_type} has no equivalent on the "
                            "accelerator", "quantize with Quant nodes of up to 8 bits and "
                            "use max pooling (Brevitas: QuantMaxPool / nn.MaxPool2d)")
            try:
                self.quant(node)
            except (ValueError, IndexError, TypeError, KeyError, OverflowError) as exc:
                raise _fail(node, "cannot read the quantization parameters "
                            f"({type(exc).__name__}: {str(exc)[:160]})",
                            "scale, zero point and bit width must be constants of "
                            "shapes that broadcast to the input") from None
        del self.model.graph.node[:]
        self.model.graph.node.extend(self.nodes)

    def _constant(self, node) -> None:
        from onnx import numpy_helper

        for a in node.attribute:
            if a.name == "value":
                self.consts[node.output[0]] = numpy_helper.to_array(a.t)

    def _params(self, node):
        names = list(node.input[1:4])
        if len(names) < 3 or any(n not in self.consts for n in names):
            raise _fail(node, "a Quant with computed scale, zero point or bit width",
                        "export the trained model (constant quantization parameters)")
        scale, zero, bits = (np.asarray(self.consts[n], np.float64) for n in names)
        if bits.size != 1 or float(bits) != int(bits) or not 1 <= int(bits) <= 32:
            raise _fail(node, f"bit width {bits.reshape(-1)[:4].tolist()}",
                        "quantize with an integer bit width of 1 to 32")
        if scale.size == 0 or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise _fail(node, "a scale that is empty, not finite or not positive",
                        "quantize with positive scales")
        if np.any(zero != np.round(zero)):
            raise _fail(node, "a non-integer zero point",
                        "quantize with integer zero points (Brevitas' defaults)")
        a = _attrs(node)
        lo, hi = _range(int(bits), bool(a.get("signed", 1)), bool(a.get("narrow", 0)))
        mode = a.get("rounding_mode", b"ROUND")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        return scale, zero, lo, hi, mode

    def quant(self, node) -> None:
        from onnx import helper

        scale, zero, lo, hi, mode = self._params(node)
        x, y, tag = node.input[0], node.output[0], f"{node.name or node.output[0]}__qonnx"
        container = np.int8 if lo < 0 else np.uint8
        if hi - lo > 255:
            container = np.int32 if lo < 0 or hi > 65535 else np.uint16
            if lo < 0 and hi <= 32767:
                container = np.int16
            if hi > (1 << 31) - 1:
                container = np.int64  # a 32-bit unsigned constant (folded here only)
        if x in self.consts:
            self.weight(node, scale, zero, lo, hi, mode, container)
            return
        if mode != "ROUND":
            raise _fail(node, f"activation rounding {mode}",
                        "quantize activations with rounding_mode ROUND")
        if scale.size != 1 or zero.size != 1:
            raise _fail(node, "per-channel activation scales",
                        "quantize activations per tensor")
        s = self.init(f"{tag}_scale", np.asarray(scale.reshape(()), np.float32))
        z = self.init(f"{tag}_zero", np.asarray(zero.reshape(()), container))
        q = f"{tag}_q"
        self.nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [q],
                                           name=node.name or tag))
        cmin, cmax = np.iinfo(container).min, np.iinfo(container).max
        if (lo, hi) != (cmin, cmax):
            c = f"{tag}_clip"
            self.nodes.append(helper.make_node(
                "Clip", [q, self.init(f"{tag}_min", np.asarray(lo, container)),
                         self.init(f"{tag}_max", np.asarray(hi, container))], [c],
                name=f"{tag}_clip"))
            q = c
        self.nodes.append(helper.make_node("DequantizeLinear", [q, s, z], [y],
                                           name=f"{tag}_dq"))
        self.count["activations"] += 1

    def weight(self, node, scale, zero, lo, hi, mode, container) -> None:
        from onnx import helper

        w = np.asarray(self.consts[node.input[0]], np.float64)
        if mode not in _ROUND:
            raise _fail(node, f"rounding mode {mode}", "use ROUND")
        q = np.clip(_ROUND[mode](w / scale + zero), lo, hi).astype(container)
        tag = f"{node.name or node.output[0]}__qonnx"
        s1, axis = _axis(scale, w.ndim)
        z1, _ = _axis(np.broadcast_to(zero, scale.shape), w.ndim)
        if s1 is None:
            raise _fail(node, f"a weight scale of shape {list(scale.shape)}",
                        "scale weights per tensor or per output channel")
        inputs = [self.init(f"{tag}_int", q),
                  self.init(f"{tag}_scale", np.asarray(s1, np.float32)),
                  self.init(f"{tag}_zero", np.asarray(z1, container))]
        self.nodes.append(helper.make_node("DequantizeLinear", inputs, [node.output[0]],
                                           name=f"{tag}_dq", axis=axis))
        self.count["weights"] += 1


def recognize(model) -> Recognition | None:
    """The QCDQ form of a QONNX model, or None for a model without QONNX nodes."""
    import onnx

    if not any(n.op_type in OPS and n.domain not in ("", "ai.onnx")
               for n in model.graph.node):
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rw = _Rewriter(out)
    rw.run()
    domains = {n.domain for n in out.graph.node}
    kept = [o for o in out.opset_import if o.domain in domains | {"", "ai.onnx"}]
    del out.opset_import[:]
    out.opset_import.extend(kept)
    c = rw.count
    return Recognition(model=out, dialect=DIALECT, rewrites=(
        f"{c['activations']} activation Quant node(s) = QuantizeLinear -> Clip -> "
        f"DequantizeLinear, {c['weights']} weight Quant node(s) folded to integers read "
        "through DequantizeLinear",))


__all__ = ["DIALECT", "OPS", "recognize"]

"""Where a full sidecar contradicts the model it places (warnings, not errors).

With `--sidecar`, the sidecar fixes where each layer runs, and the ONNX model says what
it computes: `resolve_placement` places the model's layers, so a computation key of the
sidecar that disagrees with the model is not used. The vendor's tool has no model and
computes what the sidecar says, so such a disagreement means the project's known answer
is not the one the vendor's tool writes for the same sidecar. The vendor's own
ai85-autoencoder.yaml has one: `activate: ReLU` on a layer whose model layer is a plain
Linear. Each contradiction is one warning naming the layer, both values, and that the
model is followed.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import MAX_MESSAGE, MAX_WHERE, Diagnostic, clip
from ..network import (
    ACTIVATION_NAMES,
    ELTWISE_NAMES,
    ELTWISE_NONE,
    OPERATOR_NAMES,
    Layer,
    Network,
)
from .model import Sidecar, SidecarLayer
from .resolve import pools_in_two_d


@dataclass(frozen=True)
class SidecarWarning:
    """One contradiction between the sidecar and the model (bounded in length)."""

    code: str
    where: str
    message: str
    hint: str
    key: str = ""  # the sidecar key it is about (for the line, convert._place)

    def render(self) -> str:
        return (f"warning[{self.code}] {clip(self.where, MAX_WHERE)}: "
                f"{clip(self.message, MAX_MESSAGE)}\n  hint: {clip(self.hint, MAX_MESSAGE)}")


def _activation_text(activation: int | None) -> str:
    name = ACTIVATION_NAMES.get(activation)
    return "no activation" if name is None else name


def _pair_text(pair: tuple[int, int]) -> str:
    return str(pair[0]) if pair[0] == pair[1] else f"[{pair[0]}, {pair[1]}]"


def _op_text(op: int) -> str:
    return OPERATOR_NAMES.get(op, str(op))


def _bits_text(bits: int | None) -> str:
    return "binary" if bits == -1 else f"{bits}-bit"


def _pool_read(pair: tuple[int, int], both: bool) -> tuple[int, int]:
    """A pool size or stride as the hardware uses it: POOLx1 where the layer pools in
    one dimension only."""
    return tuple(pair) if both else (pair[0], 1)


# Fields that fix the layer's geometry: the sidecar's processors and offsets were chosen
# for the sidecar's dimensions, so a contradiction cannot be resolved by following the
# model; it is an error. (field, sidecar value, model value, text of a value)
def _geometry(entry: SidecarLayer, layer: Layer) -> list[tuple[str, object, object, Callable]]:
    out: list[tuple[str, object, object, Callable]] = [
        ("operation", int(entry.operator), int(layer.operator), _op_text)]
    if entry.operator != layer.operator:
        return out
    conv = layer.operator.convolution
    if conv:
        k_side = entry.kernel_size if not layer.operator.one_d else entry.kernel_size[:1]
        k_model = layer.kernel_size if not layer.operator.one_d else layer.kernel_size[:1]
        out += [("kernel_size", tuple(k_side), tuple(k_model),
                 lambda k: "x".join(map(str, k))),
                ("pad", entry.padding[0], layer.padding[0], str),
                ("dilation", entry.dilation[0], layer.dilation[0], str),
                ("groups", entry.conv_groups, layer.conv_groups, str)]
    # on 1-D data the second pool number is not read (resolve.pools_in_two_d), so a
    # sidecar's `max_pool: 2` there is the model's 2x1
    both = pools_in_two_d(layer.operator, layer.input_dim)
    out += [("pool size", _pool_read(entry.pool, both), _pool_read(layer.pool, both),
             _pair_text),
            ("flatten", entry.flatten, layer.flatten, lambda v: str(v).lower()),
            ("eltwise", entry.eltwise, layer.eltwise, lambda v: ELTWISE_NAMES.get(v, str(v)))]
    if tuple(layer.pool) != (1, 1):
        out.append(("pool_stride", _pool_read(entry.pool_stride, both),
                    _pool_read(layer.pool_stride, both), _pair_text))
    if layer.eltwise != ELTWISE_NONE:
        out.append(("operands", entry.operands, layer.operands, str))
    return out


# Fields the model decides and onnx2ai8x follows (warnings).
def _computation(entry: SidecarLayer, layer: Layer) -> list[tuple[str, object, object, Callable]]:
    out: list[tuple[str, object, object, Callable]] = []
    if entry.pooling and tuple(layer.pool) != (1, 1):
        out.append(("pooling kind", "avg_pool" if entry.pool_average else "max_pool",
                    "avg_pool" if layer.pool_average else "max_pool", str))
    out.append(("output_width", entry.output_width, layer.output_width, str))
    if layer.weights is not None and layer.operator.has_weights:
        bits = layer.quantization or 8
        if entry.quantization is not None:
            out.append(("quantization", entry.quantization, bits, _bits_text))
        if entry.output_shift is not None:
            # the sidecar's shift excludes the implicit 8 - |bits| (seed 004, output_shift)
            out.append(("output_shift", entry.output_shift,
                        layer.output_shift - (8 - abs(bits)), str))
    return out


def geometry_contradictions(sidecar: Sidecar, network: Network) -> list[Diagnostic]:
    """Errors: a full sidecar's layer whose geometry (operation, kernel, padding, pooling
    size and stride, flatten, element-wise operation) is not the model's layer's, at that
    layer and key, before anything derived from the sidecar's dimensions goes wrong
    further on. Only when the sidecar has one entry per model layer (resolve_placement
    says so otherwise: entries are matched by position)."""
    if len(sidecar.layers) != len(network.layers):
        return []
    found = []
    for index, (entry, layer) in enumerate(zip(sidecar.layers, network.layers,
                                               strict=False)):
        for field, said, model, text in _geometry(entry, layer):
            if said == model:
                continue
            key = {"pool size": "max_pool" if not entry.pool_average else "avg_pool",
                   "operation": "op"}.get(field, field)
            found.append(Diagnostic(
                "sidecar.contradicts-model", sidecar.where(index, key),
                f"the sidecar gives layer {index} {field} {text(said)}, but the model's layer "
                f"`{layer.name}` ({_op_text(layer.operator)}) has {field} {text(model)}; the "
                "sidecar's processors and offsets are chosen for its own dimensions, so the "
                "model cannot be followed with them",
                f"set it to {text(model)} (the model's value), or write the sidecar anew with "
                "`onnx2ai8x sidecar MODEL.onnx -o FILE`", key=key))
    return found


def model_contradictions(sidecar: Sidecar, network: Network) -> tuple[SidecarWarning, ...]:
    """Layers whose sidecar entry states another activation, pooling kind, output width,
    weight bits or output shift than the model's layer (onnx2ai8x follows the model).

    The sidecar's entries are the model's hardware layers in order (resolve_placement
    requires one per layer). An entry without `activate` states no activation, as the
    vendor's tool reads it; an entry without `quantization` or `output_shift` takes the
    model's (the vendor reads them from the checkpoint).
    """
    found = []
    for index, (entry, layer) in enumerate(zip(sidecar.layers, network.layers,
                                               strict=False)):
        if entry.activation != layer.activation:
            found.append(_activation_warning(sidecar, index, entry, layer))
        for field, said, model, text in _computation(entry, layer):
            if said == model:
                continue
            key = {"pooling kind": "avg_pool" if entry.pool_average else "max_pool"}.get(
                field, field)
            found.append(SidecarWarning(
                "sidecar.contradicts-model", sidecar.where(index, key),
                f"the sidecar gives layer {index} {field} {text(said)}, but the model's "
                f"layer `{layer.name}` ({_op_text(layer.operator)}) has {text(model)}; "
                f"onnx2ai8x follows the model (the vendor's tool, which reads only the "
                f"sidecar, would use {text(said)})",
                f"make them agree: set `{key}` to the model's value, or change the model",
                key))
    return tuple(found)


def _activation_warning(sidecar: Sidecar, index: int, entry: SidecarLayer,
                        layer: Layer) -> SidecarWarning:
    said = (f"`activate: {ACTIVATION_NAMES[entry.activation]}`"
            if entry.activation is not None else "no activation")
    return SidecarWarning(
        "sidecar.contradicts-model", sidecar.where(index, "activate"),
        f"the sidecar gives layer {index} {said}, but the model's layer "
        f"`{layer.name}` ({OPERATOR_NAMES.get(layer.operator, '?')}) applies "
        f"{_activation_text(layer.activation)}; onnx2ai8x follows the model (the "
        f"vendor's tool, which reads only the sidecar, would apply "
        f"{_activation_text(entry.activation)})",
        "make them agree: change `activate` in the sidecar (or the model's "
        "activation) so both describe the network you trained", "activate")

"""Standard float ONNX -> a Network with float weights (issue 13, the float front end).

Any exporter's float32 graph (torch.onnx.export both ways, tf2onnx's NHWC graphs,
onnxruntime QDQ models) is simplified with onnxsim at batch 1, rewritten into the
canonical form by the exporter dialects (`dialects/`), then walked once in topological
order. Nodes are grouped into hardware layers by pattern, as the hardware
executes a layer (seed 000, "CNN Accelerator" layer pipeline: pooling -> element-wise ->
convolution -> output shift -> activation):

    [pooling] -> Conv / ConvTranspose / Gemm / MatMul [+ Add bias] -> [BatchNormalization,
    Mul/Add by per-channel constants, all folded] -> [Relu | Clip(min=0) | Abs]

Element-wise Add/Sub of two activations, channel Concat, Flatten/Reshape before a dense
layer, and pooling are kept as pending values so that the layer consuming them absorbs
them (an element-wise operation or a pooling in front of a convolution is part of that
layer); otherwise they become pass-through layers. A final Softmax / LogSoftmax /
Sigmoid is left to the CPU (the quantizer refuses it unless the user states that
something applies it: quantize.check_tail). Everything else is refused with the node's
name and a fix.

The result (`FloatModel`) is an ordinary `Network` whose weights and biases are still
float, plus, per layer, the float tensor that holds its value, so calibration can run the
simplified float model on onnxruntime and read each layer's float output.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import onnxpb
from ..errors import EXIT_USAGE, Ai8xError
from ..network import (
    ACT_ABS,
    ACT_RELU,
    ELTWISE_ADD,
    ELTWISE_SUB,
    Layer,
    Network,
    Op,
    unique_name,
)
from .dialects import Canonical, canonicalize, explained, folds_itself, handled_ops
from .onnx_nodes import CONST_OPS, data_input, node_attr

OPSET_MIN, OPSET_MAX = 11, 21
# Ops of an output's layout change, which the host does (after the last layer).
_OUTPUT_LAYOUT = ("Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity")
# Ops that only pass values through at inference time.
_ALIASES = ("Identity", "Dropout")
# Ops the CPU finishes with after the accelerator (`--softmax` writes softmax.c).
_CPU_TAIL = ("Softmax", "LogSoftmax", "Sigmoid")
# Fix hints for operators people commonly meet (the rest get a generic hint).
_HINTS = {
    "LeakyRelu": "use ReLU: the accelerator's activations are ReLU and Abs only",
    "PRelu": "use ReLU: the accelerator's activations are ReLU and Abs only",
    "Elu": "use ReLU: the accelerator's activations are ReLU and Abs only",
    "Selu": "use ReLU: the accelerator's activations are ReLU and Abs only",
    "HardSigmoid": "use ReLU: the accelerator's activations are ReLU and Abs only",
    "HardSwish": "use ReLU: the accelerator's activations are ReLU and Abs only",
    "Tanh": "use ReLU: the accelerator's activations are ReLU and Abs only",
    "Sigmoid": "Sigmoid is only supported as the model's final operation (left to the "
               "CPU); use ReLU inside the network",
    "Softmax": "Softmax is only supported as the model's final operation",
    "LogSoftmax": "LogSoftmax is only supported as the model's final operation",
    "Mul": "multiply activations only by per-channel constants right after a "
           "convolution or dense layer (folded into its weights)",
    "Div": "divide only by constants right after a convolution or dense layer",
    "Upsample": "Upsample left opset 10: export the model again (torch and tf2onnx "
                "write Resize, from which nearest 2x upsampling converts)",
    "LSTM": "the accelerator runs feed-forward convolutional networks only",
    "GRU": "the accelerator runs feed-forward convolutional networks only",
    "Split": "split channels with separate convolutions instead",
    "Slice": "the accelerator cannot crop tensors; remove the slice",
    "Pad": "use the convolution's own padding (0 to 2)",
    "InstanceNormalization": "use BatchNormalization after a convolution (folded into it)",
    "LayerNormalization": "use BatchNormalization after a convolution (folded into it)",
}


def _to_array(tensor) -> np.ndarray:
    """A tensor's values: onnxpb's reader for the numeric types, onnx's for the rest
    (strings, bfloat16, ...; importing onnx only then)."""
    try:
        return onnxpb.to_array(tensor)
    except ValueError:
        from onnx import numpy_helper

        return numpy_helper.to_array(tensor)


@dataclass(frozen=True)
class FloatLayer:
    """Where a hardware layer's value lives in the float model."""

    tensor: str | None  # float tensor equal to the layer's output (subsampled), or None
    subsample: tuple[int, int] = (1, 1)  # layer output [:, ::sh, ::sw] equals `tensor`
    clip_max: float | None = None  # Clip(0, max): the activation's fixed upper bound
    nodes: tuple[str, ...] = ()  # the source nodes grouped into this layer


@dataclass(frozen=True, eq=False)
class FloatModel:
    """A standard float ONNX model as hardware layers with float weights."""

    network: Network  # weights/bias are float arrays; bias_hw is None
    layers: tuple[FloatLayer, ...]
    outputs: tuple[int, ...]  # the layers giving the model's outputs, in order
    groups: tuple[int, ...]  # per layer: its activation-scale group (input: groups[-1])
    input_group: int
    input_name: str
    input_perm: tuple[int, ...]  # hardware input (N, C, H, W) = model input.transpose(perm)
    input_model_shape: tuple[int, ...]  # per sample, as the float model takes it
    model_bytes: bytes  # the simplified float model, batch dimension symbolic
    output_tensors: tuple[str, ...]  # the float model's outputs the layers correspond to
    rewrites: tuple[str, ...] = ()
    cpu_tail: tuple[str, ...] = ()
    # the output's layout change left to the host (a channels-last model's Transpose of
    # its one output): the axes, batch first, that take the accelerator's (N, C, ...) to
    # the model's output; empty: none
    output_perm: tuple[int, ...] = ()
    # ... applied to the accelerator's output read in this shape per sample (the float
    # tensor before the Transpose; the accelerator may hold it with a size-1 axis more)
    output_shape: tuple[int, ...] = ()
    qdq: bool = False
    input_gain: float = 1.0  # the model multiplies its input by this first
    # ... after adding this per channel (canonical layout; empty: none)
    input_offset: tuple[float, ...] = ()
    # the exporter dialects recognized and rewritten before the walk (dialects/)
    canonical: Canonical | None = None


def _fail(code: str, where: str, message: str, hint: str) -> Ai8xError:
    return Ai8xError(f"float.{code}", where, message, hint)


# -- values the walk tracks per tensor ------------------------------------------------

@dataclass
class _Act:
    """A tensor the accelerator holds: the output of layer `src` (-1: the input)."""

    src: int
    shape: tuple[int, ...]  # per sample, canonical: (C, H, W), (C, L) or (F,)


@dataclass
class _Pool:
    """A pooling not yet written: the next layer's pooling, or a pass-through layer."""

    inner: object  # _Act or _Elt
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    average: bool
    shape: tuple[int, ...]
    node: str
    tensor: str
    vector: bool = False  # ReduceMean without keepdims: (C,) out


@dataclass
class _Elt:
    """An element-wise Add/Sub not yet written: fused into the next convolution, or a
    pass-through layer."""

    kind: int
    operands: list  # of _Act
    shape: tuple[int, ...]
    node: str
    tensor: str
    pool: _Pool | None = None  # operands pooled alike before combining


@dataclass
class _Cat:
    """A channel concatenation: the next layer reads its parts (in_sequences)."""

    parts: list  # of _Act
    shape: tuple[int, ...]
    node: str
    tensor: str


@dataclass
class _Gain:
    """A value scaled per channel, then offset per channel (the division of an input
    normalization; a BatchNormalization that follows no convolution): the convolutions
    that read it take the factors into their weights along their input channels, the
    offsets into their bias."""

    inner: object  # the model input, or a pending value (a pooling) or layer output
    gain: np.ndarray  # (C,)
    node: str  # where the scaling is made: "node NAME (OP)"
    shift: np.ndarray | None = None  # (C,), added after the gain
    batchnorm: bool = False  # made by a BatchNormalization (its refusal's words)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.inner.shape


@dataclass
class _Flat:
    """Flattened data: only a dense layer reads it (flatten: true)."""

    inner: _Act
    node: str


@dataclass
class _Draft:
    """A convolution/dense layer still absorbing bias, BatchNorm and activation."""

    fields: dict
    weights: np.ndarray
    bias: np.ndarray
    out_axis: int  # the weights' output-channel axis (1 for ConvTranspose)
    shape: tuple[int, ...]
    tensor: str
    nodes: list
    subsample: tuple[int, int] = (1, 1)
    clip_max: float | None = None
    done: bool = False  # an activation ends the layer
    vector: bool = False  # a dense layer's (F,) output
    same_scale: bool = False  # an identity layer: output codes equal input codes


def _pair(values, nd: int, default: int) -> tuple[int, int]:
    if values is None:
        return (default, 1) if nd == 1 else (default, default)
    vals = [int(v) for v in values]
    return (vals[0], 1) if nd == 1 else (vals[0], vals[1])


@dataclass(frozen=True)
class _NodeRef:
    """A node name where a layer is made for a value rather than for a node."""

    name: str

    @property
    def output(self) -> list[str]:
        return [self.name]

    @property
    def op_type(self) -> str:
        return "MaxPool"


def _ints(values) -> str:
    """A shape for a message, (8, 8, 1): plain integers, no numpy reprs."""
    return "(" + ", ".join(str(int(v)) for v in np.asarray(values).reshape(-1)) + ")"


def _layer_name(node) -> str:
    """A readable layer name from an exporter's node name: `/features/features.0/Conv`
    (TorchScript) -> `features.0`; names without a path are kept."""
    name = node.name or node.output[0]
    parts = [p for p in name.split("/") if p]
    if len(parts) > 1 and parts[-1].split("_")[0] == node.op_type:
        parts = parts[:-1]
    return parts[-1] if parts else name


def _dims(shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) == 3:
        return int(shape[1]), int(shape[2])
    if len(shape) == 2:
        return int(shape[1]), 1
    return 1, 1


def _squeezed(node, shape: tuple[int, ...], const) -> tuple[int, ...]:
    """The shape (with the batch) after a Squeeze or Unsqueeze node."""
    axes = node_attr(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = const(node.input[1])
    axes = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    if node.op_type == "Squeeze":
        drop = {a % len(shape) for a in axes} if axes else \
            {k for k, d in enumerate(shape) if d == 1}
        return tuple(d for k, d in enumerate(shape) if k not in drop)
    out = list(shape)
    rank = len(shape) + len(axes)
    for a in sorted(a % rank for a in axes):
        out.insert(a, 1)
    return tuple(out)


def _auto_pads(auto: str, spatial, kernel, strides, dil, transpose: bool):
    """Explicit pads (before..., after...) of a convolution's auto_pad on known sizes
    (ONNX: SAME pads the total so that out = ceil(in / stride), the odd one after for
    SAME_UPPER, before for SAME_LOWER); None for a transposed one's SAME."""
    nd = len(kernel)
    if auto == "VALID":
        return [0] * (2 * nd)
    if transpose or auto not in ("SAME_UPPER", "SAME_LOWER"):
        return None
    before, after = [], []
    for a in range(nd):
        n, s, k = int(spatial[a]), int(strides[a]), int(kernel[a])
        total = max((-(-n // s) - 1) * s + (k - 1) * int(dil[a]) + 1 - n, 0)
        small, big = total // 2, total - total // 2
        before.append(small if auto == "SAME_UPPER" else big)
        after.append(big if auto == "SAME_UPPER" else small)
    return before + after


def _moved_axis(op: str, shape: tuple[int, ...], rest: tuple[int, ...]) -> str:
    """What a reshape the accelerator cannot do moves: the channel axis, named."""
    src, dst = (1, *shape), (1, *rest)
    from .dialects.axes import pairing

    r = pairing(src, dst)
    text = f"{op} {_ints(src)} -> {_ints(dst)}"
    if r is None:
        return f"{text} mixes axes: values move between channels and positions"
    where = [k for k, s in enumerate(r.axis) if s == 1]
    if not where:
        return f"{text} drops the channel axis (axis 1, {shape[0]} channel)"
    return (f"{text} moves the {shape[0]} channels (axis 1) to axis {where[0]}: the "
            "accelerator keeps each channel on its own processor, and this makes them "
            "positions")


def _input_gain_folded(w: np.ndarray, gain: np.ndarray, groups: int,
                       transpose: bool) -> np.ndarray:
    """Convolution weights that read the input multiplied by `gain` per input channel:
    each weight scaled by the gain of the input channel it reads."""
    w = np.asarray(w, np.float64)
    tail = (1,) * (w.ndim - 2)
    if transpose:  # (in, out / groups, k...)
        return w * gain.reshape(-1, 1, *tail)
    idx = _input_channels(w, groups)
    return w * gain[idx].reshape(*idx.shape, *tail)


def _input_channels(w: np.ndarray, groups: int) -> np.ndarray:
    """For (out, in / groups, k...) weights: the input channel each [out, j] reads."""
    cin_g = w.shape[1]
    per = w.shape[0] // max(groups, 1)  # output channels per group
    return (np.arange(w.shape[0])[:, None] // per) * cin_g + np.arange(cin_g)[None, :]


def _pools(value) -> bool:
    """A pending value the consuming layer would pool (or subsample) on its way in."""
    return isinstance(value, _Pool) or (isinstance(value, _Elt) and value.pool is not None)


class _Walker:
    """One walk over the simplified graph; builds the layer list (no shared state)."""

    def __init__(self, model, device: str | None) -> None:
        self.model = model
        self.device = device
        graph = model.graph
        self.consts: dict[str, np.ndarray] = {}
        for init in graph.initializer:
            self.consts[init.name] = _to_array(init)
        self.values: dict[str, object] = {}
        self.uses: dict[str, int] = {}
        for node in graph.node:
            for name in node.input:
                if name:
                    self.uses[name] = self.uses.get(name, 0) + 1
        for out in graph.output:
            self.uses[out.name] = self.uses.get(out.name, 0) + 1
        # Tensors an element-wise Add/Sub reads that other nodes read too: each gets a
        # pass-through copy right after it is written, and the element-wise layer reads
        # the copy (an element-wise operand is written interleaved with the other
        # operands, so it cannot also be read directly; the vendor's residual networks
        # copy it the same way, seed 004 "Residual Connections").
        self.shared = {name for node in graph.node if node.op_type in ("Add", "Sub")
                       for name in node.input[:2]
                       if name and name not in self.consts and self.uses.get(name, 0) > 1}
        self.copies: dict[str, _Act] = {}
        self.input_gain = 1.0  # the model scales its input by this before any layer
        self.input_offset: np.ndarray | None = None  # ... after adding this per channel
        self.layers: list[Layer] = []
        self.infos: list[FloatLayer] = []
        self.parent: dict[int, int] = {}  # union-find over scale groups (-1: input)
        self.rewrites: list[str] = []
        self.cpu_tail: list[str] = []
        self.output_perm: tuple[int, ...] = ()
        self.output_shape: tuple[int, ...] = ()
        self.names: set[str] = set()
        self.materialized: dict[int, _Act] = {}
        # every value keyed by id() in `materialized`, kept alive: a freed value's id is
        # reused by a new one, which would then read another value's layer
        self.keyed: list = []
        self.reshapes: dict[str, tuple[int, ...]] = {}  # Reshape output: per-sample shape

    # -- scale groups ------------------------------------------------------------------
    def find(self, i: int) -> int:
        while self.parent.get(i, i) != i:
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    # -- layers ------------------------------------------------------------------------
    def unique(self, name: str) -> str:
        base = "".join(c if c.isalnum() or c in "._-" else "_" for c in name).strip("_")
        base = base or f"layer{len(self.layers)}"
        name = unique_name(base, self.names)
        self.names.add(name)
        return name

    def seq(self, sources: tuple[int, ...]) -> tuple[int, ...] | None:
        return None if sources == (len(self.layers) - 1,) else sources

    def append(self, lay: Layer, info: FloatLayer, shape: tuple[int, ...]) -> _Act:
        self.layers.append(lay)
        self.infos.append(info)
        return _Act(len(self.layers) - 1, shape)

    def act(self, value, where: str) -> _Act:
        """The value as a tensor the accelerator holds, writing a layer if needed."""
        value = self.subsampled(value)
        key = id(value)
        if key in self.materialized:
            return self.materialized[key]
        if isinstance(value, _Act):
            return value
        if isinstance(value, _Draft):
            out = self.finish(value)
        elif isinstance(value, (_Pool, _Elt, _Cat)):
            out = self.passthrough(value)
        elif isinstance(value, _Gain):
            if value.batchnorm:
                raise _fail("batchnorm", value.node, "BatchNormalization that neither "
                            "follows a convolution or dense layer nor is read by one "
                            f"(it cannot be folded; read by {where})",
                            "place BatchNormalization right after a Conv / Linear, "
                            "before the activation")
            raise _fail("input-gain", value.node, "a per-channel scaling read by "
                        f"something other than a convolution ({where})",
                        "let a convolution read the scaled data first (its weights take "
                        "the factors)")
        elif isinstance(value, _Flat):
            raise _fail("flatten", where, "a flattened tensor feeds something other than "
                        "a dense layer (Gemm / MatMul)",
                        "flatten only right before the dense layer")
        else:
            raise _fail("value", where, "a constant or shape value where the accelerator "
                        "needs data", "compute constants outside the model")
        self.materialized[key] = out
        self.keyed.append(value)
        return out

    def subsampled(self, value):
        """A strided convolution's value: its stride-1 layer, then a 1x1 pooling with the
        stride, which the consumer (or a pass-through layer) does (seed 000, "Pooling":
        the pooling unit subsamples with a 1x1 window and a stride)."""
        if not isinstance(value, _Draft) or value.subsample == (1, 1):
            return value
        key = ("sub", id(value))
        if key not in self.materialized:
            self.keyed.append(value)
            res = self.finish(value)
            nd = len(res.shape) - 1
            shape = (res.shape[0], *[(n - 1) // s + 1 for n, s in
                                    zip(res.shape[1:], value.subsample[:nd], strict=True)])
            self.materialized[key] = _Pool(res, (1, 1), value.subsample, (1, 1), False,
                                           shape, value.nodes[0] + "_subsample",
                                           value.tensor)
        return self.materialized[key]

    def finish(self, d: _Draft) -> _Act:
        f = dict(d.fields)
        f["name"] = self.unique(f["name"])
        # in_sequences relative to the layers written by now (the draft was pending)
        sources = f.pop("sources")
        f["in_sequences"] = self.seq(sources)
        lay = Layer(weights=d.weights, bias=d.bias, **f)
        out = self.append(lay, FloatLayer(d.tensor, d.subsample, d.clip_max,
                                          tuple(d.nodes)), d.shape)
        if d.same_scale:
            self.union(sources[0], out.src)
        return out

    def identity(self, value, node, tensor: str, why: str) -> _Draft:
        """A 1x1 convolution with identity weights reading `value` (its pooling or
        element-wise operation included): an exact stand-in where the hardware needs a
        convolution, e.g. for an activation after an element-wise operation (the
        activation follows the convolution in a layer, seed 000). Input and output share
        one scale, so the quantized weights are exactly 64 with a shift of 1."""
        fields, in_shape = self.layer_input(value, node)
        c = in_shape[0]
        nd = len(in_shape) - 1
        if nd == 0:
            w = np.eye(c)
            fields.update(operator=Op.LINEAR, output_channels=c, output_dim=(1, 1))
        else:
            w = np.eye(c).reshape(c, c, *([1] * nd))
            fields.update(operator=Op.CONV1D if nd == 1 else Op.CONV2D, output_channels=c,
                          output_dim=_dims(in_shape), kernel_size=(1, 1))
        base = _layer_name(node)
        fields["name"] = f"{base}_identity"
        self.rewrites.append(f"{node.name or node.output[0]}: {why} = the same operation in "
                             "a layer with a 1x1 identity convolution")
        # the element-wise node the layer absorbs is named with it (the report's nodes)
        inner = value.inner if isinstance(value, _Pool) else value
        absorbed = [inner.node] if isinstance(inner, _Elt) else []
        return _Draft(fields, w, np.zeros(c), 0, in_shape, tensor,
                      [*absorbed, node.name or base], vector=nd == 0, same_scale=True)

    def _too_wide(self, lay: Layer) -> bool:
        """The pooling-only layer breaks the pool-channels rule (it needs a convolution
        to pool that many channels)."""
        from ..devices import DEVICES, get_device
        from ..legalize.rules.pooling import pool_channels

        if self.device is not None:
            return pool_channels(lay, None, get_device(self.device)) is not None
        verdicts = {pool_channels(lay, None, dev) is not None for dev in DEVICES}
        if len(verdicts) == 1:  # every device agrees: the device need not be known
            return verdicts.pop()
        # no default device: the grouping is decided for the device the user states
        raise Ai8xError("usage.device", lay.name,
                        f"whether a pooling-only layer of {lay.input_channels} channels "
                        "needs a convolution depends on the device, and none was given",
                        "state the device (--device, or device= in Python)",
                        exit_code=EXIT_USAGE)

    def passthrough(self, v) -> _Act:
        """A layer without convolution: pooling, element-wise or concatenation alone."""
        if isinstance(v, _Pool):
            inner = v.inner
            elt = inner if isinstance(inner, _Elt) else None
            if elt is not None:
                sources = tuple(self.act(o, v.node).src for o in elt.operands)
                in_shape = elt.shape
            else:
                inner = self.act(inner, v.node)
                sources, in_shape = (inner.src,), inner.shape
            lay = self._pool_layer(v, sources, in_shape, elt)
            if elt is None and self._too_wide(lay):
                d = self.identity(v, _NodeRef(v.node), v.tensor,
                                  f"pooling of {in_shape[0]} channels")
                return self.finish(d)
            out = self.append(lay, FloatLayer(v.tensor, (1, 1), None, (v.node,)),
                              (v.shape[0],) if v.vector else v.shape)
            for s in sources:
                self.union(s, out.src)
            return out
        if isinstance(v, _Elt):
            sources = tuple(self.act(o, v.node).src for o in v.operands)
            in_shape = v.operands[0].shape
            fields = self._pool_fields(v.pool, in_shape)
            dims_in = _dims(in_shape)
            lay = Layer(name=self.unique(v.node), operator=Op.NONE,
                        input_channels=in_shape[0], output_channels=in_shape[0],
                        input_dim=dims_in, output_dim=fields["pooled_dim"],
                        eltwise=v.kind, operands=len(sources), quantization=0,
                        in_sequences=self.seq(sources), **fields)
            out = self.append(lay, FloatLayer(v.tensor, (1, 1), None, (v.node,)), v.shape)
            for s in sources:
                self.union(s, out.src)
            return out
        assert isinstance(v, _Cat)
        sources = tuple(self.act(p, v.node).src for p in v.parts)
        dims = _dims(v.shape)
        lay = Layer(name=self.unique(v.node), operator=Op.NONE, input_channels=v.shape[0],
                    output_channels=v.shape[0], input_dim=dims, pooled_dim=dims,
                    output_dim=dims, quantization=0, in_sequences=self.seq(sources))
        out = self.append(lay, FloatLayer(v.tensor, (1, 1), None, (v.node,)), v.shape)
        for s in sources:
            self.union(s, out.src)
        return out

    @staticmethod
    def _pool_fields(pool: _Pool | None, in_shape: tuple[int, ...]) -> dict:
        if pool is None:
            return {"pooled_dim": _dims(in_shape)}
        return {"pool": pool.kernel, "pool_stride": pool.stride,
                "pool_dilation": pool.dilation, "pool_average": pool.average,
                "pooled_dim": _dims(pool.shape)}

    def _pool_layer(self, v: _Pool, sources, in_shape, elt: _Elt | None) -> Layer:
        fields = self._pool_fields(v, in_shape)
        extra = {}
        if elt is not None:
            extra = {"eltwise": elt.kind, "operands": len(elt.operands), "pool_first": False}
        return Layer(name=self.unique(v.node), operator=Op.NONE, input_channels=in_shape[0],
                     output_channels=in_shape[0], input_dim=_dims(in_shape),
                     output_dim=fields["pooled_dim"], quantization=0,
                     in_sequences=self.seq(sources), **fields, **extra)

    # -- the layer's input -------------------------------------------------------------
    def layer_input(self, value, node) -> tuple[dict, tuple[int, ...]]:
        """Layer fields for the data a convolution reads, and the shape it convolves."""
        where = self.where(node)
        value = self.subsampled(value)
        if isinstance(value, _Draft):
            value = self.act(value, where)
        if isinstance(value, _Pool) and isinstance(value.inner, _Act) and not value.vector:
            src = value.inner
            fields = self._pool_fields(value, src.shape)
            return dict(fields, input_channels=src.shape[0], input_dim=_dims(src.shape),
                        sources=(src.src,), pool_first=True), value.shape
        if isinstance(value, _Pool) and isinstance(value.inner, _Elt) and \
                self.uses.get(value.inner.tensor, 0) == 1 and value.inner.pool is None:
            elt = value.inner
            sources = tuple(self.act(o, where).src for o in elt.operands)
            fields = self._pool_fields(value, elt.shape)
            self._union_all(sources)
            return dict(fields, input_channels=elt.shape[0], input_dim=_dims(elt.shape),
                        sources=sources, eltwise=elt.kind,
                        operands=len(sources), pool_first=False), value.shape
        if isinstance(value, _Elt) and self.uses.get(value.tensor, 0) == 1:
            sources = tuple(self.act(o, where).src for o in value.operands)
            in_shape = value.operands[0].shape
            fields = self._pool_fields(value.pool, in_shape)
            self._union_all(sources)
            return dict(fields, input_channels=in_shape[0], input_dim=_dims(in_shape),
                        sources=sources, eltwise=value.kind,
                        operands=len(sources), pool_first=True), value.shape
        if isinstance(value, _Cat) and self.uses.get(value.tensor, 0) == 1:
            sources = tuple(self.act(p, where).src for p in value.parts)
            self._union_all(sources)
            return dict(input_channels=value.shape[0], input_dim=_dims(value.shape),
                        pooled_dim=_dims(value.shape),
                        sources=sources), value.shape
        a = self.act(value, where)
        return dict(input_channels=a.shape[0], input_dim=_dims(a.shape),
                    pooled_dim=_dims(a.shape), sources=(a.src,)), a.shape

    def copy(self, a: _Act, node) -> _Act:
        """A pass-through layer that copies `a` (same scale)."""
        dims = _dims(a.shape)
        lay = Layer(name=self.unique(f"{_layer_name(node)}_copy"), operator=Op.NONE,
                    input_channels=a.shape[0], output_channels=a.shape[0], input_dim=dims,
                    pooled_dim=dims, output_dim=dims, quantization=0,
                    in_sequences=self.seq((a.src,)))
        out = self.append(lay, FloatLayer(None, (1, 1), None, (node.name,)), a.shape)
        self.union(a.src, out.src)
        return out

    def _union_all(self, sources) -> None:
        for s in sources[1:]:
            self.union(sources[0], s)

    # -- node handlers -----------------------------------------------------------------
    def const(self, name: str) -> np.ndarray | None:
        return self.consts.get(name)

    def run(self) -> None:
        graph = self.model.graph
        inp = data_input(self.model)
        dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        shape = tuple(dims[1:])
        self.model_shape = shape
        perm = None
        # A channels-last input: its one reader, a Transpose to channels-first, is the
        # input mapping's permutation (the exporter dialects leave no other Transpose).
        self.layout = _channels_last_input(graph, inp.name) if len(shape) >= 2 else None
        if self.layout is not None:
            # canonical (N, C, ...) transposed to the model's (N, ..., C)
            perm = (0, *range(2, len(shape) + 1), 1)
            shape = (shape[-1], *shape[:-1])
        self.input_perm = perm
        self.values[inp.name] = _Act(-1, shape)
        # A vector input (N, F) is F channels of 1x1 data to the accelerator.
        self.input_shape = (shape[0], 1, 1) if len(shape) == 1 else shape
        for node in graph.node:
            if node.op_type in CONST_OPS and all(
                    not n or n in self.consts for n in node.input):
                self.fold(node)
                continue
            handler = getattr(self, f"op_{node.op_type}", None)
            if node.domain not in ("", "ai.onnx") or handler is None:
                self.unsupported(node)
            handler(node)
        self.outputs = []
        self.output_tensors = []
        for out in graph.output:
            v = self.values.get(out.name)
            tensor = out.name
            if isinstance(v, tuple) and v[0] == "cpu":
                v, tensor = v[1], v[2]
            if isinstance(v, _Flat):
                v = v.inner  # flattening an output is the host's business
            a = self.act(v, out.name)
            if a.src < 0:
                raise _fail("no-layer", out.name, "the output is the model input itself",
                            "give the model at least one layer")
            self.outputs.append(a.src)
            self.output_tensors.append(tensor)

    def fold(self, node) -> None:
        """Evaluate a node of constants (an exporter's weight quantization and shift
        arithmetic: Round/Div/Clip of weights, Pow(2, shift), ReduceMax/Log/Floor)."""
        args = [self.consts[n] if n else None for n in node.input]
        try:
            out = CONST_OPS[node.op_type](node, *args)
        except (ValueError, TypeError, IndexError) as exc:
            raise _fail("const", self.where(node), f"cannot evaluate constants ({exc})",
                        "fold constants (onnxsim) before converting") from None
        self.consts[node.output[0]] = np.asarray(out)

    def unsupported(self, node) -> None:
        hint = _HINTS.get(node.op_type, "rewrite this part with Conv, ConvTranspose, Gemm/"
                          "MatMul, BatchNormalization, Relu, Abs, pooling, Add/Sub, Concat "
                          "or Flatten")
        domain = f"{node.domain}." if node.domain not in ("", "ai.onnx") else ""
        raise _fail("unsupported-op", f"node {node.name or node.output[0]} "
                    f"({domain}{node.op_type})",
                    f"{domain}{node.op_type} has no equivalent on the accelerator", hint)

    def data(self, node, k: int = 0):
        name = node.input[k]
        if name in self.values:
            return self.values[name]
        if name in self.consts:
            return None
        raise _fail("input", node.name, f"input {name} is not computed before the node",
                    "export a topologically sorted graph")

    def where(self, node) -> str:
        return f"node {node.name or node.output[0]} ({node.op_type})"

    def set(self, node, value) -> None:
        name = node.output[0]
        if name in self.shared and isinstance(value, (_Act, _Draft, _Pool, _Elt, _Cat)):
            value = self.act(value, self.where(node))
            self.copies[name] = self.copy(value, node)
        self.values[name] = value

    # aliases
    def _only_to_output(self, name: str) -> bool:
        """`name` is read by nothing but a graph output, possibly through reshapes and
        transposes that each have one reader (the output's own layout change)."""
        outs = {o.name for o in self.model.graph.output}
        for _ in range(len(self.model.graph.node) + 1):
            if self.uses.get(name, 0) != 1:
                return False
            if name in outs:
                return True
            reader = next(n for n in self.model.graph.node if name in n.input)
            if reader.op_type not in _OUTPUT_LAYOUT or reader.input[0] != name:
                return False
            name = reader.output[0]
        return False

    def _host_side(self, node, v) -> bool:
        """Pass on a value the host reads (after the output's transpose)."""
        if isinstance(v, tuple) and v and v[0] == "cpu" and node.op_type in _OUTPUT_LAYOUT:
            self.values[node.output[0]] = v
            return True
        return False

    def op_Identity(self, node) -> None:
        v = self.data(node)
        if self._host_side(node, v):
            return
        if v is None:
            self.consts[node.output[0]] = self.consts[node.input[0]]
        else:
            self.set(node, v)

    op_Dropout = op_Identity

    def op_Constant(self, node) -> None:
        value = node_attr(node, "value")
        if value is None:
            for key in ("value_float", "value_int", "value_floats", "value_ints"):
                got = node_attr(node, key)
                if got is not None:
                    self.consts[node.output[0]] = np.asarray(got)
                    return
            self.unsupported(node)
        self.consts[node.output[0]] = _to_array(value)

    def op_Transpose(self, node) -> None:
        v = self.data(node)
        if self._host_side(node, v):
            return
        perm = tuple(int(p) for p in node_attr(node, "perm", []))
        if v is None:
            self.consts[node.output[0]] = np.transpose(self.consts[node.input[0]], perm)
            return
        if (self.layout is not None and node.output[0] == self.layout.output[0]) or \
                perm == tuple(range(len(perm))):
            self.set(node, v)  # the input's layout change: part of the input mapping
            return
        if self._only_to_output(node.output[0]) and len(getattr(v, "shape", ())) > 1:
            # The output's layout change (a channels-last model's image output): the
            # accelerator's result is the tensor before it, channels-first, and the host
            # reads it so (as it flattens an output), the report naming that tensor.
            self.rewrites.append(f"{node.name or node.output[0]}: the output's transpose "
                                 f"{_ints(perm)} is left to the host (the result is "
                                 f"{node.input[0]}, channels-first)")
            self.values[node.output[0]] = ("cpu", v, node.input[0])
            self.output_perm, self.output_shape = perm, tuple(int(d) for d in v.shape)
            return
        raise _fail("transpose", self.where(node), f"a transpose {_ints(perm)} inside the "
                    "network", "the accelerator keeps data channels-first: transpose only "
                    "the model input (a channels-last input read by one Transpose to "
                    "channels-first)")

    # convolutions and dense layers
    def op_Conv(self, node) -> None:
        self._conv(node, transpose=False)

    def op_ConvTranspose(self, node) -> None:
        self._conv(node, transpose=True)

    def _conv(self, node, transpose: bool) -> None:
        where = self.where(node)
        w = self.const(node.input[1])
        if w is None:
            raise _fail("weights", where, "the weights are not constant",
                        "export the model with its trained weights as initializers")
        nd = w.ndim - 2
        if nd not in (1, 2) or (transpose and nd != 2):
            raise _fail("conv-rank", where, f"{nd}-D convolution",
                        "use Conv1d, Conv2d or ConvTranspose2d")
        data = self.data(node)
        scaled = data if isinstance(data, _Gain) else None
        if scaled is not None:
            data = scaled.inner
        if transpose:
            # A transposed layer reads a tensor the accelerator holds: pooling or an
            # element-wise operation in front of it is a layer of its own (a transposed
            # layer's registers cannot state a pooling stride: the legalize rule
            # convtranspose2d-pool).
            data = self.act(data, where)
        fields, in_shape = self.layer_input(data, node)
        if len(in_shape) != nd + 1:  # (C, L) or (C, H, W): as many axes as the kernel
            raise _fail("conv-rank", where, f"a {nd}-D kernel on data of shape "
                        f"{tuple(in_shape)}", "check the model")
        groups = int(node_attr(node, "group", 1))
        kernel = _pair(w.shape[2:], nd, 1)
        strides = _pair(node_attr(node, "strides"), nd, 1)
        dil = _pair(node_attr(node, "dilations"), nd, 1)
        pads = [int(p) for p in (node_attr(node, "pads") or [0] * (2 * nd))]
        auto = node_attr(node, "auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else str(auto)
        if auto != "NOTSET":
            pads = _auto_pads(auto, in_shape[1:], w.shape[2:], strides, dil, transpose)
            if pads is None:
                raise _fail("auto-pad", where, f"auto_pad {auto}",
                            "export with explicit pads (onnxsim folds most exporters' "
                            "SAME padding into explicit pads)")
        op_given = node_attr(node, "output_padding")
        if pads[:nd] != pads[nd:]:
            w, kernel, pads, op_given = self._even_padding(node, w, pads, nd, dil, transpose)
        padding = (pads[0], 0 if nd == 1 else pads[1])
        b = self.const(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        cout = w.shape[1] * groups if transpose else w.shape[0]
        bias = np.zeros(cout) if b is None else b.astype(np.float64)
        if scaled is not None:
            w, bias = self._fold_scaling(node, scaled, w, bias, groups, transpose, padding)
        spatial = in_shape[1:]
        sub = (1, 1)
        if transpose:
            op_pad = _pair(op_given, 2, 0)
            out_sp = tuple((spatial[a] - 1) * strides[a] - 2 * padding[a] +
                           dil[a] * (kernel[a] - 1) + op_pad[a] + 1 for a in range(2))
            extra = {"output_padding": op_pad}
            operator = Op.CONVTRANSPOSE2D
        else:
            extra = {}
            operator = Op.CONV1D if nd == 1 else Op.CONV2D
            out_sp = tuple((spatial[a] + 2 * padding[a] - dil[a] * (kernel[a] - 1) - 1)
                           // strides[a] + 1 for a in range(nd))
            if strides[:nd] != (1,) * nd and (nd == 1 or strides[0] == strides[1]):
                # A strided convolution equals the stride-1 one subsampled: the
                # pooling unit of the next layer subsamples with a 1x1 window of that
                # stride (seed 000, "Pooling": stride without pooling).
                sub = (strides[0], strides[1] if nd == 2 else 1)
                full = tuple(spatial[a] + 2 * padding[a] - dil[a] * (kernel[a] - 1)
                             for a in range(nd))
                out_sp = full
                self.rewrites.append(
                    f"{node.name or node.output[0]}: stride-{strides[0]} convolution = "
                    f"stride-1 convolution + 1x1 stride-{strides[0]} pooling in the next "
                    "layer")
                strides = (1, 1)
        self._positive(node, in_shape, out_sp)
        out_shape = (cout, *out_sp)
        fields.update(operator=operator, output_channels=cout, output_dim=_dims(out_shape),
                      kernel_size=kernel, padding=padding, stride=strides, dilation=dil,
                      conv_groups=groups, name=_layer_name(node), **extra)
        draft = _Draft(fields, w.astype(np.float64), bias, 1 if transpose else 0,
                       out_shape, node.output[0], [node.name or node.output[0]],
                       subsample=sub)
        self.set(node, draft)

    def _even_padding(self, node, w, pads, nd, dil, transpose):
        """Unequal padding made equal where the result is the same (seed 000: the
        accelerator pads both sides of an axis alike). A 1-D convolution padded b before
        and e after is the one padded max(b, e) on both sides with |e - b| zero taps
        added to its kernel on the side that had less (each output still reads the same
        inputs with the same weights). A transposed convolution padded b before and e
        after with output padding o keeps outputs b .. of its full result; the
        accelerator's (padding p, output padding 1) keeps p .., as many: the same when
        e - o = b - 1. Returns (weights, kernel, pads, output padding)."""
        where = self.where(node)
        kernel = _pair(w.shape[2:], nd, 1)
        if nd == 1 and not transpose and dil[0] == 1:
            b, e = pads
            extra = np.zeros((*w.shape[:2], abs(e - b)), w.dtype)
            w = np.concatenate([extra, w] if e > b else [w, extra], axis=2)
            self.rewrites.append(f"{node.name or node.output[0]}: padding ({b}, {e}) = "
                                 f"padding {max(b, e)} on both sides with the kernel "
                                 f"widened to {w.shape[2]} by zero taps")
            return w, _pair(w.shape[2:], 1, 1), [max(b, e)] * 2, None
        op = [int(v) for v in (node_attr(node, "output_padding") or [0] * nd)]
        if transpose and all(pads[nd + a] - op[a] == pads[a] - 1 for a in range(nd)):
            self.rewrites.append(f"{node.name or node.output[0]}: padding {pads} with output"
                                 f" padding {op} = padding {pads[:nd]} on both sides with "
                                 "output padding 1")
            return w, kernel, [*pads[:nd], *pads[:nd]], [1] * nd
        if transpose:
            raise _fail("padding", where, f"a transposed convolution padded {_ints(pads[:nd])}"
                        f" before and {_ints(pads[nd:])} after with output padding "
                        f"{_ints(op)}: it keeps its full result from position "
                        f"{_ints(pads[:nd])} to {_ints(pads[nd:])} - {_ints(op)} from the "
                        "end; the accelerator (padding p, output padding 1) drops p at the "
                        "start and p - 1 at the end, and no kernel of the same size moves "
                        "the result by one position",
                        "export it with padding p and output padding 1 (PyTorch "
                        "ConvTranspose2d(3, stride=2, padding=1, output_padding=1)); in "
                        "Keras, Conv2DTranspose(padding=\"valid\") followed by "
                        "Cropping2D(((1, 0), (1, 0)))")
        raise _fail("padding", where, f"padding {_ints(pads[:nd])} before and "
                    f"{_ints(pads[nd:])} after; the accelerator pads both sides alike, and "
                    f"a {'x'.join(str(k) for k in kernel[:nd])} kernel cannot be widened "
                    "to make up the difference here",
                    "pad both sides alike (e.g. 'same' padding with stride 1, or with "
                    "stride 2 on an odd input size)")

    def _dense_input(self, node, v) -> tuple[dict, int]:
        """Fields for a dense layer's input and its number of inputs."""
        where = self.where(node)
        if isinstance(v, _Flat):
            a = v.inner
            n_in = int(np.prod(a.shape))
            flatten = len(a.shape) > 1 and int(np.prod(a.shape[1:])) > 1
            if flatten:
                fields = dict(input_channels=a.shape[0], input_dim=_dims(a.shape),
                              pooled_dim=_dims(a.shape), flatten=True,
                              sources=(a.src,))
            else:
                fields = dict(input_channels=n_in, input_dim=(1, 1), pooled_dim=(1, 1),
                              sources=(a.src,))
            return fields, n_in
        a = self.act(v, where)
        if len(a.shape) != 1 and int(np.prod(a.shape[1:])) != 1:
            raise _fail("dense-input", where, f"a dense layer applied to a {a.shape} tensor "
                        "(it would act on the last axis only)",
                        "flatten the data first (Flatten / Reshape to (N, -1))")
        return dict(input_channels=a.shape[0], input_dim=(1, 1), pooled_dim=(1, 1),
                    sources=(a.src,)), a.shape[0]

    def _dense(self, node, v, w: np.ndarray, b: np.ndarray | None) -> None:
        where = self.where(node)
        fields, n_in = self._dense_input(node, v)
        if w.ndim != 2:
            raise _fail("dense-shape", where, f"weights of shape {tuple(w.shape)}; a dense "
                        "layer has (outputs, inputs)", "check the model")
        if w.shape[1] != n_in:
            raise _fail("dense-shape", where, f"weights take {w.shape[1]} inputs, the data "
                        f"has {n_in}", "check the model")
        out = w.shape[0]
        fields.update(operator=Op.LINEAR, output_channels=out, output_dim=(1, 1),
                      name=_layer_name(node))
        bias = np.zeros(out) if b is None else np.broadcast_to(b, (out,)).astype(np.float64)
        self.set(node, _Draft(fields, w.astype(np.float64), bias.copy(), 0, (out,),
                              node.output[0], [node.name or node.output[0]], vector=True))

    def op_Gemm(self, node) -> None:
        where = self.where(node)
        w = self.const(node.input[1])
        if w is None or node_attr(node, "transA", 0):
            raise _fail("gemm", where, "Gemm without constant weights, or with transA",
                        "export dense layers with constant weights")
        alpha, beta = float(node_attr(node, "alpha", 1.0)), float(node_attr(node, "beta", 1.0))
        w = w.astype(np.float64) * alpha
        w = w if node_attr(node, "transB", 0) else w.T
        b = self.const(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if len(node.input) > 2 and node.input[2] and b is None:
            raise _fail("gemm", where, "a Gemm bias that is not constant",
                        "export dense layers with constant biases")
        self._dense(node, self.data(node), w, None if b is None else
                    np.asarray(b, np.float64).reshape(-1) * beta)

    def op_MatMul(self, node) -> None:
        w = self.const(node.input[1])
        if w is None or w.ndim != 2:
            raise _fail("matmul", self.where(node), "MatMul of two computed tensors or "
                        "with non-2-D weights", "only dense layers: data x constant matrix")
        self._dense(node, self.data(node), w.astype(np.float64).T, None)

    # folded into a pending layer
    def _draft_for_fold(self, v, node) -> _Draft | None:
        if isinstance(v, _Draft) and not v.done and self.uses.get(v.tensor, 0) == 1 and \
                v.tensor in node.input:
            return v
        return None

    def _channel_vector(self, c: np.ndarray, d: _Draft, node) -> np.ndarray | None:
        """A constant that broadcasts per output channel of `d` (or a scalar)."""
        cout = d.fields["output_channels"]
        arr = np.asarray(c, np.float64)
        if arr.size == 1:
            return np.full(cout, float(arr.reshape(-1)[0]))
        rank = 1 + len(d.shape)  # with the batch
        full = [1] * (rank - arr.ndim) + list(arr.shape)
        want = [1] * rank
        want[1] = cout
        if full == want:
            return arr.reshape(-1)
        return None

    def _scale_draft(self, d: _Draft, k: np.ndarray) -> None:
        w = d.weights
        if d.out_axis == 0:
            d.weights = w * k.reshape((-1,) + (1,) * (w.ndim - 1))
        else:
            g = d.fields.get("conv_groups", 1)
            per = w.shape[1]
            kk = k.reshape(g, per)
            cin_g = w.shape[0] // g
            w = w.reshape(g, cin_g, per, *w.shape[2:]) * kk.reshape(g, 1, per, 1, 1)
            d.weights = w.reshape(g * cin_g, per, *w.shape[3:])
        d.bias = d.bias * k

    def op_BatchNormalization(self, node) -> None:
        v = self.data(node)
        d = self._draft_for_fold(v, node)
        where = self.where(node)
        if d is None and self._pending_batchnorm(node, v):
            return
        if d is None:
            raise _fail("batchnorm", where, "BatchNormalization that does not directly "
                        "follow a convolution or dense layer (it cannot be folded)",
                        "place BatchNormalization right after a Conv / Linear, before the "
                        "activation")
        given = [self.consts.get(n) for n in node.input[1:5]]
        if len(given) < 4 or any(p is None for p in given):
            # a parameter computed by the graph (or missing) cannot be folded into weights
            raise _fail("batchnorm", where, "BatchNormalization whose scale, bias, mean "
                        "and variance are not all constants (initializers)",
                        "export the model in inference mode, with the statistics as "
                        "initializers")
        gamma, beta, mean, var = (np.asarray(p, np.float64) for p in given)
        eps = float(node_attr(node, "epsilon", 1e-5))
        k = gamma / np.sqrt(var + eps)
        d.bias = d.bias - mean
        self._scale_draft(d, k)
        d.bias = d.bias + beta
        self._absorb(d, node)

    def _pending_batchnorm(self, node, v) -> bool:
        """A BatchNormalization after a pooling or a layer's activation (or on the input):
        a per-channel gain and offset the next convolution folds in (_fold_scaling)."""
        if isinstance(v, _Draft):
            v = self.act(v, self.where(node))
        if not isinstance(v, (_Act, _Pool, _Gain)) or getattr(v, "vector", False):
            return False
        gamma, beta, mean, var = (np.asarray(self.consts[n], np.float64).reshape(-1)
                                  for n in node.input[1:5])
        k = gamma / np.sqrt(var + float(node_attr(node, "epsilon", 1e-5)))
        shift = beta - mean * k
        if isinstance(v, _Gain):  # k (g x + s) + t
            inner, gain = v.inner, v.gain * k
            shift = shift + k * (v.shift if v.shift is not None else 0.0)
        else:
            inner, gain = v, k
        self.rewrites.append(f"{node.name or node.output[0]}: BatchNormalization folded "
                             "into the convolution that reads it")
        self.set(node, _Gain(inner, gain, self.where(node), shift, batchnorm=True))
        return True

    def _absorb(self, d: _Draft, node) -> None:
        d.tensor = node.output[0]
        d.nodes.append(node.name or node.output[0])
        self.set(node, d)

    def _binary(self, node, kind: int) -> None:
        a, b = self.data(node, 0), self.data(node, 1)
        where = self.where(node)
        if a is None and b is None:
            raise _fail("const", where, "arithmetic on constants only",
                        "fold constants (onnxsim) before converting")
        if a is None or b is None:
            v = a if b is None else b
            c = self.consts[node.input[1] if b is None else node.input[0]]
            if (kind == ELTWISE_ADD or b is None) and self._input_offset(node, v, c, kind):
                return
            if isinstance(v, _Gain) and self._gain_offset(node, v, c, kind, b is None):
                return
            d = self._draft_for_fold(v, node)
            vec = None if d is None else self._channel_vector(c, d, node)
            if vec is None:
                raise _fail("const-arith", where, "adding or subtracting a constant that "
                            "is not a per-channel bias of the preceding convolution or "
                            "dense layer", "give the convolution/dense layer a bias instead")
            if kind == ELTWISE_SUB and b is None:
                d.bias = d.bias - vec
            elif kind == ELTWISE_SUB:  # c - x
                self._scale_draft(d, -np.ones_like(vec))
                d.bias = d.bias + vec
            else:
                d.bias = d.bias + vec
            self._absorb(d, node)
            return
        a, b = self.subsampled(a), self.subsampled(b)
        ops = []
        pool = None
        for v in (a, b):
            if isinstance(v, _Pool) and isinstance(v.inner, _Act) \
                    and self.uses.get(v.tensor, 0) == 1 and not v.vector and \
                    (pool is None or (pool.kernel, pool.stride, pool.dilation, pool.average,
                                      pool.shape) == (v.kernel, v.stride, v.dilation,
                                                      v.average, v.shape)):
                pool = v if pool is None else pool
                ops.append(v.inner)
            else:
                ops.append(v)
        if pool is not None and not all(isinstance(v, _Pool) for v in (a, b)):
            pool, ops = None, [a, b]
        acts = [self.copies.get(node.input[k]) or self.act(ops[k], where) for k in range(2)]
        if kind == ELTWISE_ADD and node.input[1] in self.copies and \
                node.input[0] not in self.copies:
            # Addition commutes: the copy first, so the layer reads its operands on the
            # copy's processors (a pass-through layer keeps data where it is).
            acts = acts[::-1]
        shapes = {x.shape for x in acts}
        if len(shapes) != 1:
            raise _fail("eltwise-shape", where, f"element-wise operands of shapes "
                        f"{[x.shape for x in acts]} (broadcasting)",
                        "add or subtract tensors of equal shape only")
        shape = pool.shape if pool is not None else acts[0].shape
        # An element-wise operand is written interleaved with the other operands, so a
        # tensor that another layer also reads gets a pass-through copy for the
        # element-wise layer (seed 004, "Residual Connections").
        operands = acts
        self.set(node, _Elt(kind, operands, shape, node.name or node.output[0],
                            node.output[0], pool))

    def _input_offset(self, node, v, c, kind: int) -> bool:
        """A per-channel constant added to the model input before any scaling (Keras'
        Normalization mean, a Rescaling offset; dialects/tf2onnx.py puts it first): part
        of the input mapping, exact, as the accelerator's zero padding then holds zeros
        of the offset input like the model's padding does."""
        data = node.input[0] if node.input[0] in self.values else node.input[1]
        if not isinstance(v, _Act) or v.src >= 0 or \
                self.input_gain != 1.0 or self.uses.get(data, 0) != 1:
            return False
        arr = np.asarray(c, np.float64)
        rank = 1 + len(v.shape)
        if arr.ndim > rank:
            return False
        full = (1,) * (rank - arr.ndim) + arr.shape
        if full[0] != 1 or any(d != 1 for d in full[2:]) or full[1] not in (1, v.shape[0]):
            return False
        vec = np.broadcast_to(arr.reshape(-1), (v.shape[0],)) * \
            (-1.0 if kind == ELTWISE_SUB else 1.0)
        base = np.zeros(v.shape[0]) if self.input_offset is None else self.input_offset
        self.input_offset = base + vec
        self.rewrites.append(f"{node.name or node.output[0]}: input offset folded into the "
                             "input mapping")
        self.set(node, v)
        return True

    def op_Add(self, node) -> None:
        self._binary(node, ELTWISE_ADD)

    def op_Sub(self, node) -> None:
        self._binary(node, ELTWISE_SUB)

    def op_Mul(self, node) -> None:
        self._scale_const(node, divide=False)

    def op_Div(self, node) -> None:
        self._scale_const(node, divide=True)

    def _scale_const(self, node, divide: bool) -> None:
        a, b = self.data(node, 0), self.data(node, 1)
        if (a is None) == (b is None) or (divide and a is None):
            self.unsupported(node)
        v = a if b is None else b
        c = self.consts[node.input[1] if b is None else node.input[0]]
        if isinstance(v, _Act) and v.src < 0 and np.asarray(c).size == 1 and \
                float(np.asarray(c).reshape(-1)[0]) > 0 and \
                self.uses.get(node.input[0 if b is None else 1], 0) == 1:
            # A positive scale of the model input (Keras' Rescaling(1/255), ...): part
            # of the input mapping float -> int8, exact.
            k = float(np.asarray(c).reshape(-1)[0])
            self.input_gain *= 1.0 / k if divide else k
            self.rewrites.append(f"{node.name or node.output[0]}: input scaling folded "
                                 "into the input mapping")
            self.set(node, v)
            return
        if self._input_gain(node, v, c, divide, b is None):
            return
        d = self._draft_for_fold(v, node)
        after_act = False
        if d is None and isinstance(v, _Draft) and v.done and v.tensor in node.input and \
                self.uses.get(v.tensor, 0) == 1:
            d, after_act = v, True
        vec = None if d is None else self._channel_vector(c, d, node)
        if vec is None or (divide and np.any(vec == 0)):
            self.unsupported(node)
        k = 1.0 / vec if divide else vec
        if after_act:
            # ReLU and Abs are positively homogeneous (f(k x) = k f(x) for k > 0): a
            # positive scale after the activation moves into the weights and bias.
            if np.any(k <= 0) or d.fields.get("activation") not in (ACT_RELU, ACT_ABS):
                self.unsupported(node)
            if d.clip_max is not None:
                if np.ptp(k) != 0:
                    self.unsupported(node)
                d.clip_max = d.clip_max * float(k[0])
        self._scale_draft(d, k)
        self._absorb(d, node)

    def _fold_scaling(self, node, scaled: _Gain, w, bias, groups: int, transpose: bool,
                      padding) -> tuple[np.ndarray, np.ndarray]:
        """Weights and bias of a convolution reading `scaled` (gain, then shift, per
        input channel). The shift is exact only where the convolution reads no padding
        (the hardware pads with zeros, the model pads the shifted values) and no
        inserted zeros (a transposed convolution)."""
        shift = scaled.shift
        if shift is not None and np.any(shift != 0):
            if transpose or any(padding):
                raise _fail("batchnorm", scaled.node, "a per-channel offset before the "
                            f"{'transposed' if transpose else 'padded'} convolution "
                            f"{self.where(node)} (the accelerator pads and upsamples with "
                            "zeros, not with the offset)",
                            "place BatchNormalization right after a Conv / Linear, before "
                            "the activation")
            idx = _input_channels(w, groups)
            extra = (np.asarray(w, np.float64) *
                     shift[idx].reshape(*idx.shape, *(1,) * (w.ndim - 2)))
            bias = bias + extra.reshape(w.shape[0], -1).sum(axis=1)
        return _input_gain_folded(w, scaled.gain, groups, transpose), bias

    def _input_gain(self, node, v, c, divide: bool, data_first: bool) -> bool:
        """The model input, a pooling or a layer's output multiplied or divided per
        channel (an input normalization (x - mean) / std; tf2onnx's BatchNormalization
        as Mul + Add): a pending gain the convolutions reading it fold into their
        weights. Exact: the accelerator pads the offset input with zeros, as the model
        pads the normalized one."""
        shift, batchnorm = None, False
        if isinstance(v, _Gain):
            inner, base, shift, batchnorm = v.inner, v.gain, v.shift, v.batchnorm
        elif isinstance(v, (_Act, _Pool)) and not getattr(v, "vector", False):
            inner, base = v, np.ones(v.shape[0])
        else:
            return False
        vec = self._per_channel(node, c, inner.shape, 0 if data_first else 1)
        if vec is None or (divide and np.any(vec == 0)):
            return False
        factor = 1.0 / vec if divide else vec
        gain = base * factor
        shift = None if shift is None else shift * factor
        self.rewrites.append(f"{node.name or node.output[0]}: per-channel input scaling "
                             "folded into the weights of the convolutions reading it")
        self.set(node, _Gain(inner, gain, self.where(node), shift, batchnorm))
        return True

    def _per_channel(self, node, c, shape, data_index: int) -> np.ndarray | None:
        """A constant that is one value, or one per channel, of data of `shape` (C, ...)
        that only this node reads; else None."""
        arr = np.asarray(c, np.float64)
        rank = 1 + len(shape)
        full = (1,) * (rank - arr.ndim) + arr.shape if arr.ndim <= rank else None
        if self.uses.get(node.input[data_index], 0) != 1 or full is None or \
                full[0] != 1 or full[1] not in (1, shape[0]) or \
                any(d != 1 for d in full[2:]):
            return None
        return np.broadcast_to(arr.reshape(-1), (shape[0],)).astype(np.float64)

    def _gain_offset(self, node, v: _Gain, c, kind: int, data_first: bool) -> bool:
        """A per-channel constant added to (subtracted from) a pending scaling: its
        offset (tf2onnx's BatchNormalization: Mul, then Add)."""
        vec = self._per_channel(node, c, v.shape, 0 if data_first else 1)
        if vec is None:
            return False
        shift = np.zeros(v.gain.shape) if v.shift is None else v.shift
        gain = v.gain
        if kind == ELTWISE_ADD:
            shift = shift + vec
        elif data_first:  # x - c
            shift = shift - vec
        else:  # c - x
            gain, shift = -gain, vec - shift
        self.set(node, _Gain(v.inner, gain, v.node, shift, v.batchnorm))
        return True

    # activations
    def _activation(self, node, code: int, clip_max: float | None = None) -> None:
        v = self.data(node)
        if isinstance(v, _Gain):
            self.act(v, self.where(node))  # (refused: an activation does not fold it)
        d = self._draft_for_fold(v, node)
        if d is None and isinstance(v, (_Act, _Elt, _Pool, _Cat, _Draft)):
            d = self.identity(v, node, node.input[0],
                              f"{node.op_type} after a layer's output")
        if d is None:
            raise _fail("activation", self.where(node), f"{node.op_type} of a value the "
                        "accelerator does not hold",
                        "apply activations to convolution or dense outputs")
        d.fields["activation"] = code
        d.clip_max = clip_max
        d.done = True
        self._absorb(d, node)

    def op_Relu(self, node) -> None:
        self._activation(node, ACT_RELU)

    def op_Abs(self, node) -> None:
        self._activation(node, ACT_ABS)

    def op_Clip(self, node) -> None:
        lo = node_attr(node, "min")
        hi = node_attr(node, "max")
        if len(node.input) > 1 and node.input[1]:
            c = self.const(node.input[1])
            lo = None if c is None else float(c)
        if len(node.input) > 2 and node.input[2]:
            c = self.const(node.input[2])
            hi = None if c is None else float(c)
        hi = None if hi is None or not np.isfinite(float(hi)) or float(hi) > 3e38 \
            else float(hi)
        v = self.data(node)
        d = v if isinstance(v, _Draft) and self.uses.get(v.tensor, 0) == 1 and \
            v.tensor in node.input and v.clip_max is None else None
        if d is not None and hi is not None and hi > 0 and lo is not None and (
                (d.done and float(lo) <= 0) or
                abs(float(lo) * 127 + hi * 128) <= 1e-5 * hi):
            # The 8-bit output clamp, [-128, 127] codes of hi / 127 each (a ReLU before it
            # keeps the lower end at 0): the vendor's training modules end every layer
            # with it (activations in [-1, 127/128]), a quantized model's int8 grid is
            # Clip(-128 s, 127 s) with 127 s rounded to float32 (hence the tolerance).
            # The layer's range is hi exactly.
            d.clip_max = hi
            d.done = True
            self._absorb(d, node)
            return
        if lo is None or float(lo) != 0.0:
            raise _fail("clip", self.where(node), f"Clip with min {lo}",
                        "only Clip(min=0) (a ReLU, optionally with a maximum) and the 8-bit "
                        "output clamp Clip(-128 u, 127 u) have a hardware equivalent")
        if hi is not None and hi <= 0:
            raise _fail("clip", self.where(node), f"Clip(0, {hi})",
                        "the maximum must be positive")
        self._activation(node, ACT_RELU, hi)

    # pooling
    def _pool(self, node, average: bool, kernel=None, strides=None, glob=False,
              vector=False) -> None:
        where = self.where(node)
        v = self.subsampled(self.data(node))
        if isinstance(v, _Draft):
            v = self.act(v, where)
        if isinstance(v, _Act):
            inner = v
            in_shape = v.shape
        elif isinstance(v, _Elt) and v.pool is None and self.uses.get(v.tensor, 0) == 1:
            inner, in_shape = v, v.shape
        else:
            inner = self.act(v, where)
            in_shape = inner.shape
        if len(in_shape) < 2:
            raise _fail("pool-rank", where, "pooling of a vector", "pool before flattening")
        nd = len(in_shape) - 1
        if glob:
            kernel = _pair(in_shape[1:], nd, 1)
            strides = kernel
            dil = (1, 1)
        else:
            kernel = _pair(node_attr(node, "kernel_shape"), nd, 1)
            strides = _pair(node_attr(node, "strides"), nd, 1)
            dil = _pair(node_attr(node, "dilations"), nd, 1)
            pads = node_attr(node, "pads")
            if pads and any(int(p) for p in pads):
                raise _fail("pool-padding", where, f"padded pooling {list(pads)}",
                            "the pooling unit does not pad: pool without padding")
            if node_attr(node, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                raise _fail("pool-padding", where, "auto_pad pooling",
                            "pool without padding")
        out_sp = tuple((in_shape[1 + a] - dil[a] * (kernel[a] - 1) - 1) // strides[a] + 1
                       for a in range(nd))
        if node_attr(node, "ceil_mode", 0):
            ceil = tuple(-(-(in_shape[1 + a] - dil[a] * (kernel[a] - 1) - 1) // strides[a])
                         + 1 for a in range(nd))
            if ceil != out_sp:
                raise _fail("pool-ceil", where, "ceil_mode pooling reads past the data",
                            "use ceil_mode=False or an input size the window divides")
        self._positive(node, in_shape, out_sp)
        shape = (in_shape[0], *out_sp)
        self.set(node, _Pool(inner, kernel, strides, dil, average, shape,
                             node.name or node.output[0], node.output[0], vector))

    def _positive(self, node, in_shape, out_sp) -> None:
        """Every output axis holds data: a window longer than its (padded) data is a
        model made for another input size (a model-level code: no layer is at fault,
        so no CPU fallback is proposed)."""
        if all(int(n) > 0 for n in out_sp):
            return
        raise Ai8xError("model.input-shape", self.where(node),
                        f"the window does not fit the data: {_ints(in_shape[1:])} "
                        f"positions per channel ({_ints(in_shape)} per sample) are fewer "
                        "than the window needs, so it has no output",
                        "check the input shape the model was exported with (the model "
                        f"declares {_ints(self.model_shape)} per sample, after the batch "
                        "axis): the data reaching this node is too short for its window")

    def op_MaxPool(self, node) -> None:
        if len(node.output) > 1 and node.output[1]:
            raise _fail("pool-indices", self.where(node), "MaxPool with indices",
                        "drop the indices output")
        self._pool(node, False)

    def op_AveragePool(self, node) -> None:
        self._pool(node, True)

    def op_GlobalAveragePool(self, node) -> None:
        self._pool(node, True, glob=True)

    def op_GlobalMaxPool(self, node) -> None:
        self._pool(node, False, glob=True)

    def op_ReduceMean(self, node) -> None:
        self._reduce(node, average=True)

    def op_ReduceMax(self, node) -> None:
        self._reduce(node, average=False)

    def _reduce(self, node, average: bool) -> None:
        """A mean or maximum over every spatial axis: global pooling."""
        v = self.data(node)
        axes = node_attr(node, "axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = self.const(node.input[1])
        rank = 1 + len(getattr(v, "shape", ()) or ())
        ax = sorted(int(a) % rank for a in (axes if axes is not None else []))
        if rank < 3 or ax != list(range(2, rank)):
            raise _fail("reduce", self.where(node), f"{node.op_type} over axes {ax}",
                        f"{'average' if average else 'take the maximum'} over the spatial "
                        "axes only (global pooling)")
        self._pool(node, average, glob=True, vector=not node_attr(node, "keepdims", 1))

    # upsampling
    def op_Resize(self, node) -> None:
        """Nearest upsampling by 2 in both axes of 2-D data (the canonical Resize that
        dialects/movement.py writes for every exporter's spelling of it) = a stride-2
        3x3 transposed convolution (padding 1, output padding 1, seed 000's only
        ConvTranspose2d) whose kernel is [0, 1, 1] x [0, 1, 1] per channel: output
        (2i + a, 2j + b) reads exactly input (i, j) with weight 1 (the zero-inserted
        input has one value under the kernel's ones at each position). Input and output
        share one scale, so the weights quantize to 64 with a shift of 1: exact."""
        from .dialects.movement import CANONICAL_RESIZE

        where = self.where(node)
        v = self.data(node)
        scales = self.const(node.input[2]) if len(node.input) > 2 and node.input[2] \
            else None
        shape = getattr(v, "shape", None)
        mode = {k: node_attr(node, k) for k in CANONICAL_RESIZE}
        mode = {k: x.decode() if isinstance(x, bytes) else x for k, x in mode.items()}
        factors = None if scales is None else tuple(float(x) for x in
                                                    np.asarray(scales).reshape(-1))
        if mode == CANONICAL_RESIZE and shape is not None and len(shape) == 2 and \
                factors == (1.0, 1.0, 2.0):
            self._upsample_1d(node, v)
            return
        if mode != CANONICAL_RESIZE or shape is None or len(shape) != 3 or \
                factors != (1.0, 1.0, 2.0, 2.0):
            what = "nearest" if mode == CANONICAL_RESIZE else \
                f"{mode.get('mode') or 'nearest'} ({mode.get('coordinate_transformation_mode')})"
            raise _fail("upsample", where, f"{what} resize by "
                        f"{'computed sizes' if factors is None else _ints(factors[2:])} "
                        f"of data {_ints(shape) if shape else '?'}; the accelerator "
                        "upsamples by 2 in every spatial axis, nearest neighbour (a "
                        "transposed convolution with a fixed kernel)",
                        "upsample by 2 with nearest neighbour (nn.Upsample(scale_factor=2),"
                        " Keras UpSampling2D(2) / UpSampling1D(2))")
        self.set(node, self._upsampling(node, self.act(v, where), node.output[0]))

    def _upsampling(self, node, a: _Act, tensor: str | None) -> _Draft:
        """The ConvTranspose2d layer (pending) upsampling `a` (C, H, W) by 2."""
        fields, in_shape = self.layer_input(a, node)  # held data, as in _conv
        c, h, w = in_shape
        k1 = np.array([0.0, 1.0, 1.0])
        weights = np.zeros((c, c, 3, 3))
        weights[np.arange(c), np.arange(c)] = np.outer(k1, k1)
        out_shape = (c, 2 * h, 2 * w)
        fields.update(operator=Op.CONVTRANSPOSE2D, output_channels=c,
                      output_dim=(2 * h, 2 * w), kernel_size=(3, 3), padding=(1, 1),
                      stride=(2, 2), dilation=(1, 1), conv_groups=1, output_padding=(1, 1),
                      name=_layer_name(node))
        self.rewrites.append(f"{node.name or node.output[0]}: nearest 2x upsampling = "
                             "ConvTranspose2d 3x3 stride 2, kernel [0,1,1]x[0,1,1] per "
                             "channel")
        return _Draft(fields, weights, np.zeros(c), 1, out_shape, tensor,
                      [node.name or node.output[0]], same_scale=True)

    def _upsample_1d(self, node, v) -> None:
        """Nearest 2x upsampling of 1-D data (C, L): the data read as (C, L, 1) (the
        same memory), upsampled in both axes, (C, 2L, 2) with two equal columns, then
        a 1x2 max pooling (stride 1: the stride must be square) keeps one of them (the
        maximum of two equal values), read as (C, 2L). Exact, two layers (the pooling
        is a layer of its own: a 1-D layer's pooling is 1-D)."""
        where = self.where(node)
        a = self.act(v, where)
        c, n = a.shape
        up = self.act(self._upsampling(node, _Act(a.src, (c, n, 1)), None), where)
        pool = _Pool(up, (1, 2), (1, 1), (1, 1), False, (c, 2 * n, 1),
                     f"{node.name or node.output[0]}_columns", node.output[0])
        out = self.act(pool, where)
        self.rewrites.append(f"{node.name or node.output[0]}: 1-D data upsampled as "
                             f"({c}, {n}, 1), one of the two equal columns kept by a 1x2 "
                             "max pooling")
        self.set(node, _Act(out.src, (c, 2 * n)))

    # reshaping
    def op_Flatten(self, node) -> None:
        v = self.data(node)
        if self._host_side(node, v):
            return
        if int(node_attr(node, "axis", 1)) != 1:
            raise _fail("flatten", self.where(node), "Flatten with axis other than 1",
                        "flatten all but the batch axis")
        self._flatten(node, v)

    def _flatten(self, node, v) -> None:
        if isinstance(v, _Flat):
            self.set(node, v)
            return
        a = self.act(v, self.where(node))
        if len(a.shape) == 1:
            self.set(node, a)
        else:
            self.set(node, _Flat(a, node.name or node.output[0]))

    def op_Reshape(self, node) -> None:
        if self._host_side(node, self.data(node)):
            return
        v = self.subsampled(self.data(node))  # a strided convolution's own shape
        target = self.const(node.input[1])
        if v is None or target is None:
            raise _fail("reshape", self.where(node), "a reshape with a computed shape",
                        "simplify the model (onnxsim) or flatten with Flatten")
        src_shape = v.inner.shape if isinstance(v, _Flat) else v.shape
        total = int(np.prod(src_shape))
        t = [int(x) for x in np.asarray(target).reshape(-1)]
        if not t:
            raise _fail("reshape", self.where(node), "a reshape to a scalar",
                        "only flatten (N, C, H, W) -> (N, C*H*W) before a dense layer")
        if not int(node_attr(node, "allowzero", 0)):
            # 0 copies the input's dimension there (ONNX Reshape without allowzero)
            full = (1, *src_shape)
            t = [full[k] if x == 0 and k < len(full) else x for k, x in enumerate(t)]
        t[0] = 1 if t[0] in (0, -1) else t[0]
        if t[0] != 1:
            raise _fail("reshape", self.where(node), f"reshape to {_ints(target)} merges "
                        "the batch", "keep the batch axis first")
        rest = t[1:]
        if -1 in rest:
            known = int(np.prod([x for x in rest if x != -1])) or 1
            rest[rest.index(-1)] = total // known
        if int(np.prod(rest)) != total:
            raise _fail("reshape", self.where(node), f"reshape to {_ints(target)} of "
                        f"{_ints(src_shape)}", "check the model")
        self.reshapes[node.output[0]] = tuple(rest)
        if len(rest) == 1 and len(src_shape) > 1 and int(np.prod(src_shape[1:])) > 1:
            self._flatten(node, v)
            return
        self._relabel(node, v, tuple(rest))

    def _relabel(self, node, v, rest: tuple[int, ...]) -> None:
        """A reshape that the accelerator does by reading the same memory with other
        dimensions: a channel's values stay on its processor in the same order (seed
        000: each processor holds its channels' pixels row by row), so any reshape that
        keeps the channel count first is the next layer's input_dim (the vendor's
        `in_dim`); a (C,) vector is (C, 1, ...) and back. Anything else moves values
        between channels: refused, naming the axis."""
        where = self.where(node)
        src_shape = v.inner.shape if isinstance(v, _Flat) else v.shape
        if tuple(rest) == tuple(src_shape) and isinstance(v, _Act | _Draft | _Pool):
            self.set(node, v)
            return
        inner = v.inner if isinstance(v, _Flat) else self.act(v, where)
        shape = inner.shape
        if rest and rest[0] == shape[0] and len(rest) <= 3 and \
                int(np.prod(rest)) == int(np.prod(shape)) and \
                (len(rest) > 1 or int(np.prod(shape[1:])) == 1):
            self.set(node, _Act(inner.src, tuple(rest)))
            return
        raise _fail("rank", where, _moved_axis(node.op_type, shape, rest),
                    "keep the channels as the second axis (N, C, ...) and change only "
                    "the spatial axes, or reshape once into (N, C*H*W) right before a "
                    "dense layer")

    def op_Squeeze(self, node) -> None:
        if self._host_side(node, self.data(node)):
            return
        v = self.subsampled(self.data(node))
        src = v.inner.shape if isinstance(v, _Flat) else getattr(v, "shape", None)
        if v is None or src is None:
            raise _fail("reshape", self.where(node), f"{node.op_type} of a constant or "
                        "shape value", "fold constants (onnxsim) before converting")
        self._relabel(node, v, _squeezed(node, (1, *src), self.const)[1:])

    op_Unsqueeze = op_Squeeze

    def op_Concat(self, node) -> None:
        vals = [self.data(node, k) for k in range(len(node.input))]
        where = self.where(node)
        if any(v is None for v in vals):
            raise _fail("concat", where, "concatenating constants",
                        "concatenate computed tensors only")
        acts = [self.act(v, where) for v in vals]
        rank = 1 + len(acts[0].shape)
        axis = int(node_attr(node, "axis", 1)) % rank
        if axis != 1 or \
                len({a.shape[1:] for a in acts}) != 1:
            raise _fail("concat", where, f"concatenation along axis {axis} of "
                        f"{[a.shape for a in acts]}",
                        "concatenate channels (axis 1) of tensors of equal size only")
        if len(acts[0].shape) == 1:
            raise _fail("concat", where, "concatenating dense-layer outputs",
                        "concatenate convolution outputs")
        shape = (sum(a.shape[0] for a in acts), *acts[0].shape[1:])
        self.set(node, _Cat(acts, shape, node.name or node.output[0], node.output[0]))

    # the CPU's tail
    def _tail(self, node) -> None:
        v = self.data(node)
        outs = {o.name for o in self.model.graph.output}
        if node.output[0] not in outs or self.uses.get(node.output[0], 0) != 1 or \
                isinstance(v, tuple):
            raise _fail("mid-network", self.where(node),
                        f"{node.op_type} inside the network",
                        _HINTS.get(node.op_type, "move it to the end"))
        self.cpu_tail.append(node.op_type)
        self.values[node.output[0]] = ("cpu", v, node.input[0])

    op_Softmax = op_LogSoftmax = op_Sigmoid = _tail


def _simplify(model, where: str):
    """Fix the batch to 1, fold constant shape arithmetic with onnxsim, infer shapes."""
    if len(model.graph.input) - len({i.name for i in model.graph.initializer}
                                    & {i.name for i in model.graph.input}) != 1:
        raise _fail("inputs", where, "the model has more than one input",
                    "export a model with one input tensor")
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    inp = inputs[0]
    tt = inp.type.tensor_type
    if tt.elem_type != onnxpb.TensorProto.FLOAT:
        # a quantized model's integer input (TFLite int8 I/O): its codes taken as they
        # are where they are the accelerator's, else refused (dialects/integer_io.py)
        from .dialects.integer_io import float_input

        model = float_input(model, inp, f"input {inp.name}")
    if any(o.type.tensor_type.elem_type in (onnxpb.TensorProto.INT8,
                                            onnxpb.TensorProto.UINT8)
           for o in model.graph.output):
        from .dialects.integer_io import float_outputs

        float_outputs(model)  # (TFLite's inference_output_type = tf.int8)
    dims = tt.shape.dim
    if len(dims) not in (2, 3, 4):
        raise _fail("input-rank", f"input {inp.name}", f"a {len(dims)}-D input",
                    "the input must be (N, F), (N, C, L), (N, C, H, W) or (N, H, W, C)")
    for k, d in enumerate(dims):
        if k and not d.HasField("dim_value"):
            raise _fail("dynamic-shape", f"input {inp.name}",
                        f"dimension {k} is dynamic ({d.dim_param or '?'}); only the batch "
                        "may be", "export with a fixed input size")
    dims[0].Clear()
    dims[0].dim_value = 1
    for out in model.graph.output:
        if out.type.tensor_type.shape.dim:
            out.type.tensor_type.shape.dim[0].Clear()
            out.type.tensor_type.shape.dim[0].dim_value = 1
    del model.graph.value_info[:]
    _output_shapes(model)
    if not _needs_simplify(model):
        return model
    try:
        import onnxsim

        from ..console import foreign_stderr_silenced

        with foreign_stderr_silenced():
            simplified, ok = onnxsim.simplify(model, skip_fuse_bn=True)
        if ok:
            model = simplified
    except Exception as exc:  # noqa: BLE001 - onnxsim raises many kinds
        raise _fail("simplify", where, f"onnxsim cannot simplify the model "
                    f"({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__})",
                    "check the model with onnx.checker and onnxruntime") from None
    return model


def _channels_last_input(graph, name: str):
    """The Transpose to channels-first that is the input's one reader, if the input is
    channels-last (the canonical form the exporter dialects leave, dialects/tf2onnx.py);
    else None."""
    readers = [n for n in graph.node if name in n.input]
    if len(readers) != 1 or readers[0].op_type != "Transpose":
        return None
    perm = tuple(int(p) for p in node_attr(readers[0], "perm", []) or [])
    ok = len(perm) >= 3 and perm == (0, len(perm) - 1, *range(1, len(perm) - 1))
    return readers[0] if ok else None


def _needs_simplify(model) -> bool:
    """Whether onnxsim has anything to do: a node the grouping does not handle itself
    (shape arithmetic to fold, a zero Pad to fuse into a convolution, ...). Importing
    onnxsim costs seconds (it loads torch), so graphs of known nodes skip it, as do
    dialects whose recognizer folds its own constants (dialects.folds_itself) and the
    quantized dialects' ops (onnxsim would fold a quantized weight into float and lose
    its grid)."""
    if folds_itself(model):
        return False
    known = handled_ops()
    return any(node.op_type not in known and (node.domain not in ("", "ai.onnx") or
               not hasattr(_Walker, f"op_{node.op_type}")) for node in model.graph.node)


def _output_shapes(model) -> None:
    """Give graph outputs declared without a shape their inferred one (onnxsim needs
    it; exporters may leave it out)."""
    missing = [o for o in model.graph.output if not o.type.tensor_type.HasField("shape")]
    if not missing:
        return
    import onnx

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(probe)
    except Exception:  # noqa: BLE001 - onnxsim reports the model's problem itself
        return
    types = {vi.name: vi.type for vi in inferred.graph.value_info}
    for out in missing:
        if out.name in types and types[out.name].tensor_type.HasField("shape"):
            out.type.CopyFrom(types[out.name])


def _type_name(code: int) -> str:
    try:
        return onnxpb.TensorProto.DataType.Name(code)
    except ValueError:
        return f"type {code}"


def _dynamic_batch(model, known: dict[str, tuple[int, ...]]) -> bytes:
    """The simplified model with a symbolic batch, for batched calibration runs.
    `known`: the per-sample shapes of Reshape outputs the walk computed (shape
    inference, which needs the onnx package, only runs for others)."""
    m = onnxpb.copy(model)
    for vi in [*m.graph.input, *m.graph.output]:
        if vi.type.tensor_type.shape.dim:
            d = vi.type.tensor_type.shape.dim[0]
            d.Clear()
            d.dim_param = "N"
    del m.graph.value_info[:]
    inits = {i.name: i for i in m.graph.initializer}
    dims = {name: [1, *shape] for name, shape in known.items()}
    if any(n.op_type == "Reshape" and n.output[0] not in dims for n in m.graph.node):
        import onnx

        try:
            static = onnx.shape_inference.infer_shapes(model)
        except Exception as exc:  # noqa: BLE001 - onnx raises its own kinds for a bad graph
            raise _fail("shapes", model.graph.name or "model",
                        f"shape inference failed: {str(exc).splitlines()[0][:200]}",
                        "re-export the model; every tensor needs a static shape") from None
        dims.update({vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
                     for vi in [*static.graph.value_info, *static.graph.output]
                     if vi.name not in dims})
    for node in m.graph.node:
        if node.op_type == "Reshape" and node.input[1] in inits:
            shape = onnxpb.to_array(inits[node.input[1]])
            out = dims.get(node.output[0])
            if shape.size and shape[0] in (0, 1) and out and all(out):
                # Every accepted reshape keeps the batch first: -1 takes the batch and
                # the rest is spelled out (exporters set allowzero, so 0 cannot copy).
                new = onnxpb.from_array(np.array([-1, *out[1:]], np.int64),
                                        node.input[1])
                inits[node.input[1]].CopyFrom(new)
                for a in node.attribute:
                    if a.name == "allowzero":
                        a.i = 0
    return m.SerializeToString()


def _load(path):
    """The model file, without the onnx package unless the file keeps tensors in
    external data files (onnx.load resolves those)."""
    model = onnxpb.load(str(path))
    if any(t.data_location == onnxpb.TensorProto.EXTERNAL for t in model.graph.initializer):
        import onnx

        model = onnxpb.from_onnx(onnx.load(str(path)))
        onnxpb.check_text(model)  # names are text from here on (see check_text)
    return model


def read_float_model(path_or_model, device: str | None = None,
                     dialect_options: dict | None = None) -> FloatModel:
    """Read a standard float ONNX model (path or onnx.ModelProto) as hardware layers
    (`dialect_options`: see dialects.canonicalize)."""
    is_model = isinstance(path_or_model, onnxpb.ModelProto) or \
        type(path_or_model).__name__ == "ModelProto"
    where = "model" if is_model else str(path_or_model)
    if is_model:
        model = onnxpb.from_onnx(path_or_model)
        model = onnxpb.copy(model)
    else:
        try:
            model = _load(path_or_model)
        except Exception as exc:  # noqa: BLE001
            raise Ai8xError("model.unreadable", where, f"not a readable ONNX file ({exc})",
                            "export the model with torch.onnx.export or tf2onnx",
                            exit_code=EXIT_USAGE) from None
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                default=0)
    if not OPSET_MIN <= opset <= OPSET_MAX:
        raise _fail("opset", where, f"opset {opset} (supported: {OPSET_MIN} to "
                    f"{OPSET_MAX})", f"export with opset_version between {OPSET_MIN} "
                    f"and {OPSET_MAX}")
    if any(o.domain == "ai8x" for o in model.opset_import):
        raise _fail("already-ai8x", where, "the model is already ai8x-ONNX",
                    "convert it directly: onnx2ai8x MODEL.onnx --device ...")
    from .validate import check_float_graph

    check_float_graph(model, opset)  # what the walk trusts, before it reads a node
    model = _simplify(model, where)
    canonical = canonicalize(model, dialect_options)
    model = canonical.model
    walker = _Walker(model, device)
    try:
        walker.run()
    except Ai8xError as exc:
        raise explained(exc, canonical) from None
    n = len(walker.layers)
    if n == 0:
        raise _fail("no-layer", where, "the model has no layer", "add a convolution")
    groups = tuple(walker.find(i) for i in range(n))
    net = Network(layers=tuple(walker.layers), input_shape=tuple(walker.input_shape),
                  device=device, name=model.graph.name or "network")
    return FloatModel(
        network=net, layers=tuple(walker.infos), outputs=tuple(walker.outputs),
        groups=groups, input_group=walker.find(-1), input_name=data_input(model).name,
        # the walk tracks model tensor = canonical.transpose(perm); the mapping needs the
        # inverse: canonical = model input.transpose(argsort(perm))
        input_perm=tuple(int(k) for k in np.argsort(walker.input_perm))
        if walker.input_perm else tuple(range(len(walker.model_shape) + 1)),
        input_model_shape=walker.model_shape, input_gain=walker.input_gain,
        input_offset=() if walker.input_offset is None else
        tuple(float(v) for v in walker.input_offset),
        model_bytes=_dynamic_batch(model, walker.reshapes),
        output_tensors=tuple(walker.output_tensors),
        rewrites=(*canonical.rewrites, *walker.rewrites), cpu_tail=tuple(walker.cpu_tail),
        output_perm=walker.output_perm if len(walker.outputs) == 1 else (),
        output_shape=walker.output_shape if len(walker.outputs) == 1 else (),
        qdq="qdq" in canonical.dialects, canonical=canonical)


__all__ = ["FloatLayer", "FloatModel", "read_float_model"]

"""Export a quantized `ai8x_torch` model to ai8x-ONNX.

The model is traced with `torch.fx` (the ai8x layer modules and element-wise modules are
leaves), each traced call becomes one hardware layer of an `onnx2ai8x.network.Network`,
and `custom_ops.builder.build_model` writes the ONNX: one representation, the same one
`import-izer` writes and the converter reads (docs/design.md, section 1).

What maps to what (the vendor's sidecar shapes, seed 004):

* a layer module -> a layer with its pooling, convolution/linear, shift and activation;
* `x.view(N, -1)` / `flatten` before a `Linear` -> that layer's `flatten: true`; a
  `view(N, -1, 1, 1)` before a plain 1x1 `Conv2d` -> a linear layer with `flatten: true`
  (the same sums);
* a view that keeps the channel count between layers (1-D `(C, L)` read as 2-D
  `(C, H, W)` or back) -> the next layer's input dimensions (the vendor's `in_dim`): each
  channel's values stay in order in their processor's memory;
* a plain `nn.MaxPool1d` / `nn.MaxPool2d` (no padding) -> the pooling of the
  convolution that alone reads it (as `FusedMaxPoolConv2d`), else a pooling-only layer;
* `torch.cat([...], dim=1)` -> the consumer's `in_sequences` (channel concatenation);
* an element-wise module (`Add`, `Sub`, `BitwiseOr`, `BitwiseXor`) whose result only
  feeds one layer module -> that layer's `eltwise`/`operands` (pooling then runs after
  the element-wise operation, `pool_first: false`, as PyTorch computes it); otherwise a
  pass-through element-wise layer of its own. This is the vendor's residual layout: its
  `ai85ressimplenet` writes `x = resid1(x, x_res); x = conv4(x)` as one `eltwise: add`
  convolution layer in network.yaml. A pooling-only module after the element-wise one
  likewise becomes one pass-through layer with `pool_first: false` (seed 004, `eltwise`,
  `pool_first`);
* a flatten/view of a model output (vendor model files end with `x.view(x.size(0), -1)`,
  the vendor's autoencoder with `x.view(N, 256, 3)`) is host-side reshaping: the ONNX
  output is the layer's output, `(N, C, H, W)`;
* node names are the PyTorch module names, dots kept (`features.0`, `res.conv1`): the
  name reads back to the module (`dict(model.named_modules())[layer.name]`), and ONNX
  allows dots in names. A module called more than once gets `<name>_1`, `<name>_2`, ....
* a frame loop (the vendor's actiontcn: the same layers on each `x[:, i]`, written into
  slot i of a `torch.zeros(N, F, C, 1, 1)` read as `(N, C, F)` by Conv1d layers) -> one
  frame's layers and a data buffer (`Network.data_buffer`, seed 000 "Rolling Buffers";
  ai8x_torch/frames.py finds and checks the loop);
* `Dropout` / `Identity` modules pass values through (inference); results no model output
  depends on are dropped.

Resolved as the vendor resolves a checkpoint without sidecar overrides (izer
checkpoint.py): `quantization` is the layer's weight bits, except 1-bit weights of only
-1/+1 on the MAX78002, which are binary (-1); `output_shift` is the final shift including
the implicit 8 - weight bits; a 1-D max pool keeps its dilation in `pool_dilation`.

Checked here, with an `Ai8xError` naming the module and a fix: untraceable forward(),
more than one input, plain torch operations between layers, non-ai8x modules, reshapes
moving values between channels other than the flattens above, padded plain pooling,
concatenation off the channel axis, 1 or more than
16 element-wise operands or operands of different shapes, unquantized layers, weights
beyond their bit width, calls PyTorch itself cannot run on the example input.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import fx, nn
from torch.overrides import TorchFunctionMode

from onnx2ai8x.devices import get_device
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.network import (
    ACT_ABS,
    ACT_RELU,
    DATA_BUFFER,
    ELTWISE_ADD,
    ELTWISE_OR,
    ELTWISE_SUB,
    ELTWISE_XOR,
    DataBuffer,
    Layer,
    Network,
    Op,
    unique_name,
)

from . import frames
from .device import current_device, using_device
from .frames import FACTORIES
from .modules import Eltwise, QuantizationAwareModule, hardware_params

_ELTWISE_CODES = {"add": ELTWISE_ADD, "sub": ELTWISE_SUB, "or": ELTWISE_OR,
                  "xor": ELTWISE_XOR}
_ACTIVATION_CODES = {None: None, "ReLU": ACT_RELU, "Abs": ACT_ABS}
# Modules that leave values unchanged at inference time.
_IDENTITY_MODULES = (nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d)


class _Proxy(fx.Proxy):
    """A traced value that can also be written into (`buf[:, i] = y`, the vendor's
    frame loop filling its buffer): the write becomes an `operator.setitem` node."""

    def __setitem__(self, index: object, value: object) -> None:
        self.tracer.create_proxy("call_function", operator.setitem, (self, index, value), {})


class _InputProxy(_Proxy):
    """The model input while tracing: its shape is the example input's, so code that
    counts with it (`for i in range(x.shape[1])`, `torch.zeros(x.shape[0], ...)`) runs
    with those numbers, as for the one shape the export is for."""

    @property
    def shape(self) -> torch.Size:
        return torch.Size(self.tracer.input_shape)

    @property
    def ndim(self) -> int:
        return len(self.tracer.input_shape)

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")  # the export runs on the CPU

    def size(self, dim: int | None = None) -> torch.Size | int:
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return self.ndim

    def __len__(self) -> int:
        return self.shape[0]

    def get_device(self) -> int:
        return -1  # PyTorch's answer for a CPU tensor


class _Factories(TorchFunctionMode):
    """Records the tensor factories forward() calls as nodes of `tracer`'s graph.

    fx traces only calls that receive a traced value; `torch.zeros(1, 15, 32, 1, 1)`
    receives none, so without this it would run once and become a constant, and the
    frame loop's writes into it would be lost. A function mode sees every torch call
    while tracing, and ends with the trace (nothing global stays changed)."""

    def __init__(self, tracer: fx.Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in FACTORIES:
            # where the tensor would live does not matter for the graph: only what it holds
            kept = {k: v for k, v in kwargs.items()
                    if k not in ("device", "pin_memory", "requires_grad")}
            return self.tracer.create_proxy("call_function", func, args, kept)
        return func(*args, **kwargs)


class _Tracer(fx.Tracer):
    """ai8x modules are leaves; a condition on the input's shape (`if x.shape[1] == 6:`,
    the vendor's face-ID models) is decided for the example input's shape, the one
    shape the export is for. Conditions on values still cannot be traced. Tensor
    factories and writes into tensors are traced (the vendor's frame loop)."""

    def __init__(self, input_shape: tuple[int, ...] | None = None) -> None:
        super().__init__()
        self.input_shape = input_shape

    def proxy(self, node: fx.Node) -> fx.Proxy:
        if node.op == "placeholder" and self.input_shape is not None and \
                not any(n.op == "placeholder" for n in node.graph.nodes if n is not node):
            return _InputProxy(node, self)
        return _Proxy(node, self)

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        if isinstance(m, (QuantizationAwareModule, Eltwise)):
            return True
        return super().is_leaf_module(m, qualname)

    def trace(self, root, concrete_args=None) -> fx.Graph:
        with _Factories(self):
            return super().trace(root, concrete_args)


_NOT_IN_LOOP = object()  # a node the frame loop does not handle


def _export_constants(model: nn.Module) -> dict[str, object]:
    """forward()'s arguments after the input that have defaults: constants for export.

    The vendor's model files select what to compute with plain Python arguments
    (`forward(self, x, return_bottleneck=False)` in the autoencoder); the accelerator
    runs one fixed graph, the one their defaults select. Arguments without a default
    stay inputs (and are refused: the accelerator takes one input).
    """
    import inspect

    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params[1:]
            if p.default is not inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _drop_constant_inputs(graph: fx.Graph, constants: dict[str, object]) -> None:
    """Remove the placeholders fx keeps for constant arguments, and the checks it
    attaches to them (the values are already folded into the traced code)."""
    for node in [n for n in graph.nodes if n.op == "placeholder"][1:]:
        # fx names a constant's placeholder after the argument, with a numeric suffix
        if str(node.target) not in constants and \
                str(node.target).rpartition("_")[0] not in constants:
            continue  # a true input: left for the one-input check to name
        doomed, todo = [], [node]
        while todo:
            cur = todo.pop()
            if cur in doomed:
                continue
            doomed.append(cur)
            todo.extend(cur.users)
        if any(n.op not in ("placeholder", "call_function") or
               getattr(n.target, "__name__", "") not in ("eq", "_assert", "_assert_is_none")
               for n in doomed[1:]):
            continue  # used as a value: left for the one-input check to name
        for n in sorted(doomed, key=lambda n: -list(graph.nodes).index(n)):
            graph.erase_node(n)


@dataclass(frozen=True)
class _Data:
    """Values in accelerator memory: the producing layers, concatenated on channels."""

    sources: tuple[int, ...]  # layer indices; -1 is the network input
    shape: tuple[int, ...]  # without the batch dimension


@dataclass(frozen=True)
class _Flat:
    """A flattened tensor, waiting for the linear layer that flattens it."""

    data: _Data


@dataclass(frozen=True)
class _Reshaped:
    """Accelerator data viewed with other channels: fine as a model output (the host
    reshapes the layer's output) or before a 1x1 convolution on 1x1 data (a flattening
    linear layer), nowhere else."""

    data: _Data
    shape: tuple[int, ...]


@dataclass(frozen=True)
class _PendingPool:
    """A plain max pooling not written yet: it fuses into the convolution that alone
    reads it, else it is a pooling-only layer of its own."""

    node: fx.Node
    stand_in: QuantizationAwareModule  # the ai8x pooling-only module computing the same


@dataclass(frozen=True)
class _Pending:
    """An element-wise result not written yet (it may fuse into the next layer)."""

    name: str
    module: Eltwise
    sources: tuple[int, ...]  # the operands' producing layers, concatenated
    count: int  # operands: one per source, or the sources' channels split equally
    shape: tuple[int, ...]


@dataclass(frozen=True)
class _Split:
    """Data split on the channel axis into `parts` equal parts (`x.split(c, dim=1)`)."""

    data: _Data
    parts: int


@dataclass(frozen=True)
class _Part:
    """Part `index` of a channel split, waiting for an element-wise module."""

    split: _Split
    index: int


# What forward() holds that lives in accelerator memory (or becomes a layer's input):
# indexing one of these selects part of a tensor, not part of a shape.
_ACCELERATOR_VALUES = (_Data, _Flat, _Reshaped, _PendingPool, _Pending)


def _fail(where: str, message: str, hint: str) -> Ai8xError:
    return Ai8xError("export.unsupported", where, message, hint)


def _shape(node: fx.Node) -> tuple[int, ...] | None:
    """The node's tensor shape without the batch dimension (None: not a tensor)."""
    shape = node.meta.get("ai8x.shape")
    return None if shape is None else shape[1:]


def _index_text(index: object) -> str:
    """A subscript as Python spells it: `:, :3` for (slice(None), slice(None, 3))."""
    if isinstance(index, tuple):
        return ", ".join(_index_text(i) for i in index)
    if isinstance(index, slice):
        parts = ["" if v is None else str(v) for v in (index.start, index.stop)]
        text = ":".join(parts)
        return text + (f":{index.step}" if index.step is not None else "")
    if index is Ellipsis:
        return "..."
    return str(getattr(index, "name", index))


def _args_text(args: tuple) -> str:
    return ", ".join(str(getattr(a, "name", a)) for a in args)


def _dims(shape: tuple[int, ...]) -> tuple[int, int]:
    """The vendor's (H, W) for 2-D data, (L, 1) for 1-D data, (1, 1) for vectors."""
    if len(shape) == 3:
        return shape[1], shape[2]
    if len(shape) == 2:
        return shape[1], 1
    return 1, 1


def _pointwise_on_one_pixel(module: QuantizationAwareModule, shape: tuple[int, ...]) -> bool:
    """A plain 1x1 Conv2d (no pooling, stride, padding or groups) reading (C, 1, 1)."""
    op = module.op
    return isinstance(op, nn.Conv2d) and module.pool is None and len(shape) == 3 and \
        tuple(shape[1:]) == (1, 1) and _pair(op.kernel_size, False) == (1, 1) and \
        _pair(op.padding, False) == (0, 0) and _pair(op.stride, False) == (1, 1) and \
        op.groups == 1


def _pooling_layer(where: str, pool: nn.MaxPool1d | nn.MaxPool2d) -> QuantizationAwareModule:
    """The ai8x pooling-only layer computing what a plain max pooling module computes.

    Max pooling picks values, so the plain module gives the same integers as the
    hardware's pooling-only layer (seed 004, `operation: none` with `max_pool`); a
    padded, ceil-mode or index-returning pooling has no hardware form.
    """
    from . import modules

    one_d = isinstance(pool, nn.MaxPool1d)
    padding = _pair(pool.padding, False)
    if padding != (0, 0) or pool.ceil_mode or pool.return_indices:
        raise _fail(where, f"{type(pool).__name__} with padding {pool.padding}, ceil_mode "
                    f"{pool.ceil_mode}, return_indices {pool.return_indices}: the "
                    "accelerator pools without padding, rounding sizes down",
                    f"use padding=0 and ceil_mode=False (ai8x_torch.{type(pool).__name__})")
    cls = modules.FAMILIES["MaxPool1d" if one_d else "MaxPool2d"]
    return cls(pool.kernel_size, pool.stride, dilation=pool.dilation)


def _pair(v, one_d: bool) -> tuple[int, int]:
    if isinstance(v, (tuple, list)):
        return (int(v[0]), 1) if one_d else (int(v[0]), int(v[-1]))
    return (int(v), 1) if one_d else (int(v), int(v))


class _Shapes(fx.Interpreter):
    """Runs the traced graph once on the example input and records each tensor's shape
    (`node.meta["ai8x.shape"]`); a call PyTorch cannot run is an Ai8xError naming the
    module, with no traceback."""

    def __init__(self, gm: fx.GraphModule) -> None:
        super().__init__(gm)
        self.extra_traceback = False

    def run_node(self, n: fx.Node):
        try:
            result = super().run_node(n)
        except Ai8xError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever PyTorch raised for this call
            lines = str(exc).strip().splitlines()
            where = str(n.target) if n.op == "call_module" else n.name
            raise _fail(where, "PyTorch cannot run this call on the example input ("
                        f"{lines[0] if lines else type(exc).__name__})",
                        "check the example input's shape (1, C, H, W) / (1, C, L) and "
                        "that each module receives the shape it was built for") from None
        if isinstance(result, torch.Tensor):
            n.meta["ai8x.shape"] = tuple(int(d) for d in result.shape)
        return result


class _Exporter:
    def __init__(self, model: nn.Module, example: torch.Tensor, device: str | None) -> None:
        self.model = model
        self.device = device
        self.modules = dict(model.named_modules())
        # a numpy sample (as sample.npy holds it) is as good as a tensor: only its shape
        # matters
        example = torch.as_tensor(np.asarray(example) if not isinstance(
            example, torch.Tensor) else example).detach().cpu()
        constants = _export_constants(model)
        try:
            graph = _Tracer(tuple(example.shape)).trace(model,
                                                       concrete_args=constants or None)
            _drop_constant_inputs(graph, constants)
        except Exception as exc:  # noqa: BLE001 - fx raises many kinds for dynamic code
            raise _fail(type(model).__name__, f"the model cannot be traced ({exc})",
                        "keep forward() a fixed sequence of ai8x module calls, "
                        "torch.cat, flatten and view") from None
        inputs = [n for n in graph.nodes if n.op == "placeholder"]
        if len(inputs) != 1:
            raise _fail(type(model).__name__, f"forward() takes {len(inputs)} inputs",
                        "give forward() one input tensor, the accelerator's input")
        # a frame loop (the vendor's actiontcn) takes (1, F, C, H, W): F frames of the
        # accelerator's input, one per inference
        self.loop = frames.find(graph, tuple(example.shape))
        if example.dim() - (self.loop is not None) not in (3, 4):
            raise _fail(inputs[0].name, f"example input shape {tuple(example.shape)} is "
                        "neither (1, C, H, W) nor (1, C, L)", "pass an example input of "
                        "shape (1, C, H, W) or (1, C, L)")
        self.gm = fx.GraphModule(model, graph)
        with torch.no_grad(), using_device(current_device(), simulate=False):
            try:
                _Shapes(self.gm).run(example.to(torch.float32))
            except Ai8xError as err:
                if self.loop is None:
                    raise
                d = err.diagnostics[0]
                raise _fail(d.where, d.message, "the model loops over x.shape[1] frames: "
                            "pass an example input of shape (1, F, C, H, W), F frames of "
                            "the accelerator's input") from None
        self.layers: list[Layer] = []
        # Element-wise results already written as their own pass-through layer.
        self.written: dict[_Pending | _PendingPool, _Data] = {}
        self.values: dict[fx.Node, object] = {}
        self.users: dict[fx.Node, int] = {n: len(n.users) for n in graph.nodes}
        self.outputs: list[int] = []
        self.input_shape: tuple[int, ...] = ()

    # -- values ------------------------------------------------------------------------

    def _data(self, value: object, where: str) -> _Data:
        if isinstance(value, _Data):
            return value
        if isinstance(value, _Pending):
            if value not in self.written:
                self.written[value] = self._write_eltwise(value)
            return self.written[value]
        if isinstance(value, _PendingPool):
            if value not in self.written:
                self.written[value] = self._layer(value.node, value.stand_in)
            return self.written[value]
        if isinstance(value, _Flat):
            raise _fail(where, "a flattened tensor is used by something other than a "
                        "Linear layer", "flatten only right before an ai8x.Linear")
        if isinstance(value, _Reshaped):
            raise _fail(where, f"reshape {value.data.shape} -> {value.shape} moves values "
                        "between channels, which no hardware layer does between layers",
                        "keep the channel count when reshaping between layers (a new "
                        "spatial shape, the vendor's in_dim), flatten only right before "
                        "an ai8x.Linear, or reshape the model's output on the host")
        if isinstance(value, (_Split, _Part)):
            raise _fail(where, "a channel split is used by something other than one "
                        "element-wise module over all its parts",
                        "split channels only to feed ai8x_torch.Add / Sub / BitwiseOr / "
                        "BitwiseXor with p[0], p[1], ...")
        raise _fail(where, "the value is not a tensor the accelerator holds",
                    "pass only tensors between ai8x modules")

    def _seq(self, data: _Data) -> tuple[int, ...] | None:
        prev = len(self.layers) - 1
        return None if data.sources == (prev,) else data.sources

    def _write_eltwise(self, p: _Pending) -> _Data:
        """A pass-through element-wise layer (op none, seed 004 `eltwise`)."""
        c = p.shape[0]
        dims = _dims(p.shape)
        sources = p.sources
        lay = Layer(name=self._unique(p.name), operator=Op.NONE, input_channels=c,
                    output_channels=c, input_dim=dims, pooled_dim=dims, output_dim=dims,
                    eltwise=_ELTWISE_CODES[p.module.op_name], operands=p.count,
                    quantization=0, in_sequences=self._seq(_Data(sources, p.shape)))
        return self._append(lay, p.shape)

    def _append(self, lay: Layer, shape: tuple[int, ...]) -> _Data:
        self.layers.append(lay)
        return _Data((len(self.layers) - 1,), shape)

    def _unique(self, name: str) -> str:
        return unique_name(name.replace("/", "_") or "layer", {lay.name for lay in self.layers})

    # -- layer modules -----------------------------------------------------------------

    def _layer(self, node: fx.Node, module: QuantizationAwareModule) -> _Data:
        name = str(node.target)
        if getattr(module, "eltwise", None) is not None or len(node.args) != 1:
            raise _fail(name, "a layer module called with more than one tensor",
                        "combine the tensors with ai8x_torch.Add / Sub / BitwiseOr / "
                        "BitwiseXor and pass the result to the layer (the export fuses "
                        "them into one hardware layer)")
        arg = self.values[node.args[0]]
        out_shape = _shape(node)
        eltwise, operands, pool_first = 0, 1, True
        flatten = as_linear = False
        pool_module = module.pool
        if isinstance(arg, _PendingPool) and self._fuses(node, arg, module):
            # Pooling then convolution is what one hardware layer does (seed 004,
            # `max_pool` on a convolution layer); a pooling-only layer of more than 64
            # channels is not possible on the MAX78000 (legalize `pool-channels`).
            data = self._data(self.values[arg.node.args[0]], name)
            in_shape, pool_module = data.shape, arg.stand_in.pool
        elif isinstance(arg, _Pending) and self._fuses_eltwise(node, module):
            data = _Data(arg.sources, arg.shape)
            eltwise, operands = _ELTWISE_CODES[arg.module.op_name], arg.count
            in_shape = arg.shape
            # PyTorch pools the element-wise result: the vendor's pool_first: false.
            pool_first = module.pool is None
        elif isinstance(arg, _Reshaped) and _pointwise_on_one_pixel(module, arg.shape):
            # (C, H, W) viewed as (C*H*W, 1, 1) into a 1x1 convolution is a linear layer
            # over the flattened data: the vendor's `flatten: true` (seed 004), each
            # output the weighted sum of all C*H*W values in PyTorch's flatten order.
            data, flatten, as_linear = arg.data, True, True
            in_shape = arg.data.shape
        elif isinstance(arg, _Flat):
            if not isinstance(module.op, nn.Linear):
                raise _fail(name, "a flattened tensor feeds a layer that is not Linear",
                            "flatten only right before an ai8x.Linear")
            # Flattening data without spatial extent, (C, 1, 1), changes nothing: the
            # linear layer reads its C channels directly (flatten: false, as the vendor
            # resolves an MLP on 1x1 input).
            data, flatten = arg.data, int(np.prod(arg.data.shape[1:])) > 1
            in_shape = arg.data.shape
        else:
            data = self._data(arg, name)
            in_shape = data.shape
        op = module.op
        one_d = isinstance(op, nn.Conv1d) or (op is None and isinstance(
            pool_module, (nn.MaxPool1d, nn.AvgPool1d)))
        in_ch = in_shape[0]
        if isinstance(op, nn.Linear) and not flatten and int(np.prod(in_shape[1:])) > 1:
            # PyTorch would apply the matrix along the last axis only, which no hardware
            # layer does.
            raise _fail(name, f"Linear applied to a {in_shape} tensor",
                        "flatten it first: x.view(x.size(0), -1)")
        if isinstance(op, nn.Linear) and not flatten:
            in_ch = op.in_features
            in_shape = (op.in_features,)
        pooled = _dims(in_shape)
        pool, pool_stride, pool_dil, avg = (1, 1), (1, 1), (1, 1), False
        if pool_module is not None:
            p = pool_module
            pool = _pair(p.kernel_size, one_d)
            pool_stride = _pair(p.stride, one_d)
            pool_dil = _pair(getattr(p, "dilation", 1), one_d)
            avg = isinstance(p, (nn.AvgPool1d, nn.AvgPool2d))
            pooled = tuple((d - dl * (k - 1) - 1) // s + 1 for d, k, s, dl in
                           zip(_dims(in_shape), pool, pool_stride, pool_dil, strict=True))
            if one_d:
                pooled = (pooled[0], 1)
            if pool == (1, 1):
                # A 1x1 window is no pooling, only a stride (design.md section 1: MaxPool
                # with a 1x1 kernel); average and dilation mean nothing there.
                pool_dil, avg = (1, 1), False
        fields = dict(name=self._unique(name), input_channels=in_ch,
                      input_dim=_dims(in_shape), pooled_dim=pooled, pool=pool,
                      pool_stride=pool_stride, pool_dilation=pool_dil, pool_average=avg,
                      pool_first=pool_first, eltwise=eltwise, operands=operands,
                      in_sequences=self._seq(data))
        if op is None:
            if module.activation is not None:
                raise _fail(name, "a pooling-only layer cannot have an activation",
                            "remove the activation")
            lay = Layer(operator=Op.NONE, output_channels=in_ch, output_dim=pooled,
                        quantization=0, **fields)
            return self._append(lay, out_shape)
        try:
            hw = hardware_params(module)
        except ValueError as exc:
            raise _fail(name, str(exc), "call ai8x_torch.quantize_model(model) before "
                        "exporting, or load a quantized (-q) checkpoint") from None
        if isinstance(op, nn.Linear) or as_linear:
            operator_code = Op.LINEAR
            kernel, padding, stride, dilation, groups = (1, 1), (0, 0), (1, 1), (1, 1), 1
            out_ch, out_dim = hw["weights"].shape[0], (1, 1)
            if as_linear:
                hw = {**hw, "weights": hw["weights"].reshape(out_ch, -1)}
        else:
            operator_code = {nn.Conv1d: Op.CONV1D, nn.Conv2d: Op.CONV2D,
                             nn.ConvTranspose2d: Op.CONVTRANSPOSE2D}[type(op)]
            kernel = _pair(op.kernel_size, one_d)
            padding = _pair(op.padding, one_d)
            if one_d:
                padding = (padding[0], 0)  # 1-D padding has no second dimension
            stride = _pair(op.stride, one_d)
            dilation = _pair(op.dilation, one_d)
            groups = op.groups
            out_ch = op.out_channels
            out_dim = _dims(out_shape)
        output_padding = (0, 0)
        if operator_code == Op.CONVTRANSPOSE2D:
            output_padding = _pair(op.output_padding, False)
        lay = Layer(operator=operator_code, output_channels=out_ch, output_dim=out_dim,
                    kernel_size=kernel, padding=padding, stride=stride, dilation=dilation,
                    conv_groups=groups, activation=_ACTIVATION_CODES[module.activation],
                    output_shift=hw["output_shift"],
                    quantization=self._quantization(name, hw["weights"], hw["weight_bits"]),
                    output_width=32 if module.wide else 8, flatten=flatten,
                    output_padding=output_padding,
                    weights=hw["weights"], bias=hw["bias"], bias_hw=hw["bias_hw"], **fields)
        return self._append(lay, out_shape)

    def _fuses_eltwise(self, node: fx.Node, module: QuantizationAwareModule) -> bool:
        """An element-wise result this layer alone reads becomes its `eltwise`, unless
        the layer inserts into the data buffer: that layer reads one layer's result, as
        in the vendor's one documented use (seed 000, Rolling Buffers: conv5 reading
        res4_out), and the element-wise result stays a pass-through layer."""
        inserts = self.loop is not None and self.loop.insert.args[2] is node
        return self.users[node.args[0]] == 1 and not inserts and \
            (module.op is not None or module.pool is not None)

    def _fuses(self, node: fx.Node, pending: _PendingPool,
               module: QuantizationAwareModule) -> bool:
        """A plain max pooling fuses into this layer: the layer alone reads it, pools
        nothing itself, and convolves data of the pooling's dimensionality."""
        one_d = isinstance(pending.stand_in.pool, nn.MaxPool1d)
        conv = nn.Conv1d if one_d else nn.Conv2d
        return self.users[node.args[0]] == 1 and module.pool is None and \
            type(module.op) is conv and \
            isinstance(self.values[pending.node.args[0]], _Data)

    def _quantization(self, name: str, weights: np.ndarray, bits: int) -> int:
        """The layer's resolved `quantization`, as the vendor resolves it from a checkpoint.

        1-bit weights of only -1 and +1 are binary weights (quantization -1) on the
        MAX78002, the only device with binary weights (vendor izer/checkpoint.py: all
        |w| == 1 there means binary; the final shift is the same, 8 - 1 = 7). Values that
        do not fit the bit width are refused: the kernel memory holds `bits` bits.
        """
        if bits == 1 and self.device == "MAX78002" and weights.size and \
                np.all(np.abs(weights) == 1):
            return -1
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        if weights.size and (weights.min() < lo or weights.max() > hi):
            extra = " (binary -1/+1 weights need the MAX78002)" if bits == 1 and \
                np.all(np.abs(weights) == 1) else ""
            raise _fail(name, f"weights in [{int(weights.min())}, {int(weights.max())}] do "
                        f"not fit {bits}-bit weights [{lo}, {hi}]{extra}",
                        "quantize the model with ai8x_torch.quantize_model, or raise the "
                        "layer's weight_bits")
        return bits

    # -- the graph ---------------------------------------------------------------------

    def run(self) -> Network:
        for node in self.gm.graph.nodes:
            self.values[node] = self._node(node)
        self._drop_unused()
        buffer = None
        if self.loop is not None:
            buffer = DataBuffer(unique_name("buffer", {lay.name for lay in self.layers}),
                                self.loop.channels, self.loop.frames)
        return Network(layers=tuple(self.layers), input_shape=self.input_shape,
                       name=type(self.model).__name__, data_buffer=buffer)

    def _drop_unused(self) -> None:
        """Remove layers no output depends on (a module result forward() never uses):
        the model's outputs do not need them, and a layer whose result nothing reads has
        no place in the graph."""
        def sources(i: int) -> tuple[int, ...]:
            seqs = self.layers[i].in_sequences
            return (i - 1,) if seqs is None else seqs

        live: set[int] = set()
        # the buffer's shift and insert layers feed the next inference
        todo = list(self.outputs) + [i for i, lay in enumerate(self.layers)
                                     if lay.buffer_shift or lay.buffer_insert]
        while todo:
            i = todo.pop()
            if i >= 0 and i not in live:
                live.add(i)
                todo.extend(sources(i))
        if len(live) == len(self.layers):
            return
        keep = sorted(live)
        index = {old: new for new, old in enumerate(keep)} | {-1: -1, DATA_BUFFER: DATA_BUFFER}
        layers = []
        for new, old in enumerate(keep):
            seqs = tuple(index[s] for s in sources(old))
            layers.append(replace(self.layers[old],
                                  in_sequences=None if seqs == (new - 1,) else seqs))
        self.layers = layers
        self.outputs = [index[o] for o in self.outputs]

    def _node(self, node: fx.Node) -> object:
        where = node.name
        if self.loop is not None:
            value = self._loop_node(node, self.loop)
            if value is not _NOT_IN_LOOP:
                return value
        if node.op == "placeholder":
            if self.input_shape:
                raise _fail(where, "the model takes more than one input",
                            "give forward() one input tensor")
            self.input_shape = _shape(node) or ()
            if len(self.input_shape) not in (2, 3):
                raise _fail(where, f"input shape {self.input_shape} is neither (C, H, W) "
                            "nor (C, L)", "pass an example input of shape (1, C, H, W) "
                            "or (1, C, L)")
            return _Data((-1,), self.input_shape)
        if node.op == "output":
            result = node.args[0]
            results = result if isinstance(result, (tuple, list)) else (result,)
            for r in results:
                value = self.values.get(r)
                if isinstance(value, (_Flat, _Reshaped)):
                    value = value.data  # host-side reshaping of the layer's output
                data = self._data(value, str(r))
                if len(data.sources) != 1 or data.sources[0] < 0:
                    raise _fail(str(r), "a model output must be the output of one layer",
                                "return a layer module's result")
                self.outputs.append(data.sources[0])
            return None
        if node.op == "call_module":
            module = self.modules[str(node.target)]
            if isinstance(module, QuantizationAwareModule):
                return self._layer(node, module)
            if isinstance(module, Eltwise):
                parts = [self.values.get(a) for a in node.args]
                if parts and all(isinstance(v, _Part) for v in parts):
                    return self._packed(node, module, parts)
                ops = tuple(self._data(self.values[a], str(node.target)) for a in node.args)
                if not 2 <= len(ops) <= 16:
                    raise _fail(str(node.target), f"{len(ops)} operands; the hardware "
                                "combines 2 to 16", "split the operation")
                # The hardware combines equal-shaped data word by word: no broadcasting
                # (seed 000, "Multiple Arguments (Element-wise Operations)").
                if len({d.shape for d in ops}) != 1:
                    raise _fail(str(node.target), "operands of different shapes "
                                f"{sorted({d.shape for d in ops})}",
                                "give every operand the same (C, H, W) / (C, L) shape")
                return _Pending(str(node.target), module,
                                tuple(s for d in ops for s in d.sources), len(ops),
                                _shape(node))
            if isinstance(module, _IDENTITY_MODULES):
                return self.values[node.args[0]]
            if isinstance(module, nn.Flatten):
                return self._flatten(node)
            if isinstance(module, (nn.MaxPool1d, nn.MaxPool2d)):
                return _PendingPool(node, _pooling_layer(str(node.target), module))
            raise _fail(str(node.target), f"module {type(module).__name__} is not an ai8x "
                        "layer", "use the ai8x_torch module for it (e.g. "
                        "ai8x_torch.FusedConv2dReLU instead of nn.Conv2d + nn.ReLU)")
        if node.op == "call_method":
            if node.target in ("view", "reshape", "flatten"):
                return self._flatten(node)
            if node.target in ("split", "chunk"):
                return self._split(node)
            if node.target in ("narrow", "select", "index_select") and \
                    isinstance(self.values.get(node.args[0]), _ACCELERATOR_VALUES):
                raise self._slicing(node)
            if node.target in ("size", "contiguous", "dim"):
                return self.values.get(node.args[0]) if node.target == "contiguous" else None
        if node.op == "call_function":
            if node.target in (torch.flatten, torch.reshape):
                return self._flatten(node)
            if node.target in (torch.cat, torch.concat):
                return self._concat(node)
            if node.target in (torch.split, torch.chunk):
                return self._split(node)
            if node.target is operator.getitem and \
                    isinstance(self.values.get(node.args[0]), _Split):
                split, index = self.values[node.args[0]], node.args[1]
                if not isinstance(index, int):
                    raise _fail(node.name, f"part {index!r} of a channel split",
                                "index the parts one by one: p[0], p[1], ...")
                return _Part(split, index % split.parts)
            if node.target in (operator.getitem, torch.narrow, torch.select) and \
                    isinstance(self.values.get(node.args[0]), _ACCELERATOR_VALUES):
                raise self._slicing(node)
            if node.target in (operator.getitem, getattr, len):
                return None
        if node.op == "get_attr":
            return None
        raise _fail(where, f"`{node.target}` between layers has no hardware equivalent",
                    "compute between layers only with ai8x modules, torch.cat, flatten "
                    "and view")

    def _loop_node(self, node: fx.Node, loop: frames.FrameLoop) -> object:
        """A node of the frame loop: the accelerator runs one frame (the first; the others
        are copies of it) per inference, its result goes into the data buffer, the
        buffer read as (C, F) is what the temporal layers read (seed 000, Rolling
        Buffers)."""
        if node in loop.copies or node.op == "call_function" and node.target in FACTORIES:
            return None
        if node.op == "placeholder":
            self.input_shape = loop.frame_shape
            if len(self.input_shape) not in (2, 3):
                raise _fail(node.name, f"frame shape {self.input_shape} is neither (C, H, W)"
                            " nor (C, L)", "pass an example input of shape (1, F, C, H, W)")
            return None  # only its frames x[:, i] are read (frames.find checked)
        if node is loop.first_slice:
            return _Data((-1,), loop.frame_shape)
        if node is loop.insert:
            self._insert(node, loop)
            return None
        if node in loop.rearrange:
            last = node is loop.rearrange[-1]
            return _Data((DATA_BUFFER,), (loop.channels, loop.frames)) if last else None
        return _NOT_IN_LOOP

    def _insert(self, node: fx.Node, loop: frames.FrameLoop) -> None:
        """The frame's result goes into the buffer: its layer gets buffer_insert 1, after
        a pass-through layer shifting the buffer's other F - 1 positions down by one
        (the oldest frame drops out), placed right before it as the vendor's sidecar
        places its `buffer_shift` layer (ai85-kinetics-actiontcn.yaml, layers 16-17)."""
        data = self._data(self.values[node.args[2]], node.name)
        last = len(self.layers) - 1
        if data.sources != (last,) or last < 0 or self.users[node.args[2]] != 1:
            raise _fail(node.name, "the value written into the buffer is not the frame's "
                        "last layer's result, read by nothing else", "write the result of "
                        "the frame's last ai8x layer into the buffer, and use it only there")
        if data.shape[0] != loop.channels or int(np.prod(data.shape)) != loop.channels:
            raise _fail(node.name, f"a frame result of shape {data.shape} is written into "
                        f"a buffer slot of {loop.channels} channels x 1 (PyTorch broadcasts"
                        "; the accelerator copies the layer's output as it is)",
                        f"write a ({loop.channels}, 1, 1) result into each slot")
        lay = self.layers[last]
        seqs = (last - 1,) if lay.in_sequences is None else lay.in_sequences
        rest = (loop.frames - 1, 1)
        shift = Layer(name=self._unique("buffer_shift"), operator=Op.NONE,
                      input_channels=loop.channels, output_channels=loop.channels,
                      input_dim=rest, pooled_dim=rest, output_dim=rest, quantization=0,
                      in_sequences=(DATA_BUFFER,), buffer_shift=1)
        self.layers[last:] = [shift, replace(lay, in_sequences=seqs, buffer_insert=1)]

    def _slicing(self, node: fx.Node) -> Ai8xError:
        """Indexing or slicing accelerator data (`x[:, :3]`, `x.narrow(...)`).

        No layer selects part of a tensor: a layer reads every channel its processors
        hold, all rows and columns its counters span, from where the data was written
        (seed 004: `processors`, `in_dim`); the network input arrives whole, loaded into
        data memory or streamed through the FIFOs, before any layer runs.
        """
        src = node.args[0]
        if isinstance(node.target, str):
            expr = f"{src.name}.{node.target}({_args_text(node.args[1:])})"
        elif node.target is operator.getitem:
            expr = f"{src.name}[{_index_text(node.args[1])}]"
        else:
            expr = f"torch.{node.target.__name__}({src.name}, {_args_text(node.args[1:])})"
        readers = sorted(str(u.target) for u in node.users if u.op == "call_module")
        read_by = f", read by `{readers[0]}`" if readers else ""
        value = self.values[src]
        data = value.data if isinstance(value, (_Flat, _Reshaped)) else value
        if isinstance(data, _Data) and data.sources == (-1,):
            shape = _shape(node)
            want = f" of shape {(1, *shape)}" if shape else ""
            return _fail(expr, f"slicing the network input (`{expr}`{read_by}) is not "
                         "supported: the accelerator takes the input whole, as its "
                         "first layer's processors hold it", "slice the data on the host "
                         f"and give the model the sliced input (an example input{want}), "
                         "or remove the slice")
        return _fail(expr, f"slicing a layer's output (`{expr}`{read_by}) is not "
                     "supported: a layer reads all the channels, rows and columns its "
                     "producer wrote", "let the producing layer compute only the part "
                     "you need (fewer output channels), or split channels with "
                     "x.split(c, dim=1) into an ai8x_torch element-wise module")

    def _split(self, node: fx.Node) -> _Split:
        """Equal channel parts of accelerator data, for one element-wise layer's operands
        (the vendor's `operands` read from one input: its channels split equally, in
        order; seed 004 `operands`)."""
        data = self._data(self.values[node.args[0]], node.name)
        how = node.args[1] if len(node.args) > 1 else node.kwargs.get(
            "split_size_or_sections", node.kwargs.get("split_size", node.kwargs.get("chunks")))
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
        c = data.shape[0]
        if dim not in (1, 1 - len(data.shape) - 1):
            raise _fail(node.name, f"split along dimension {dim}",
                        "split channels only: x.split(c, dim=1)")
        chunk = node.target in ("chunk", torch.chunk)
        if isinstance(how, (list, tuple)):
            sizes = [int(v) for v in how]
        elif chunk and isinstance(how, int) and how > 0 and c % how == 0:
            sizes = [c // how] * how
        elif not chunk and isinstance(how, int) and how > 0:
            sizes = [how] * (-(-c // how))
        else:
            sizes = []
        if len(sizes) < 2 or len(set(sizes)) != 1 or sum(sizes) != c:
            raise _fail(node.name, f"a channel split of {c} channels into {sizes or how}",
                        "split the channels into 2 to 16 equal parts for an element-wise "
                        "module")
        return _Split(data, len(sizes))

    def _packed(self, node: fx.Node, module: Eltwise, parts: list[_Part]) -> _Pending:
        """An element-wise module over all parts of one channel split, in order."""
        split = parts[0].split
        if any(p.split != split for p in parts) or \
                [p.index for p in parts] != list(range(split.parts)):
            raise _fail(str(node.target), "the operands are not all parts of one channel "
                        "split, in order", "pass p[0], p[1], ... of one x.split(c, dim=1)")
        if not 2 <= split.parts <= 16:
            raise _fail(str(node.target), f"{split.parts} operands; the hardware combines "
                        "2 to 16", "split into fewer parts")
        return _Pending(str(node.target), module, split.data.sources, split.parts,
                        _shape(node))

    def _flatten(self, node: fx.Node) -> object:
        data = self._data(self.values[node.args[0]], node.name)
        shape = _shape(node)
        if shape == data.shape:
            return data
        if shape is not None and len(shape) == 1 and int(np.prod(data.shape)) == shape[0]:
            return _Flat(data)
        if shape is not None and len(shape) in (2, 3) and \
                int(np.prod(shape)) == int(np.prod(data.shape)):
            if shape[0] == data.shape[0]:
                # Each channel's values stay in order in their processor's memory; only
                # the layer reading them sees another H x W (the vendor's `in_dim`, seed
                # 004), e.g. 1-D (16, 128) read as 2-D (16, 16, 8).
                return _Data(data.sources, shape)
            return _Reshaped(data, shape)
        raise _fail(node.name, f"reshape {data.shape} -> {shape} has no hardware "
                    "equivalent", "only flatten (N, C, ...) -> (N, C * ...) before a Linear")

    def _concat(self, node: fx.Node) -> _Data:
        parts = node.args[0]
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
        if dim not in (1, -3 if len(_shape(node) or ()) == 3 else 1):
            raise _fail(node.name, f"concatenation along dimension {dim}",
                        "the accelerator concatenates channels only: torch.cat(..., dim=1)")
        datas = [self._data(self.values[p], node.name) for p in parts]
        return _Data(tuple(s for d in datas for s in d.sources), _shape(node))


def to_network(model: nn.Module, example_input: torch.Tensor, *,
               device: str | None = None) -> tuple[Network, list[int]]:
    """The hardware layers of a quantized model, and the indices of its output layers.

    `device` ('MAX78000' / 'MAX78002'; default: the selected ai8x_torch device) decides
    what the device supports (binary weights on the MAX78002).
    """
    exporter = _Exporter(model, example_input, _device_name(device))
    network = exporter.run()
    return Network(layers=network.layers, input_shape=network.input_shape,
                   device=exporter.device, name=network.name,
                   data_buffer=network.data_buffer), exporter.outputs


def _device_name(device: str | None) -> str | None:
    """The part name the model records: `device` resolved by the converter's one
    resolver (onnx2ai8x.devices.get_device: MAX78000/MAX78002 and their aliases; an
    unknown name is an error), else the selected ai8x_torch device's (none for the AI84,
    which the converter does not target)."""
    if device is None:
        return current_device().partnum if current_device().device != 84 else None
    return get_device(device).name


def export_onnx(model: nn.Module, example_input: torch.Tensor | np.ndarray, path: str | Path, *,
                device: str | None = None, doc: str | None = None) -> Path:
    """Write the quantized `model` as ai8x-ONNX to `path` and return the path.

    `example_input` has the accelerator input's shape, (1, C, H, W) or (1, C, L); its
    values do not matter. The model must be quantized (`quantize_model`, or a `-q`
    checkpoint loaded). `device` ('MAX78000' / 'MAX78002') is recorded in the model;
    by default the selected `ai8x_torch` device's. `doc` is the model's doc string.
    Anything without a hardware equivalent raises `Ai8xError` naming the module.

    The model is not passed through onnxsim: the builder writes no shape arithmetic to
    fold, and onnxsim's optimizer deletes the `Add` of an all-zero bias (the layer would
    read back without a bias: different bias memory) and adds `onnxsim.*` metadata.
    """
    from custom_ops.builder import build_model

    device = _device_name(device)
    was_training = model.training
    model.eval()
    try:
        network, outputs = to_network(model, example_input, device=device)
    finally:
        model.train(was_training)
    proto = build_model(network, doc=doc or f"{network.name}, exported by ai8x_torch",
                        avg_pool_rounding=current_device().round_avg, outputs=outputs)
    if device:
        _set_meta(proto, "ai8x.device", device)
    onnx.checker.check_model(proto, full_check=True)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(proto.SerializeToString())
    return path


def _set_meta(proto: onnx.ModelProto, key: str, value: str) -> None:
    for prop in proto.metadata_props:
        if prop.key == key:
            prop.value = value
            return
    prop = proto.metadata_props.add()
    prop.key, prop.value = key, value

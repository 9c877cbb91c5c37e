"""Network -> ai8x-ONNX: the one writer of the representation in docs/design.md section 1.

Every hardware layer becomes, in order, pooling of each operand, the element-wise
combination, the convolution/linear part (exact `ConvInteger` / `MatMulInteger`), the
bias, and the output numerics (`ai8x.OutputShift`, activation, `ai8x.Clamp`). Tensors
between layers are int8 `(N, C, H, W)` or `(N, C, L)`; `N` is symbolic.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from onnx2ai8x import onnxpb as helper
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.legalize.rules.connectivity import data_buffer as data_buffer_rule
from onnx2ai8x.network import (
    ACT_ABS,
    ACT_RELU,
    DATA_BUFFER,
    ELTWISE_ADD,
    ELTWISE_MUL,
    ELTWISE_NAMES,
    ELTWISE_OR,
    ELTWISE_SUB,
    ELTWISE_XOR,
    Layer,
    Network,
    Op,
)
from onnx2ai8x.network import (
    output_layers as network_output_layers,
)
from onnx2ai8x.onnxpb import ModelProto, NodeProto, TensorProto, ValueInfoProto

from .ops import DOMAIN, OPSET, ROUNDING_NEAREST, ROUNDING_TRUNCATE, VERSION, functions

INPUT_NAME = "input"
BATCH = "N"
IR_VERSION = 9  # opset 19's IR version; readable by every onnxruntime that has opset 19


@dataclass(frozen=True)
class _Tensor:
    """A tensor of the graph being built: its name, element type and per-sample shape."""

    name: str
    dtype: int
    shape: tuple[int, ...]  # without the batch dimension


class _Graph:
    """Collects nodes and initializers; one per build (no shared state)."""

    def __init__(self) -> None:
        self.nodes: list[NodeProto] = []
        self.inits: list[TensorProto] = []
        self.names: set[str] = set()

    def node(self, op: str, inputs: Sequence[str], name: str, domain: str = "",
             **attrs) -> str:
        """Add a node named `name` whose single output tensor is also called `name`."""
        if name in self.names:
            raise Ai8xError("network.duplicate-name", name,
                            "two graph nodes would get the same name",
                            "give every layer a unique name")
        self.names.add(name)
        self.nodes.append(helper.make_node(op, list(inputs), [name], name=name,
                                           domain=domain, **attrs))
        return name

    def const(self, name: str, array: np.ndarray, dtype: int) -> str:
        self.inits.append(helper.from_array(
            np.asarray(array, dtype=helper.tensor_dtype_to_np_dtype(dtype)), name))
        return name


def _effective_inputs(index: int, lay: Layer) -> tuple[int, ...]:
    return tuple(lay.in_sequences) if lay.in_sequences is not None else (index - 1,)


def output_layers(network: Network) -> list[int]:
    """The network's output layers (onnx2ai8x.network.output_layers), as a list."""
    return list(network_output_layers(network))


def _is_1d(lay: Layer) -> bool:
    return lay.operator.one_d


def _reshape(g: _Graph, t: _Tensor, shape: tuple[int, ...], name: str) -> _Tensor:
    if t.shape == shape:
        return t
    if int(np.prod(t.shape)) != int(np.prod(shape)):
        raise Ai8xError("network.shape", name.split("/")[0],
                        f"the layer's input has {int(np.prod(t.shape))} values per sample "
                        f"{t.shape}, but the layer expects {shape}",
                        "check input_dim / input_channels against the producing layer")
    target = g.const(f"{name}_shape", [0, *shape], TensorProto.INT64)
    return _Tensor(g.node("Reshape", [t.name, target], name), t.dtype, shape)


class _LayerBuilder:
    """Writes one hardware layer into the graph."""

    def __init__(self, g: _Graph, index: int, lay: Layer, avg_pool_rounding: bool) -> None:
        self.g, self.i, self.lay = g, index, lay
        self.rounding = ROUNDING_NEAREST if avg_pool_rounding else ROUNDING_TRUNCATE
        self.main: str | None = None  # the node carrying the layer's name and metadata

    def fail(self, code: str, message: str, hint: str) -> Ai8xError:
        return Ai8xError(code, f"layer {self.i} ({self.lay.name})", message, hint)

    def role(self, role: str) -> str:
        return f"{self.lay.name}/{role}"

    # -- inputs ------------------------------------------------------------------------
    def gather(self, produced: Mapping[int, _Tensor]) -> list[_Tensor]:
        """The layer's operands: concatenated in_sequences split into `operands` parts."""
        lay, g = self.lay, self.g
        srcs = []
        for s in _effective_inputs(self.i, lay):
            if s not in produced:
                raise self.fail("network.in-sequences",
                                f"reads layer {s}, which is not computed before it",
                                "in_sequences may only name earlier layers or -1 (the input)")
            srcs.append(self.buffer_slice(produced[s]) if s == DATA_BUFFER and
                        lay.buffer_shift else produced[s])
        n_ops = max(lay.operands, 1)
        if len(srcs) == n_ops > 1 and len({s.shape for s in srcs}) == 1:
            return srcs  # one operand per source: no concat/split needed
        if len(srcs) == 1:
            joined = srcs[0]
        elif len({s.shape[1:] for s in srcs}) == 1:
            shape = (sum(s.shape[0] for s in srcs), *srcs[0].shape[1:])
            joined = _Tensor(g.node("Concat", [s.name for s in srcs], self.role("concat"),
                                    axis=1), TensorProto.INT8, shape)
        else:
            # Unequal data sizes: the vendor joins them pixel-wise per channel.
            chans = {s.shape[0] for s in srcs}
            if len(chans) != 1:
                raise self.fail("network.concat",
                                "concatenated inputs differ in both channels and size",
                                "concatenate inputs of equal dimensions")
            flat = [_reshape(g, s, (s.shape[0], int(np.prod(s.shape[1:]))),
                             self.role(f"flat{k}")) for k, s in enumerate(srcs)]
            shape = (flat[0].shape[0], sum(f.shape[1] for f in flat))
            joined = _Tensor(g.node("Concat", [f.name for f in flat], self.role("concat"),
                                    axis=2), TensorProto.INT8, shape)
        if n_ops == 1:
            return [joined]
        total = joined.shape[0]
        if total % n_ops:
            raise self.fail("network.operands",
                            f"{total} input channels do not split into {n_ops} operands",
                            "give every operand the same number of channels")
        part = total // n_ops
        split = g.const(self.role("split_sizes"), [part] * n_ops, TensorProto.INT64)
        name = self.role("split")
        g.names.add(name)
        outs = [f"{name}_{k}" for k in range(n_ops)]
        g.nodes.append(helper.make_node("Split", [joined.name, split], outs, name=name, axis=1))
        return [_Tensor(o, TensorProto.INT8, (part, *joined.shape[1:])) for o in outs]

    def buffer_slice(self, buffer: _Tensor) -> _Tensor:
        """What a shift layer reads: the buffer's positions k.. (docs/design.md, data
        buffer)."""
        k, (c, length) = self.lay.buffer_shift, buffer.shape
        starts = self.g.const(self.role("slice_starts"), [k], TensorProto.INT64)
        ends = self.g.const(self.role("slice_ends"), [length], TensorProto.INT64)
        axes = self.g.const(self.role("slice_axes"), [2], TensorProto.INT64)
        return _Tensor(self.g.node("Slice", [buffer.name, starts, ends, axes],
                                   self.role("slice")), buffer.dtype, (c, length - k))

    def shape_input(self, t: _Tensor, k: int) -> _Tensor:
        """Reshape an operand to (C, *input_dim) as the layer reads it."""
        lay = self.lay
        one_d = _is_1d(lay) or lay.buffer_shift > 0  # the buffer holds 1-D data
        spatial = (lay.input_dim[0],) if one_d else tuple(lay.input_dim)
        chans = int(np.prod(t.shape)) // int(np.prod(spatial)) if np.prod(spatial) else 0
        return _reshape(self.g, t, (chans, *spatial), self.role(f"reshape{k}"))

    # -- pooling -----------------------------------------------------------------------
    def pool(self, t: _Tensor, k: int) -> _Tensor:
        lay, g = self.lay, self.g
        nd = 1 if _is_1d(lay) else 2
        pool, stride, dil = lay.pool[:nd], lay.pool_stride[:nd], lay.pool_dilation[:nd]
        if all(p == 1 for p in pool) and all(s == 1 for s in stride):
            return t
        want = (lay.pooled_dim[0],) if nd == 1 else tuple(lay.pooled_dim)
        suffix = "" if k == 0 else str(k)
        if nd == 1 and not lay.pool_average:
            dil = (1,)  # vendor quirk: 1-D max pooling ignores the pool dilation
        if all(p == 1 for p in pool):
            dil = (1,) * nd  # a stride alone subsamples
        attrs = {"kernel_shape": list(pool), "strides": list(stride)}
        if any(d > 1 for d in dil):
            attrs["dilations"] = list(dil)
        got = tuple((t.shape[1 + a] - dil[a] * (pool[a] - 1) - 1) // stride[a] + 1
                    for a in range(nd))
        if lay.pool_average and not all(p == 1 for p in pool):
            fl = g.node("Cast", [t.name], self.role(f"pool_cast{suffix}"), to=TensorProto.FLOAT)
            avg = g.node("AveragePool", [fl], self.role(f"pool_avg{suffix}"), **attrs)
            rounding = self.rounding if nd == 2 else ROUNDING_TRUNCATE  # vendor: 1-D truncates
            out = g.node("PoolRound", [avg], self.role(f"pool{suffix}"), domain=DOMAIN,
                         count=int(np.prod(pool)), rounding=rounding)
        else:
            out = g.node("MaxPool", [t.name], self.role(f"pool{suffix}"), **attrs)
        if self.main is None and k == 0:
            self.main = out
        res = _Tensor(out, TensorProto.INT8, (t.shape[0], *got))
        if got == want:
            return res
        if any(gv < wv for gv, wv in zip(got, want, strict=True)):
            raise self.fail("layer.pool-window",
                            f"pooling {pool} stride {stride} dilation {dil} of "
                            f"{t.shape[1:]} gives {got}, but the layer needs {want}: the "
                            "vendor's last windows would read past the data",
                            "reduce pool_dilation or the pool size")
        if any(pool[a] == 1 and dil[a] > 1 and got[a] != want[a] for a in range(nd)):
            # The vendor's count subtracts the dilation even on a side of 1 (a window
            # of one pixel, where dilation changes nothing), so it pools fewer rows or
            # columns than the window arithmetic gives; no case shows which of the two
            # the hardware writes (random differential, MAX78002 seed 1399: both tools'
            # projects fail), so the layer is refused rather than guessed.
            raise self.fail("layer.pool-window",
                            f"pooling {pool} stride {stride} dilation {dil} of "
                            f"{t.shape[1:]}: a dilated side of 1 gives {got}, but the "
                            f"layer needs {want} (the vendor's count)",
                            "use pool_dilation 1 on a pooling side of 1")
        starts = g.const(self.role(f"pool_slice_starts{suffix}"), [0] * nd, TensorProto.INT64)
        ends = g.const(self.role(f"pool_slice_ends{suffix}"), list(want), TensorProto.INT64)
        axes = g.const(self.role(f"pool_slice_axes{suffix}"), list(range(2, 2 + nd)),
                       TensorProto.INT64)
        # The vendor counts pooled outputs as (in + stride - pool - dilation + 1) // stride,
        # fewer than the window arithmetic allows when it ignores a dilation.
        sl = g.node("Slice", [out, starts, ends, axes], self.role(f"pool_slice{suffix}"))
        return _Tensor(sl, TensorProto.INT8, (t.shape[0], *want))

    # -- element-wise ------------------------------------------------------------------
    def eltwise(self, ops: list[_Tensor], wide: bool, main_here: bool) -> _Tensor:
        lay, g = self.lay, self.g
        kind = lay.eltwise
        if kind not in ELTWISE_NAMES or kind == 0:
            raise self.fail("layer.eltwise", f"{len(ops)} operands but no element-wise "
                            "operation", "set eltwise to add, sub, mul, or or xor")
        if len({o.shape for o in ops}) != 1:
            raise self.fail("layer.eltwise-shape", "element-wise operands differ in shape "
                            f"{[o.shape for o in ops]}", "give all operands equal dimensions")
        bitwise = kind in (ELTWISE_OR, ELTWISE_XOR)
        op_type = {ELTWISE_ADD: "Add", ELTWISE_SUB: "Sub", ELTWISE_MUL: "Mul",
                   ELTWISE_OR: "BitwiseOr", ELTWISE_XOR: "BitwiseXor"}[kind]
        # add/sub fit int32 for 16 int8 operands; products need int64 (the vendor's numpy
        # computes in int64).
        wdt = TensorProto.INT8 if bitwise else (
            TensorProto.INT64 if kind == ELTWISE_MUL else TensorProto.INT32)
        names = []
        for k, o in enumerate(ops):
            if bitwise:
                names.append(o.name)
            else:
                names.append(g.node("Cast", [o.name], self.role(f"eltwise_cast{k}"), to=wdt))
        acc = names[0]
        for k in range(1, len(names)):
            last = k == len(names) - 1
            name = lay.name if (last and main_here) else self.role(f"eltwise{k}")
            acc = g.node(op_type, [acc, names[k]], name)
        if main_here:
            self.main = acc
        shape = ops[0].shape
        if wide:
            if wdt != TensorProto.INT32:
                acc = g.node("Cast", [acc], self.role("eltwise_wide"), to=TensorProto.INT32)
            return _Tensor(acc, TensorProto.INT32, shape)
        if bitwise:
            return _Tensor(acc, TensorProto.INT8, shape)
        if kind == ELTWISE_MUL:
            acc = g.node("OutputShift", [acc], self.role("eltwise_shift"), domain=DOMAIN,
                         shift=int(lay.output_shift), weight_bits=8)
        out = g.node("Clamp", [acc], self.role("eltwise_clamp"), domain=DOMAIN, min=-128,
                     max=127, to=TensorProto.INT8)
        return _Tensor(out, TensorProto.INT8, shape)

    # -- convolution / linear ------------------------------------------------------------
    def weights(self) -> np.ndarray:
        lay = self.lay
        if lay.weights is None:
            raise self.fail("layer.weights", f"a {lay.operator_name} layer without weights",
                            "load the layer's weights from the checkpoint")
        w = np.asarray(lay.weights)
        if w.size and (w.min() < -128 or w.max() > 127):
            raise self.fail("layer.weights-range",
                            f"weights range over [{w.min()}, {w.max()}], outside int8",
                            "quantize the weights to the layer's weight bits")
        return w.astype(np.int64)

    def compute(self, t: _Tensor) -> _Tensor:
        lay, g = self.lay, self.g
        w = self.weights()
        wname = f"{lay.name}.weight"
        if lay.operator == Op.LINEAR or (lay.operator == Op.CONV2D and lay.flatten):
            k_in = int(np.prod(t.shape))
            w2 = w.reshape(w.shape[0], -1)
            if w2.shape[1] != k_in:
                raise self.fail("layer.linear-shape",
                                f"the weights take {w2.shape[1]} inputs, the data has {k_in}",
                                "check in_features against the flattened input")
            flat = g.node("Flatten", [t.name], self.role("flatten"), axis=1)
            g.const(wname, w2.T, TensorProto.INT8)
            acc = g.node("MatMulInteger", [flat, wname], lay.name)
            shape: tuple[int, ...] = (w2.shape[0],)
        elif lay.operator in (Op.CONV2D, Op.CONV1D):
            nd = 1 if lay.operator.one_d else 2
            want = lay.input_channels // max(lay.conv_groups, 1)
            if w.ndim != 2 + nd or w.shape[1] * lay.conv_groups != t.shape[0] \
                    or w.shape[1] != want:
                raise self.fail("layer.weight-shape",
                                f"weights {w.shape} do not fit {t.shape[0]} input channels in "
                                f"{lay.conv_groups} group(s)",
                                "check the weights' layout (out, in/groups, kernel...)")
            g.const(wname, w, TensorProto.INT8)
            attrs = {"kernel_shape": list(w.shape[2:]), "strides": list(lay.stride[:nd]),
                     "pads": list(lay.padding[:nd]) * 2, "dilations": list(lay.dilation[:nd]),
                     "group": int(lay.conv_groups)}
            acc = g.node("ConvInteger", [t.name, wname], lay.name, **attrs)
            shape = (w.shape[0], *(
                (t.shape[1 + a] + 2 * lay.padding[a] - lay.dilation[a] * (w.shape[2 + a] - 1)
                 - 1) // lay.stride[a] + 1 for a in range(nd)))
        elif lay.operator == Op.CONVTRANSPOSE2D:
            acc, shape = self.conv_transpose(t, w)
        else:
            raise self.fail("layer.operator", f"unknown operator {lay.operator}",
                            "use conv1d, conv2d, convtranspose2d, linear or passthrough")
        self.main = acc
        if lay.bias is not None:
            b = np.asarray(lay.bias, dtype=np.int64).reshape(-1)
            if b.size != shape[0]:
                raise self.fail("layer.bias", f"{b.size} bias values for {shape[0]} outputs",
                                "give one bias value per output channel")
            if np.abs(b).max(initial=0) >= 2 ** 31:
                raise self.fail("layer.bias-range", "bias exceeds the 32-bit accumulator",
                                "check the bias scaling")
            g.const(f"{lay.name}.bias", b.reshape(-1, *[1] * (len(shape) - 1)),
                    TensorProto.INT32)
            acc = g.node("Add", [acc, f"{lay.name}.bias"], self.role("bias"))
        return _Tensor(acc, TensorProto.INT32, shape)

    def conv_transpose(self, t: _Tensor, w: np.ndarray) -> tuple[str, tuple[int, ...]]:
        """Transposed convolution as zero insertion plus a convolution (seed 000,
        "ConvTranspose2d": the hardware inserts zeros between input pixels)."""
        lay, g = self.lay, self.g
        groups = max(lay.conv_groups, 1)
        cin, h, wd = t.shape
        if w.ndim != 4 or w.shape[0] != cin or cin % groups:
            raise self.fail("layer.weight-shape",
                            f"ConvTranspose2d weights {w.shape} do not fit {cin} input channels",
                            "use the (in, out/groups, kh, kw) layout")
        opg = w.shape[1]
        ipg = cin // groups
        kh, kw = w.shape[2:]
        # Equivalent forward kernel: flipped taps, in/out exchanged within each group.
        fwd = np.zeros((opg * groups, ipg, kh, kw), dtype=np.int64)
        for gi in range(groups):
            blk = w[gi * ipg:(gi + 1) * ipg]  # (ipg, opg, kh, kw)
            fwd[gi * opg:(gi + 1) * opg] = np.flip(blk, axis=(2, 3)).swapaxes(0, 1)
        sh, sw = lay.stride
        x = t.name
        if sh > 1 or sw > 1:
            six = g.const(self.role("zi_shape6"), [0, cin, h, 1, wd, 1], TensorProto.INT64)
            x = g.node("Reshape", [x, six], self.role("zi_expand"))
            pads = g.const(self.role("zi_pads"), [0, 0, 0, 0, 0, 0, 0, 0, 0, sh - 1, 0, sw - 1],
                           TensorProto.INT64)
            x = g.node("Pad", [x, pads], self.role("zi_pad"))
            four = g.const(self.role("zi_shape4"), [0, cin, h * sh, wd * sw], TensorProto.INT64)
            x = g.node("Reshape", [x, four], self.role("zi_merge"))
            starts = g.const(self.role("zi_starts"), [0, 0], TensorProto.INT64)
            ends = g.const(self.role("zi_ends"), [(h - 1) * sh + 1, (wd - 1) * sw + 1],
                           TensorProto.INT64)
            axes = g.const(self.role("zi_axes"), [2, 3], TensorProto.INT64)
            x = g.node("Slice", [x, starts, ends, axes], self.role("zi_trim"))
        up = ((h - 1) * sh + 1, (wd - 1) * sw + 1)
        pad = [lay.dilation[a] * ((kh, kw)[a] - 1) - lay.padding[a] for a in (0, 1)]
        if min(pad) < 0:
            raise self.fail("layer.convtranspose-padding",
                            f"padding {lay.padding} exceeds dilation*(kernel-1)",
                            "reduce the padding of the transposed convolution")
        wname = f"{lay.name}.weight"
        g.const(wname, fwd, TensorProto.INT8)
        op = lay.output_padding
        acc = g.node("ConvInteger", [x, wname], lay.name, kernel_shape=[kh, kw],
                     strides=[1, 1], pads=[pad[0], pad[1], pad[0] + op[0], pad[1] + op[1]],
                     dilations=list(lay.dilation), group=groups)
        shape = (fwd.shape[0], *(
            up[a] + 2 * pad[a] + op[a] - lay.dilation[a] * ((kh, kw)[a] - 1)
            for a in (0, 1)))
        return acc, shape

    # -- output numerics ---------------------------------------------------------------
    def numerics(self, acc: _Tensor) -> _Tensor:
        lay, g = self.lay, self.g
        x = acc.name
        if lay.output_width == 32:
            # Wide output: the raw 32-bit accumulator (seed 000: "32 bits of unclipped
            # data ... when not using activation"). With an activation the vendor's
            # simulator still clips to [0, 127], which is kept here.
            if lay.activation == ACT_ABS:
                x = g.node("Abs", [x], self.role("abs"))
            if lay.activation in (ACT_ABS, ACT_RELU):
                x = g.node("Clamp", [x], self.role("clamp"), domain=DOMAIN, min=0, max=127,
                           to=TensorProto.INT32)
            return _Tensor(x, TensorProto.INT32, acc.shape)
        x = g.node("OutputShift", [x], self.role("shift"), domain=DOMAIN,
                   shift=int(lay.output_shift), weight_bits=int(lay.quantization))
        if lay.activation == ACT_ABS:
            x = g.node("Abs", [x], self.role("abs"))
        lo = 0 if lay.activation in (ACT_RELU, ACT_ABS) else -128
        x = g.node("Clamp", [x], self.role("clamp"), domain=DOMAIN, min=lo, max=127,
                   to=TensorProto.INT8)
        return _Tensor(x, TensorProto.INT8, acc.shape)

    # -- the whole layer -----------------------------------------------------------------
    def build(self, produced: Mapping[int, _Tensor]) -> _Tensor:
        lay = self.lay
        ops = [self.shape_input(o, k) for k, o in enumerate(self.gather(produced))]
        has_conv = lay.operator.has_weights
        wide_pass = lay.output_width == 32 and not has_conv
        multi = len(ops) > 1
        if multi and not lay.pool_first:
            ops = [self.eltwise(ops, wide_pass, not has_conv)]
        ops = [self.pool(o, k) for k, o in enumerate(ops)]
        if multi and lay.pool_first:
            cur = self.eltwise(ops, wide_pass, not has_conv)
        else:
            cur = ops[0]
        if has_conv:
            cur = self.numerics(self.compute(cur))
            if lay.operator == Op.LINEAR or (lay.operator == Op.CONV2D and lay.flatten):
                cur = _reshape(self.g, cur, (cur.shape[0], 1, 1), self.role("unflatten"))
        elif self.main is None:
            self.main = self.g.node("Identity", [cur.name], lay.name)
            cur = _Tensor(self.main, cur.dtype, cur.shape)
        if self.main != lay.name:
            self._rename_main()
        return cur

    def _rename_main(self) -> None:
        """Give the main node (pool of a passthrough layer) the layer's exact name."""
        for node in self.g.nodes:
            if node.name == self.main:
                node.name = self.lay.name
                self.g.names.add(self.lay.name)
                self.main = self.lay.name
                return

    def main_node(self) -> NodeProto:
        for node in self.g.nodes:
            if node.name == self.main:
                return node
        raise AssertionError("main node missing")


class _Buffer:
    """The data buffer's state input, update and state output (docs/design.md section 1,
    data buffer). One per build."""

    def __init__(self, g: _Graph, network: Network) -> None:
        self.g, self.network, self.buf = g, network, network.data_buffer
        buf = self.buf
        if buf.name in {lay.name for lay in network.layers} or "/" in buf.name or \
                not buf.name or buf.name == INPUT_NAME:
            raise Ai8xError("network.data-buffer", f"data buffer {buf.name!r}",
                            "the buffer's name must be unique among the layer names, "
                            "non-empty, without '/' and not `input`", "rename the buffer")
        if buf.channels < 1 or buf.length < 2:
            raise Ai8xError("network.data-buffer", f"data buffer {buf.name!r}",
                            f"{buf.channels} channels x {buf.length} positions; a rolling "
                            "buffer needs at least 1 channel and 2 positions",
                            "give the buffer its channels and length")
        g.names.add(buf.name)
        # the state before the first inference: an initializer of zeros under the
        # input's name (ONNX's default value of a graph input)
        g.const(buf.name, np.zeros((1, buf.channels, buf.length)), TensorProto.INT8)
        self.state = _Tensor(buf.name, TensorProto.INT8, (buf.channels, buf.length))
        self.shifted: tuple[int, _Tensor] | None = None
        self.updated: _Tensor | None = None

    def fail(self, i: int, lay: Layer, message: str, hint: str) -> Ai8xError:
        return Ai8xError("network.data-buffer", f"layer {i} ({lay.name})", message, hint)

    def check_order(self, i: int, lay: Layer) -> None:
        order = ("one pass-through layer with buffer_shift k reads the buffer, a later "
                 "layer with buffer_insert k adds its result, and layers after it read "
                 "the buffer (seed 000, Rolling Buffers)")
        reads = DATA_BUFFER in (lay.in_sequences or ())
        # what each layer must be to shift, insert or read (one rule, legalize's)
        found = data_buffer_rule(lay, self.network, None)
        if found:
            raise Ai8xError.many(found)
        if lay.buffer_shift:
            if self.shifted is not None:
                raise self.fail(i, lay, "a second buffer_shift layer", order)
        elif reads and self.updated is None:
            raise self.fail(i, lay, "reads the data buffer before a layer has inserted "
                            "into it", order)
        if lay.buffer_insert:
            if self.shifted is None or self.updated is not None:
                raise self.fail(i, lay, "buffer_insert without one buffer_shift layer "
                                "before it", order)
            if lay.buffer_insert != self.shifted[0]:
                raise self.fail(i, lay, f"buffer_insert {lay.buffer_insert} after "
                                f"buffer_shift {self.shifted[0]}: the buffer would change "
                                "length", "insert as many positions as were shifted out")
            if lay.buffer_shift:
                raise self.fail(i, lay, "buffer_shift and buffer_insert in one layer", order)

    def after(self, i: int, lay: Layer, out: _Tensor, produced: dict[int, _Tensor]) -> None:
        if lay.buffer_shift:
            self.shifted = (lay.buffer_shift, out)
        if not lay.buffer_insert:
            return
        k, shifted = self.shifted
        c = self.buf.channels
        ins = _reshape(self.g, out, (c, k), f"{self.buf.name}/insert")
        name = self.g.node("Concat", [shifted.name, ins.name], f"{self.buf.name}/update",
                           axis=2)
        self.updated = _Tensor(name, TensorProto.INT8, (c, self.buf.length))
        produced[DATA_BUFFER] = self.updated

    def finish(self) -> ValueInfoProto:
        if self.updated is None:
            raise Ai8xError("network.data-buffer", f"data buffer {self.buf.name!r}",
                            "no layer inserts into the data buffer",
                            "give one layer buffer_insert (after the buffer_shift layer)")
        t = _Tensor(self.g.node("Identity", [self.updated.name], f"{self.buf.name}/next"),
                    TensorProto.INT8, self.updated.shape)
        return helper.make_tensor_value_info(t.name, t.dtype, [1, *t.shape])

    def input_info(self) -> ValueInfoProto:
        return helper.make_tensor_value_info(self.state.name, TensorProto.INT8,
                                             [1, *self.state.shape])


def _value_info(t: _Tensor, name: str | None = None) -> ValueInfoProto:
    return helper.make_tensor_value_info(name or t.name, t.dtype, [BATCH, *t.shape])


def _unwritten_fields(lay: Layer) -> dict[str, str]:
    """Layer fields the nodes cannot show, as main-node metadata for the reader.

    A wide (32-bit) output layer ends with the raw accumulator, so no node carries its
    output shift or weight width (the weight width still decides kernel packing); and
    `flatten` of data that is already 1x1 leaves no Flatten node to see; a Conv1d
    layer's max-pool dilation is not in its (undilated) MaxPool node.
    """
    meta: dict[str, str] = {}
    if lay.output_width == 32:
        meta["ai8x.output_shift"] = str(int(lay.output_shift))
        if lay.weights is not None:
            meta["ai8x.weight_bits"] = str(int(lay.quantization))
    if lay.flatten:
        meta["ai8x.flatten"] = "true"
    if lay.operator.one_d and not lay.pool_average and lay.pool[0] > 1 \
            and lay.pool_dilation[0] > 1:
        # 1-D max pooling reads an undilated window (the vendor's arithmetic), so the
        # MaxPool node cannot show the dilation the layer is configured with.
        meta["ai8x.pool_dilation"] = str(int(lay.pool_dilation[0]))
    return meta


def build_model(network: Network, *, layer_metadata: Mapping[str, Mapping[str, str]] | None = None,
                doc: str = "", avg_pool_rounding: bool = False,
                outputs: Sequence[int] | None = None):
    """The ai8x-ONNX model of `network` (docs/design.md section 1) as an onnx.ModelProto.

    `layer_metadata` adds `metadata_props` to a layer's main node (by layer name);
    `avg_pool_rounding` is the vendor's --avg-pool-rounding; `outputs` lists the output
    layers' indices (default: the layers no other layer consumes, in order).
    """
    from . import onnx_support

    onnx_support()
    return helper.to_onnx(build_proto(network, layer_metadata=layer_metadata, doc=doc,
                                      avg_pool_rounding=avg_pool_rounding, outputs=outputs))


def build_proto(network: Network, *, layer_metadata: Mapping[str, Mapping[str, str]] | None = None,
                doc: str = "", avg_pool_rounding: bool = False,
                outputs: Sequence[int] | None = None) -> ModelProto:
    """`build_model` without the onnx package: the same bytes as onnx2ai8x.onnxpb objects
    (the convert path uses this; importing onnx would cost it 0.15 s)."""
    g = _Graph()
    in_shape = tuple(int(d) for d in network.input_shape)
    if len(in_shape) not in (2, 3):
        raise Ai8xError("network.input-shape", "network input",
                        f"input shape {in_shape} is neither (C, H, W) nor (C, L)",
                        "give the input as channels plus one or two dimensions")
    produced: dict[int, _Tensor] = {-1: _Tensor(INPUT_NAME, TensorProto.INT8, in_shape)}
    g.names.add(INPUT_NAME)
    buffer = _Buffer(g, network) if network.data_buffer is not None else None
    if buffer is not None:
        produced[DATA_BUFFER] = buffer.state
    names = [lay.name for lay in network.layers]
    for i, lay in enumerate(network.layers):
        if names.count(lay.name) > 1 or "/" in lay.name or not lay.name:
            raise Ai8xError("network.layer-name", f"layer {i} ({lay.name!r})",
                            "layer names must be unique, non-empty and without '/'",
                            "rename the layer")
    for i, lay in enumerate(network.layers):
        if buffer is not None:
            buffer.check_order(i, lay)
        elif lay.buffer_shift or lay.buffer_insert or DATA_BUFFER in (lay.in_sequences or ()):
            raise Ai8xError("network.data-buffer", f"layer {i} ({lay.name})",
                            "the layer uses a data buffer, but the network has none",
                            "declare the buffer (Network.data_buffer / the sidecar's "
                            "`data_buffer`) or remove buffer_shift, buffer_insert and the "
                            "buffer from in_sequences")
        lb = _LayerBuilder(g, i, lay, avg_pool_rounding)
        out = lb.build(produced)
        if buffer is not None:
            buffer.after(i, lay, out, produced)
        main = lb.main_node()
        meta = {"ai8x.layer_index": str(i), "ai8x.operator": lay.operator.word}
        meta.update(_unwritten_fields(lay))
        if layer_metadata and lay.name in layer_metadata:
            meta.update(layer_metadata[lay.name])
        for key in sorted(meta):
            entry = main.metadata_props.add()
            entry.key, entry.value = key, str(meta[key])
        produced[i] = out
    out_idx = list(outputs) if outputs is not None else output_layers(network)
    if not out_idx:
        raise Ai8xError("network.no-output", network.name, "the network has no output layer",
                        "check in_sequences: some layer must be left unconsumed")
    graph_outputs = []
    for i in out_idx:
        t = produced[i]
        lay = network.layers[i]
        t = _Tensor(g.node("Identity", [t.name], f"{lay.name}/output"), t.dtype, t.shape)
        graph_outputs.append(_value_info(t))
    inputs = [_value_info(produced[-1])]
    if buffer is not None:
        graph_outputs.append(buffer.finish())
        inputs.append(buffer.input_info())
    graph = helper.make_graph(g.nodes, network.name or "network",
                              inputs, graph_outputs, g.inits)
    model = helper.make_model(graph, ir_version=IR_VERSION,
                              opset_imports=[helper.make_opsetid("", OPSET),
                                             helper.make_opsetid(DOMAIN, VERSION)],
                              producer_name="onnx2ai8x", functions=functions())
    model.doc_string = doc
    if network.device:
        entry = model.metadata_props.add()
        entry.key, entry.value = "ai8x.device", network.device
    return model


__all__ = ["build_model", "build_proto", "output_layers"]

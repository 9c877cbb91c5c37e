"""The vendor training repository's own ONNX export (`ai8x.onnx_export_prep` + torch).

What the export writes, per hardware layer (facts read from its `ai8x.py`):

    [pool -> pool rounding -> clamp] -> Conv/Gemm/MatMul(weights, bias)
      [-> BatchNormalization -> Div 4]       a checkpoint exported without fuse_bn_layers
      -> Mul by Pow(2, output_shift)         absent on a wide (32-bit) output layer
      [-> Floor]                              the `-8` mode's output-shift rounding
      -> [Relu | Abs]
      [-> Mul k -> Round -> Div k]            activation quantization (QAT and `-8`)
      -> Clip(min) -> Clip(max)               the clamp, written as two nodes

and an element-wise layer ends with the same two-node clamp. The forms differ in their
numbers:

* `q` (`--summary onnx` of a `-q` checkpoint): the weights are the checkpoint's
  integers, the bias the stored value (integer bias * 2**(bits-1)), activations in
  [-1, 1) (x / 128), clamps (-1, 127/128).
* `q-sim8` (`-8`, `simulate=True`): the same integers behind a `Round` / `Div` pair,
  activations in integer units, clamps (-128, 127), `Floor` after the shift.
* `q-simplified` (`--summary onnx_simplified`): no clamp and no rounding at all.
* `qat` (a QAT checkpoint): float weights quantized in the graph from a scale it
  computes (Abs, ReduceMax, Log, Floor, Clip, Pow); the integers are what the synthesis
  repository's `quantize.py` computes from the same float weights (vendor_numbers).

Whatever the form, the graph's float arithmetic is not the hardware's (the `q` form
multiplies integer weights by values in [-1, 1) and saturates, the `-8` form's weight
rounding divides where its training code multiplies): the numbers are the checkpoint's,
the graph only carries them. This recognizer reads the checkpoint's numbers out of the
graph and writes each layer in the canonical form `quantize.exact` recovers exactly:
weights W / 2**(bits-1), bias bias_hw / 2**(bits-1), Mul by 2**output_shift, the
activation and one Clip(-1, 127/128) (a wide layer: neither Mul nor Clip). Pooling and
element-wise clamps and roundings are the hardware's own behaviour and are dropped.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ... import onnxpb
from ...errors import Ai8xError, Diagnostic
from ..onnx_nodes import data_input, node_attr
from .base import Recognition
from .vendor_numbers import _fail, _Graph, _layer, _pow2, _replay, _scalar

DIALECT = "vendor-export"
_WEIGHT_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")
_POOL_OPS = ("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool")
_CLAMP_HI = 127.0 / 128.0  # the 8-bit clamp in [-1, 1) units (ai8x.py `Clamp`)


# -- the activation path ------------------------------------------------------------------

def _clamp(graph: _Graph, node) -> tuple[float | None, float | None] | None:
    """(min, max) of a Clip with constant bounds (either may be absent)."""
    if node is None or node.op_type != "Clip":
        return None
    lo, hi = node_attr(node, "min"), node_attr(node, "max")
    for k, slot in ((1, "lo"), (2, "hi")):
        if len(node.input) > k and node.input[k]:
            v = _scalar(graph.const(node.input[k]))
            if v is None:
                return None
            lo, hi = (v, hi) if slot == "lo" else (lo, v)
    return lo, hi


def _rounding(graph: _Graph, name: str):
    """A Mul k -> Round|Floor -> Div k (activation or pooling quantization) reading
    `name`, the Mul absent when k is 1 (torch drops it): the nodes, else None."""
    mul = graph.sole_consumer(name)
    if mul is not None and mul.op_type in ("Round", "Floor"):
        rnd, mul, k = mul, None, 1.0
    elif mul is None or mul.op_type != "Mul":
        return None
    else:
        k = _scalar(graph.other(mul, name))
        rnd = graph.sole_consumer(mul.output[0])
    if k is None or rnd is None or rnd.op_type not in ("Round", "Floor"):
        return None
    div = graph.sole_consumer(rnd.output[0])
    if div is None or div.op_type != "Div" or div.input[0] != rnd.output[0] or \
            _scalar(graph.const(div.input[1])) != k:
        return None
    return [n for n in (mul, rnd, div) if n is not None]


class _Chain:
    """The nodes after a layer's main node, up to its clamp."""

    def __init__(self, end: str) -> None:
        self.end = end
        self.nodes: list = []
        self.bn: list = []
        self.scale = None  # the Mul by 2**shift
        self.activation = None
        self.clamps: list[tuple[float | None, float | None]] = []

    def take(self, nodes: list) -> None:
        self.nodes += nodes
        self.end = nodes[-1].output[0]


def _default_bn(graph: _Graph, node) -> bool:
    """A BatchNormalization with default statistics (mean 0, variance 1, scale 1,
    shift 0): what a vendor model's `bn` holds when its checkpoint was fused before
    quantization and the model was exported without `ai8x.fuse_bn_layers`."""
    vals = [graph.const(i) for i in node.input[1:5]]
    if len(vals) != 4 or any(v is None for v in vals):
        return False
    gamma, beta, mean, var = (np.asarray(v, np.float64) for v in vals)
    return bool(np.all(gamma == 1) and np.all(beta == 0) and np.all(mean == 0) and
                np.all(var == 1))


def _follow(graph: _Graph, start: str, layer: bool) -> _Chain:
    """The export's nodes after a layer's main node (see the module docstring)."""
    ch = _Chain(start)
    nxt = graph.sole_consumer(ch.end)
    if layer and nxt is not None and nxt.op_type == "BatchNormalization" and \
            _default_bn(graph, nxt):
        div = graph.sole_consumer(nxt.output[0])
        if div is not None and div.op_type in ("Div", "Mul") and \
                _scalar(graph.other(div, nxt.output[0])) == (4.0 if div.op_type == "Div"
                                                              else 0.25):
            ch.bn = [nxt, div]
            ch.take([nxt, div])
    nxt = graph.sole_consumer(ch.end)
    if layer and nxt is not None and nxt.op_type == "Mul" and \
            _rounding(graph, ch.end) is None and \
            _pow2(_scalar(graph.other(nxt, ch.end))) is not None:
        ch.scale = nxt
        ch.take([nxt])
        nxt = graph.sole_consumer(ch.end)
        if nxt is not None and nxt.op_type == "Floor":  # the `-8` mode's shift rounding
            ch.take([nxt])
    nxt = graph.sole_consumer(ch.end)
    if layer and nxt is not None and nxt.op_type in ("Relu", "Abs"):
        ch.activation = nxt
        ch.take([nxt])
    nxt = graph.sole_consumer(ch.end)
    if nxt is not None and nxt.op_type == "Floor" and not layer:
        ch.take([nxt])  # the `-8` mode's average-pool truncation
    rounding = _rounding(graph, ch.end)
    if rounding is not None:
        ch.take(rounding)
    for _ in range(2):
        nxt = graph.sole_consumer(ch.end)
        bounds = _clamp(graph, nxt)
        if bounds is None:
            break
        ch.clamps.append(bounds)
        ch.take([nxt])
    return ch


# -- recognition ------------------------------------------------------------------------

def _is_export(graph: _Graph) -> bool:
    """The export's mark: a weight layer's output multiplied by Pow(2, output_shift)
    (ai8x.py `calc_out_scale`), or its clamp written as Clip(min) -> Clip(max)."""
    for node in graph.model.graph.node:
        if node.op_type == "Pow" and node.input and \
                _scalar(graph.const(node.input[0])) == 2.0 and \
                any(u.op_type == "Mul" for u in graph.consumers.get(node.output[0], [])):
            return True
        if node.op_type == "Clip" and node.input[0] not in graph.consts:
            lo, hi = _clamp(graph, node) or (None, None)
            nxt = _clamp(graph, graph.sole_consumer(node.output[0]))
            if lo == -1.0 and hi is None and nxt is not None and nxt[0] is None and \
                    nxt[1] == _CLAMP_HI:
                return True
    return False


def _units(graph: _Graph) -> float | None:
    """Integer units per float unit of the activations: 1 for [-1, 1) activations,
    128 for the `-8` mode's integers (clamps of -128 and 127); None if not clear."""
    his = set()
    for node in graph.model.graph.node:
        if node.op_type == "Clip" and node.input[0] not in graph.consts:
            lo, hi = _clamp(graph, node) or (None, None)
            for v in (lo, hi):
                if v in (-1.0, _CLAMP_HI):
                    his.add(1.0)
                elif v in (-128.0, 127.0):
                    his.add(128.0)
    return his.pop() if len(his) == 1 else (1.0 if not his else None)


def recognize(model, shift_quantile: float | None = None) -> Recognition | None:
    """The vendor export rewritten into the canonical form; None if not the export.
    `shift_quantile`: the QAT policy's (ai8x.py trains with it, its export computes
    the shift from the maximum instead and quantize.py reads it from the checkpoint);
    1 when not given."""
    graph = _Graph(model)
    if not _is_export(graph):
        return None
    units = _units(graph)
    if units is None:
        raise _fail("model", "the clamps mix the [-1, 1) float form and the -8 mode's "
                    "integer form", "export the whole model in one mode")
    if shift_quantile is not None and not 0.0 < shift_quantile <= 1.0:
        raise Ai8xError("usage.shift-quantile", "--shift-quantile",
                        f"{shift_quantile:g} is not in (0, 1]",
                        "give the QAT policy's shift_quantile, e.g. 0.995")
    quantile = 1.0 if shift_quantile is None else shift_quantile
    found = _Rewriter(graph, units, quantile).run()
    if shift_quantile is None and "qat" in found.facts["vendor_form"].split("+"):
        found = replace(found, warnings=(*found.warnings, Diagnostic(
            "float.vendor-shift-quantile", "model",
            "a QAT export: the shifts are computed from the weights' maximum (shift "
            "quantile 1), as the export does; the vendor's quantize.py uses the QAT "
            "policy's shift_quantile, which the export does not record",
            "if the QAT policy set shift_quantile (e.g. 0.995), pass --shift-quantile")))
    if found.facts["vendor_form"] != "float":
        # The same rewrite with the hardware's rounding written back in (verify_exact).
        rounded = _Rewriter(graph, units, quantile, rounded=True)
        rounded.run()
        found.facts["verify_model"] = rounded.model().SerializeToString()
    return found


def _unfused_bn(found: list[tuple[str, list]]) -> Diagnostic:
    """One warning for every layer exported with its unfused batch norm."""
    first = ", ".join(n.name or n.output[0] for n in found[0][1])
    more = f" and {len(found) - 1} more layers' pairs" if len(found) > 1 else ""
    return Diagnostic(
        "float.vendor-unfused-bn", f"nodes {first}{more}",
        f"BatchNormalization with default statistics (mean 0, variance 1, scale 1, shift "
        f"0) followed by Div 4 after {len(found)} layer(s) of a quantized checkpoint "
        f"({', '.join(layer for layer, _ in found)}): the export of a vendor checkpoint "
        "made without ai8x.fuse_bn_layers (its batch norm is already folded into the "
        "quantized weights); taken as an export artefact and dropped",
        "export after ai8x.fuse_bn_layers to silence this warning")


_HOST_OPS = ("Transpose", "Reshape", "Concat", "Flatten", "Squeeze", "Unsqueeze",
             "Identity")


def _host_tail(graph: _Graph) -> tuple[list, list[str]]:
    """The rearrangement of layer outputs that only feeds the model's outputs (a
    detector's heads permuted, reshaped and concatenated, ai8x training models'
    `forward`): the nodes and the tensors entering them. Only a tail the accelerator
    cannot do itself (a Transpose or a reshape to rank 3 or more) counts."""
    tail: list = []
    inside: set[str] = set()
    for node in reversed(graph.model.graph.node):
        if node.op_type not in _HOST_OPS or all(i in graph.consts for i in node.input):
            continue
        users = [u for o in node.output for u in graph.consumers.get(o, [])]
        if all(u.output[0] in inside for u in users) and \
                (users or any(o in graph.outputs for o in node.output)):
            tail.append(node)
            inside.update(node.output)
    needed = any(n.op_type == "Transpose" or n.op_type == "Reshape" and
                 graph.const(n.input[1]) is not None and graph.const(n.input[1]).size >= 3
                 for n in tail)
    if not needed:
        return [], []
    entering: list[str] = []
    for node in reversed(tail):
        for i in node.input:
            if i and i not in inside and i not in graph.consts and i not in entering:
                entering.append(i)
    return tail, entering


class _Rewriter:
    """Writes the canonical model: one pass over the export's nodes."""

    def __init__(self, graph: _Graph, units: float, quantile: float,
                 rounded: bool = False) -> None:
        self.g = graph
        self.units = units
        self.quantile = quantile
        # rounded: write the hardware's rounding and saturation into the canonical
        # form (the recovered network must compute exactly that; verify_exact)
        self.rounded = rounded
        self.nodes: list = []
        self.inits: dict[str, np.ndarray] = {}
        self.alias: dict[str, str] = {}
        self.done: set[int] = set()
        self.rewrites: list[str] = []
        self.warnings: list[Diagnostic] = []
        self.bits: dict[str, int] = {}
        self.forms: set[str] = set()
        self.float_layers: list[str] = []
        self.dropped_clamps = 0
        self.outputs: list[str] = []  # new model outputs (a host tail cut off)
        self.ends: list[str] = []  # every layer's last tensor (verification outputs)
        self.unfused: list[tuple[str, list]] = []  # layer, its BatchNorm and Div nodes

    # -- emission helpers ----------------------------------------------------------------
    def src(self, name: str) -> str:
        if not name:
            return name
        if name in self.g.consts:
            if name not in self.inits:
                self.inits[name] = np.asarray(self.g.consts[name])
            return name
        return self.alias.get(name, name)

    def const(self, name: str, value) -> str:
        self.inits[name] = np.asarray(value, np.float32)
        return name

    def emit(self, op: str, inputs: list[str], output: str, name: str, like=None) -> str:
        node = onnxpb.make_node(op, inputs, [output], name=name)
        if like is not None:
            node.attribute.extend(like.attribute)
        self.nodes.append(node)
        return output

    def copy(self, node) -> None:
        new = onnxpb.copy(node)
        del new.input[:]
        new.input.extend(self.src(i) for i in node.input)
        self.nodes.append(new)

    # -- the pass ------------------------------------------------------------------------
    def run(self) -> Recognition:
        model = self.g.model
        inp = data_input(model).name
        if self.units != 1.0:
            # `-8` mode: the input is in integer units; the canonical form takes
            # x / 128 (the walker folds the scaling into the input mapping).
            scaled = self.emit("Mul", [inp, self.const(f"{inp}__vendor_unit",
                                                       1.0 / self.units)],
                               f"{inp}__vendor_units", f"{inp}__vendor_units")
            self.alias[inp] = scaled
            self.rewrites.append(f"input {inp}: integer units (the -8 mode) = x / "
                                 f"{self.units:g} in the canonical form's units")
        tail, self.outputs = _host_tail(self.g)
        if tail:
            self.done.update(id(n) for n in tail)
            names = ", ".join(o.name for o in model.graph.output)
            self.warnings.append(Diagnostic(
                "float.vendor-host-tail", f"outputs {names}",
                f"the model's outputs are the host's rearrangement ({len(tail)} "
                f"Transpose / Reshape / Concat nodes) of the layer outputs "
                f"{', '.join(self.outputs)}; the accelerator's outputs are those layers",
                "rearrange the accelerator's outputs on the host, as the model's forward "
                "does"))
        for node in model.graph.node:
            if id(node) in self.done or all(o in self.g.consts for o in node.output):
                continue
            if node.op_type in _WEIGHT_OPS and len(node.input) > 1 and \
                    node.input[1] in self.g.consts and node.input[0] not in self.g.consts:
                self.layer(node)
            elif node.op_type in _POOL_OPS or node.op_type in ("Add", "Sub") and \
                    all(i not in self.g.consts for i in node.input):
                self.plain(node)
            else:
                self.copy(node)
        if self.float_layers and self.bits:
            raise _fail(self.float_layers[0], "float weights in a model whose other layers "
                        "hold a quantized checkpoint's integers",
                        "export one checkpoint: all layers quantized (-q) or all QAT")
        if self.unfused:
            self.warnings.append(_unfused_bn(self.unfused))
        if self.dropped_clamps:
            self.rewrites.append(f"{self.dropped_clamps} pooling / element-wise clamps and "
                                 "roundings dropped: the hardware's own saturation and "
                                 "truncation")
        return Recognition(model=self.model(), dialect=DIALECT,
                           rewrites=tuple(self.rewrites), warnings=tuple(self.warnings),
                           facts={"weight_bits": dict(self.bits),
                                  "vendor_form": self.form(),
                                  "input_units": "integer" if self.units != 1.0
                                  else "float"})

    def form(self) -> str:
        if not self.bits:
            return "float"
        forms = sorted(self.forms)
        if forms == ["q"] and not any(n.op_type == "Clip" for n in self.g.model.graph.node):
            return "q-simplified"
        return "+".join(forms)

    def plain(self, node) -> None:
        """A pooling or element-wise node: its clamp and rounding are the hardware's."""
        ch = _follow(self.g, node.output[0], layer=False)
        self.done.update(id(n) for n in ch.nodes)
        self.dropped_clamps += bool(ch.nodes)
        new = onnxpb.copy(node)
        del new.input[:]
        new.input.extend(self.src(i) for i in node.input)
        new.output[0] = ch.end
        self.nodes.append(new)
        self.ends.append(ch.end)
        if self.rounded and node.op_type in ("AveragePool", "GlobalAveragePool"):
            new.output[0] = f"{ch.end}__vendor_avg"
            self.round(new.output[0], ch.end, "Floor")  # the pooling unit truncates
        elif self.rounded and node.op_type in ("Add", "Sub"):
            new.output[0] = f"{ch.end}__vendor_sum"
            self.emit("Clip", [new.output[0], self.const("__vendor_lo", -1.0),
                               self.const("__vendor_hi", _CLAMP_HI)], ch.end,
                      f"{ch.end}__vendor_saturate")

    def layer(self, node) -> None:
        """A weight node and its chain, written canonically (module docstring)."""
        g = self.g
        ch = _follow(g, node.output[0], layer=True)
        self.done.update(id(n) for n in ch.nodes)
        name = node.name or node.output[0]
        narrow = ch.scale is not None or any(hi in (_CLAMP_HI, 127.0)
                                              for _, hi in ch.clamps)
        shift_const = None if ch.scale is None else \
            _scalar(g.other(ch.scale, ch.scale.input[0] if ch.scale.input[0] not in
                            g.consts else ch.scale.input[1]))
        key = id(node)  # the rounded pass reads the same numbers: computed once
        if key not in g.layers:
            g.layers[key] = _layer(g, node, shift_const, self.quantile)
        lay = g.layers[key]
        if ch.bn:
            self.unfused.append((name, ch.bn))
        ins = [self.src(i) for i in node.input]
        if lay is None:
            self.float_layers.append(f"node {name} ({node.op_type})")
            scale = shift_const
        else:
            self.bits[name] = lay.bits
            self.forms.add(lay.form)
            unit = 2.0 ** -(lay.bits - 1)
            w = _replay(g, lay.w_int * unit, lay.path)
            ins[1] = self.const(f"{name}__vendor_w", w)
            if lay.bias_hw is not None:
                ins[2] = self.const(f"{name}__vendor_b", lay.bias_hw * unit)
            scale = None if lay.shift is None else 2.0 ** lay.shift
            self.rewrites.append(
                f"{name}: {lay.form} layer, {lay.bits}-bit weights" +
                (f", output_shift {lay.shift}" if narrow and lay.shift is not None
                 else ", wide output" if not narrow else "") +
                (f", {len(ch.clamps)} clamp node(s) -> one Clip(-1, 127/128)"
                 if narrow else ""))
        if narrow and scale is None:
            raise _fail(f"node {name} ({node.op_type})", "an 8-bit layer without its output "
                        "scale Mul(Pow(2, output_shift))", "export without remove_clamp")
        steps = [node.op_type] + (["Mul"] if narrow else []) + \
            ([ch.activation.op_type] if ch.activation is not None else []) + \
            (["Clip"] if narrow else [])
        names = [f"{ch.end}__vendor{k}" for k in range(len(steps) - 1)] + [ch.end]
        self.ends.append(ch.end)
        new = onnxpb.copy(node)
        del new.input[:]
        new.input.extend(ins)
        new.output[0] = names[0]
        self.nodes.append(new)
        t, k = names[0], 1
        if narrow:
            # node names under the layer's path, so that the walker's layer names
            # (and a copy layer's) read like the export's: /conv1/Mul -> conv1
            prefix = name.rsplit("/", 1)[0] if name.startswith("/") and \
                name.count("/") > 1 else name
            t = self.emit("Mul", [t, self.const(f"{name}__vendor_scale", scale)], names[k],
                          f"{prefix}/Mul")
            if self.rounded:  # floor(0.5 + acc * 2**T / 128): the output shift rounds
                t = self.round(t, f"{names[k]}__vendor_rounded", "Round")
            k += 1
        if ch.activation is not None:
            t = self.emit(ch.activation.op_type, [t], names[k],
                          ch.activation.name or names[k])
            k += 1
        if narrow:
            self.emit("Clip", [t, self.const(f"{name}__vendor_lo", -1.0),
                               self.const(f"{name}__vendor_hi", _CLAMP_HI)], names[k],
                      f"{prefix}/Clip")

    def round(self, src: str, out: str, how: str) -> str:
        """src in [-1, 1) units rounded to the 8-bit code grid: `how`(src * 128) / 128
        ("Floor" truncates; "Round" is floor(x + 0.5), the output shift's rounding)."""
        t = self.emit("Mul", [src, self.const("__vendor_128", 128.0)], f"{out}__r1",
                      f"{out}__r1")
        if how == "Round":
            t = self.emit("Add", [t, self.const("__vendor_half", 0.5)], f"{out}__r2",
                          f"{out}__r2")
        t = self.emit("Floor", [t], f"{out}__r3", f"{out}__r3")
        return self.emit("Mul", [t, self.const("__vendor_inv128", 1.0 / 128.0)], out,
                         f"{out}__r4")

    def model(self):
        src = self.g.model
        used = {i for n in self.nodes for i in n.input if i}
        inits = [onnxpb.from_array(
            v.astype(np.float32) if v.dtype == np.float64 else v, k)
            for k, v in self.inits.items() if k in used]
        inputs = [i for i in src.graph.input if i.name not in self.g.consts]
        outputs = list(src.graph.output) if not self.outputs else [
            onnxpb.ValueInfoProto(name=name) for name in self.outputs]
        if self.rounded:  # every layer's value can be fetched (verify_exact)
            have = {o.name for o in outputs}
            outputs += [onnxpb.ValueInfoProto(name=e) for e in dict.fromkeys(self.ends)
                        if e not in have]
        graph = onnxpb.make_graph(self.nodes, src.graph.name or "network", inputs,
                                  outputs, inits)
        out = onnxpb.make_model(graph, opset_imports=list(src.opset_import),
                                ir_version=src.ir_version)
        out.metadata_props.extend(src.metadata_props)
        return out


def claims(model) -> bool:
    """Whether `model` looks like the vendor export (this recognizer folds its
    constants); a quick look, without evaluating the constant subgraphs."""
    return _is_export(_Graph(model, fold=False))

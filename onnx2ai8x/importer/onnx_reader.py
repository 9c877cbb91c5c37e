"""ai8x-ONNX -> Network: the inverse of `custom_ops.builder.build_model`.

docs/design.md section 1 is the contract: one hardware layer is a run of nodes named
`<layer>` (the main node) and `<layer>/<role>`, in the order pooling -> element-wise ->
convolution/linear (+ bias) -> output numerics, with `Concat`/`Split`/`Reshape` between
layers. This reader groups the nodes by layer name, checks each group against that
pattern and reads every hardware field back from the nodes, their attributes, the
initializers and the inferred tensor shapes.

Only the standard and `ai8x` ops the pattern uses are accepted. A graph that still holds
shape arithmetic (`Shape`, `Gather`, `Constant`, ...) is simplified with onnxsim first,
and only then. Everything that does not map to the hardware is an `Ai8xError` naming the
node, what is unsupported and how to fix it. No torch here (convert path).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .. import onnxpb
from ..errors import Ai8xError
from ..network import (
    ACT_ABS,
    ACT_NONE,
    ACT_RELU,
    DATA_BUFFER,
    ELTWISE_ADD,
    ELTWISE_MUL,
    ELTWISE_NONE,
    ELTWISE_OR,
    ELTWISE_SUB,
    ELTWISE_XOR,
    DataBuffer,
    Layer,
    Network,
    Op,
)
from ..onnxpb import ModelProto, NodeProto, TensorProto
from .shapes import infer_shapes
from .validate import validate

AI8X_DOMAIN = "ai8x"
INPUT = -1  # in_sequences value of the network input

_ELTWISE_OPS = {"Add": ELTWISE_ADD, "Sub": ELTWISE_SUB, "Mul": ELTWISE_MUL,
                "BitwiseOr": ELTWISE_OR, "BitwiseXor": ELTWISE_XOR}
_POOL_OPS = ("MaxPool", "AveragePool")
# Every op a hardware layer may contain (docs/design.md section 1).
_LAYER_OPS = frozenset({
    "Concat", "Split", "Reshape", "Flatten", "Identity", "Cast", "MaxPool", "AveragePool",
    "PoolRound", "Slice", "Pad", "Add", "Sub", "Mul", "BitwiseOr", "BitwiseXor",
    "ConvInteger", "MatMulInteger", "OutputShift", "Clamp", "Abs",
})
# Ops a simplifier removes (shape arithmetic, constants); seeing one triggers onnxsim.
_FOLDABLE_OPS = frozenset({
    "Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "ConstantOfShape", "Concat",
    "Slice", "Cast", "Range", "Expand", "Size", "Equal", "Where", "Div", "Floor",
})
_OPERATOR_CODES = {op.word: op for op in Op}


@dataclass(frozen=True)
class ReadModel:
    """What the reader found: the Network and each layer's metadata (by layer name)."""

    network: Network
    metadata: Mapping[str, Mapping[str, str]]
    sidecar: Mapping[str, object]  # layer name -> parsed `ai8x.sidecar` JSON
    # How the model rounds average pooling: "truncate" (the hardware's default),
    # "nearest" (the vendor's --avg-pool-rounding), or None without average pooling.
    avg_pool_rounding: str | None = None


def read_model(model: ModelProto | str | os.PathLike) -> Network:
    """The Network an ai8x-ONNX model describes (raises Ai8xError if it has none)."""
    return read_model_full(model).network


def read_model_full(model: ModelProto | str | os.PathLike) -> ReadModel:
    """The Network plus each layer's `metadata_props` and parsed `ai8x.sidecar` JSON."""
    proto = _load(model)
    check_structure(proto)
    validate(proto)
    if _needs_simplify(proto):
        proto = _simplify(proto)
    return _Reader(proto).read()


# --------------------------------------------------------------------------- loading


def _load(model) -> ModelProto:
    """The model as onnxpb messages: a path, bytes, an ModelProto or an onnxpb one
    (read as it is; the reader never modifies a model)."""
    if isinstance(model, ModelProto):
        return model
    if isinstance(model, bytes):
        return onnxpb.decode(model)
    if hasattr(model, "SerializeToString"):
        return onnxpb.from_onnx(model)
    path = Path(model)
    if not path.is_file():
        raise Ai8xError("usage.missing-file", str(path), "the model file does not exist",
                        "pass the path of an .onnx file", exit_code=2)
    try:
        return onnxpb.load(path)
    except (onnxpb.DecodeError, OSError) as exc:
        raise Ai8xError("model.unreadable", str(path),
                        f"not a readable ONNX file ({str(exc).splitlines()[0][:200]})",
                        "export the model with ai8x_torch.export_onnx or onnx2ai8x "
                        "import-izer") from None


def check_structure(model: ModelProto) -> None:
    """The graph-level rules of the ONNX spec the reader relies on (the rest of onnx's
    checker is `onnx2ai8x check`'s; the convert path does not import onnx): a graph, an
    opset for the default domain, and every node input defined once, before its use."""
    where = model.graph.name or "model"
    if not model.HasField("graph") or not model.graph.node:
        raise Ai8xError("model.invalid", where, "the model has no graph nodes",
                        "export a network with layers")
    if not any(o.domain in ("", "ai.onnx") for o in model.opset_import):
        raise Ai8xError("model.invalid", where,
                        "the model imports no opset for the default ONNX domain",
                        "re-export the model; hand-edited files must stay valid ONNX")
    defined = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}
    for node in model.graph.node:
        for name in node.input:
            if name and name not in defined:
                raise Ai8xError("model.invalid", node.name or node.op_type,
                                f"input `{name}` is not produced by an earlier node, an "
                                "initializer or a graph input",
                                "re-export the model; nodes must be in topological order")
        for name in node.output:
            if name and name in defined:
                raise Ai8xError("model.invalid", node.name or node.op_type,
                                f"tensor `{name}` is produced twice",
                                "re-export the model; every tensor needs one producer")
            defined.add(name)
    for out in model.graph.output:
        if out.name not in defined:
            raise Ai8xError("model.invalid", out.name,
                            "a graph output is not produced by any node",
                            "re-export the model")


def _needs_simplify(model: ModelProto) -> bool:
    ops = {n.op_type for n in model.graph.node if n.domain in ("", "ai.onnx")}
    return bool(ops - _LAYER_OPS) and bool(ops & (_FOLDABLE_OPS - _LAYER_OPS))


def _simplify(model: ModelProto) -> ModelProto:
    """Fold shape arithmetic and constants with onnxsim (only called when present)."""
    try:
        import onnxsim
    except ImportError:
        return model  # the unsupported-op diagnostics below name what is left
    try:
        simplified, ok = onnxsim.simplify(onnxpb.to_onnx(model))
    except Exception:  # noqa: BLE001 - a failed simplification leaves the model as it was
        return model
    return onnxpb.from_onnx(simplified) if ok else model


# --------------------------------------------------------------------------- reading


def _meta_int(meta: Mapping[str, str], key: str, where: str) -> int:
    """An integer-valued metadata entry (a clear error for `[]`, `true`, `nan`, ...)."""
    text = meta[key].strip()
    try:
        value = int(text, 0) if text[:2].lower() in ("0x", "0b") else int(text)
    except ValueError:
        raise Ai8xError("model.metadata", where,
                        f"`{key}` metadata is {meta[key]!r:.60}, not a whole number",
                        "re-export the model or remove the metadata") from None
    if abs(value) > 1 << 31:
        raise Ai8xError("model.metadata", where,
                        f"`{key}` metadata is {value}, out of any hardware field's range",
                        "re-export the model or remove the metadata")
    return value


def _attrs(node: NodeProto) -> dict:
    return {a.name: onnxpb.get_attribute_value(a) for a in node.attribute}


def _per_sample(vi) -> tuple[tuple[int, ...], int] | None:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim[1:]:
        if not d.HasField("dim_value"):
            return None
        dims.append(int(d.dim_value))
    return tuple(dims), int(t.elem_type)


def _dims_of(shape: tuple[int, ...]) -> tuple[int, int]:
    """(H, W) of (C, H, W); (L, 1) of (C, L); (1, 1) of (C,)."""
    if len(shape) == 3:
        return (shape[1], shape[2])
    if len(shape) == 2:
        return (shape[1], 1)
    return (1, 1)


# Layer metadata marking a layer that the stated layer order skips (a sidecar's
# `simulated_sequence` jumps past it, seed 004): the accelerator holds the layer (a MAX78002
# snoop unit may run it at run time) but the model's result does not read it.
SKIPPED_KEY = "ai8x.skipped"


def _skipped(group: _Group) -> bool:
    return any(p.key == SKIPPED_KEY for n in group.nodes for p in n.metadata_props)


@dataclass
class _Group:
    """The nodes of one hardware layer, in graph order."""

    name: str
    nodes: list
    index_meta: int | None = None


class _Reader:
    """One read of one model (no state survives the call)."""

    def __init__(self, model: ModelProto) -> None:
        self.model = model
        self.graph = model.graph
        self.consts: dict[str, np.ndarray] = {
            i.name: onnxpb.to_array(i) for i in self.graph.initializer}
        for node in self.graph.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                value = _attrs(node).get("value")
                if isinstance(value, TensorProto):
                    self.consts[node.output[0]] = onnxpb.to_array(value)
        self.shapes = self._infer_shapes()
        self.producer: dict[str, NodeProto] = {}
        self.position: dict[int, int] = {}
        for k, node in enumerate(self.graph.node):
            self.position[id(node)] = k
            for out in node.output:
                self.producer[out] = node

    # -- shapes --------------------------------------------------------------------------
    def _infer_shapes(self) -> dict[str, tuple[tuple[int, ...], int]]:
        """Per-sample shape and element type of every computed tensor and graph input.

        The ops of ai8x-ONNX are inferred here (importer/shapes.py); any other graph goes
        through onnx's shape inference, as before.
        """
        own = infer_shapes(self.graph, self.consts)
        if own is not None:
            return {name: (shape[1:], dtype) for name, (shape, dtype) in own.items()
                    if name not in self.consts}
        import onnx

        try:
            from custom_ops import onnx_support
            onnx_support()  # the ai8x schemas, for inference through ai8x ops
        except ImportError:
            pass
        try:
            inferred = onnx.shape_inference.infer_shapes(onnxpb.to_onnx(self.model))
        except Exception as exc:  # noqa: BLE001
            raise Ai8xError("model.shapes", self.graph.name or "model",
                            f"shape inference failed: {str(exc).splitlines()[0][:200]}",
                            "re-export the model; every tensor needs a static shape "
                            "(apart from the batch dimension)") from None
        shapes = {}
        g = inferred.graph
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            got = _per_sample(vi)
            if got is not None:
                shapes[vi.name] = got
        return shapes

    def shape(self, tensor: str, node: NodeProto) -> tuple[int, ...]:
        got = self.shapes.get(tensor)
        if got is None:
            raise Ai8xError("model.shapes", node.name or node.op_type,
                            f"the shape of tensor `{tensor}` is unknown",
                            "export with static shapes (only the batch may be symbolic)")
        return got[0]

    def dtype(self, tensor: str) -> int | None:
        got = self.shapes.get(tensor)
        return None if got is None else got[1]

    # -- the whole graph -----------------------------------------------------------------
    def read(self) -> ReadModel:
        graph = self.graph
        inputs = [i for i in graph.input if i.name not in self.consts]
        if len(inputs) != 1:
            raise Ai8xError("model.inputs", graph.name or "model",
                            f"the model has {len(inputs)} inputs; the accelerator takes one",
                            "export the network with a single input tensor")
        self.input_name = inputs[0].name
        in_shape = self.shapes.get(self.input_name)
        if in_shape is None or len(in_shape[0]) not in (2, 3):
            raise Ai8xError("model.input-shape", self.input_name,
                            "the input must be (N, C, H, W) or (N, C, L) with static C, H, W",
                            "export with a fixed input size")
        if in_shape[1] not in (TensorProto.INT8, TensorProto.UINT8):
            raise Ai8xError("model.input-type", self.input_name,
                            "the input must be int8 (the sample as the accelerator sees it)",
                            "a float model is quantized with calibration data: onnx2ai8x "
                            "MODEL.onnx --device D --calibration X.npy (or export with "
                            "ai8x_torch.export_onnx / onnx2ai8x import-izer)")
        groups = self._groups()
        self.final: dict[str, int] = {self.input_name: INPUT}
        buffer = _BufferReader.find(self, groups)
        if buffer is not None:
            groups.remove(buffer.group)
            self.final[buffer.state] = DATA_BUFFER
            self.final[buffer.updated] = DATA_BUFFER
        finals = [self._final_tensor(g) for g in groups]
        for k, t in enumerate(finals):
            self.final[t] = k
        layers, metadata, sidecars = [], {}, {}
        for k, g in enumerate(groups):
            lay, meta = _LayerReader(self, g, k, finals[k]).read()
            layers.append(lay)
            metadata[g.name] = meta
            if "ai8x.sidecar" in meta:
                try:
                    entry = json.loads(meta["ai8x.sidecar"])
                except (json.JSONDecodeError, RecursionError):
                    entry = None
                if not isinstance(entry, dict):
                    raise Ai8xError("model.metadata", g.name,
                                    "`ai8x.sidecar` metadata is not a JSON object",
                                    "re-export the model or remove the metadata") from None
                sidecars[g.name] = entry
        device = None
        for prop in self.model.metadata_props:
            if prop.key == "ai8x.device":
                device = prop.value
        data_buffer = None
        if buffer is not None:
            layers, data_buffer = buffer.apply(layers, finals)
        network = Network(layers=tuple(layers), input_shape=tuple(in_shape[0]),
                          device=device, name=graph.name or "network",
                          outputs=self._output_layers(buffer), data_buffer=data_buffer)
        return ReadModel(network=network, metadata=metadata, sidecar=sidecars,
                         avg_pool_rounding=self._pool_rounding())

    def _output_layers(self, buffer: _BufferReader | None) -> tuple[int, ...]:
        """The layer behind each graph output, in the graph's order: these are unloaded
        and checked, and their data must live to the end (seed 004, `output`). The data
        buffer's state output is not one: it stays in data memory."""
        out: list[int] = []
        for value in self.graph.output:
            t = value.name
            if buffer is not None and t == buffer.next:
                continue
            node = self.producer.get(t)
            if t not in self.final and node is not None and node.op_type == "Identity":
                t = node.input[0]  # the `<layer>/output` alias of the layer's result
            if t not in self.final or self.final[t] == INPUT:
                raise Ai8xError("model.output", value.name,
                                "a graph output is not the result of a hardware layer",
                                "make every graph output a layer's output")
            if self.final[t] not in out:
                out.append(self.final[t])
        return tuple(out)

    def _pool_rounding(self) -> str | None:
        """The rounding mode all ai8x.PoolRound nodes share (one mode per network: the
        hardware sets it once for all layers, seed 000 `--avg-pool-rounding`)."""
        modes = {}
        for node in self.graph.node:
            if node.op_type == "PoolRound":
                mode = _attrs(node).get("rounding", "truncate")
                modes.setdefault(mode.decode() if isinstance(mode, bytes) else str(mode),
                                 node.name)
        if len(modes) > 1:
            names = ", ".join(f"`{n}` ({m})" for m, n in sorted(modes.items()))
            raise Ai8xError("model.pool-rounding", names,
                            "average pooling rounds differently in different layers; the "
                            "accelerator has one rounding mode for the whole network",
                            "export every layer with the same round_avg setting")
        return next(iter(modes), None)

    def _groups(self) -> list[_Group]:
        groups: dict[str, _Group] = {}
        for node in self.graph.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                continue
            self._check_op(node)
            if not node.name:
                raise Ai8xError("model.unnamed-node", f"{node.op_type} -> {node.output[0]}",
                                "a node has no name, so it cannot be assigned to a layer",
                                "export with ai8x_torch.export_onnx or onnx2ai8x "
                                "import-izer (they name every node <layer>/<role>)")
            key = node.name.split("/")[0]
            group = groups.setdefault(key, _Group(key, []))
            group.nodes.append(node)
            if node.name == key:
                for prop in node.metadata_props:
                    if prop.key == "ai8x.layer_index":
                        try:
                            group.index_meta = int(prop.value)
                        except ValueError:
                            pass
        if not groups:
            raise Ai8xError("model.empty", self.graph.name or "model",
                            "the graph has no layers", "export a network with layers")
        ordered = list(groups.values())
        if all(g.index_meta is not None for g in ordered) and \
                sorted(g.index_meta for g in ordered) == list(range(len(ordered))):
            ordered.sort(key=lambda g: g.index_meta)
        return ordered

    def _check_op(self, node: NodeProto) -> None:
        where = node.name or node.op_type
        if node.domain == AI8X_DOMAIN:
            if node.op_type in ("OutputShift", "Clamp", "PoolRound"):
                return
            raise Ai8xError("model.unsupported-op", where,
                            f"`ai8x.{node.op_type}` is not an op of the ai8x domain",
                            "use ai8x.OutputShift, ai8x.Clamp or ai8x.PoolRound")
        if node.domain not in ("", "ai.onnx"):
            raise Ai8xError("model.unsupported-op", where,
                            f"op `{node.domain}.{node.op_type}` is not supported",
                            "the accelerator runs only the ops of docs/design.md section 1")
        if node.op_type not in _LAYER_OPS or node.op_type in ("OutputShift", "Clamp",
                                                               "PoolRound"):
            hint = {
                "Conv": "quantize the model: export with ai8x_torch.export_onnx, which writes "
                        "ConvInteger with the integer weights",
                "Gemm": "quantize the model: export with ai8x_torch.export_onnx (Linear "
                        "becomes MatMulInteger)",
                "MatMul": "quantize the model: export with ai8x_torch.export_onnx",
                "Relu": "fold the activation into the layer (ai8x.Clamp min=0)",
                "Softmax": "softmax runs on the host (the generated C has softmax_layer)",
                "BatchNormalization": "fold batch normalization into the weights",
                "ConvTranspose": "use ai8x ConvTranspose2d (zero insertion + ConvInteger)",
                "Resize": "use a stride-2 ConvTranspose2d for upsampling",
                "Upsample": "use a stride-2 ConvTranspose2d for upsampling",
            }.get(node.op_type, "remove the op or compute it on the host; the accelerator "
                                "runs only the ops of docs/design.md section 1")
            raise Ai8xError("model.unsupported-op", where,
                            f"op `{node.op_type}` does not map to the accelerator", hint)

    def _final_tensor(self, group: _Group) -> str:
        """The tensor the layer writes: produced in the group, used outside it."""
        inside = {id(n) for n in group.nodes}
        produced = [(o, n) for n in group.nodes for o in n.output]
        outputs = {o.name for o in self.graph.output}
        users: dict[str, list] = {}
        for node in self.graph.node:
            for t in node.input:
                users.setdefault(t, []).append(node)
        finals = []
        for t, node in produced:
            if node.op_type == "Identity" and node.name == f"{group.name}/output":
                continue  # the graph-output alias of the layer's result
            outside = [u for u in users.get(t, []) if id(u) not in inside]
            to_output = [u for u in users.get(t, []) if u.op_type == "Identity"
                         and u.name == f"{group.name}/output"]
            if outside or to_output or t in outputs:
                finals.append(t)
        finals = list(dict.fromkeys(finals))
        if not finals and _skipped(group):
            # a layer the stated layer order skips (SKIPPED_KEY): its result is the one
            # tensor of the layer that nothing inside the layer reads
            read = {t for n in group.nodes for t in n.input}
            finals = list(dict.fromkeys(t for t, _ in produced if t not in read))
        if len(finals) != 1:
            hint = "name every node of a layer <layer>/<role> and feed other layers " \
                "only from the layer's last node"
            if not finals:
                hint = "remove the layer, or make its result a graph output or another " \
                    f"layer's input (a layer a snoop unit may skip at run time: metadata " \
                    f"`{SKIPPED_KEY}` on its nodes, as import-izer writes it)"
            raise Ai8xError("model.layer-output", group.name,
                            f"layer `{group.name}` has {len(finals)} result tensors "
                            f"({', '.join(finals) or 'none'}); a hardware layer writes one",
                            hint)
        return finals[0]


class _BufferReader:
    """The data buffer (docs/design.md section 1, data buffer): the state input with its
    zero initializer, and the nodes of the group named like it (`B/insert`, `B/update`,
    `B/next`)."""

    def __init__(self, reader: _Reader, group: _Group) -> None:
        self.r, self.group = reader, group
        self.state = group.name
        self.where = f"data buffer `{group.name}`"

    @classmethod
    def find(cls, reader: _Reader, groups: list[_Group]) -> _BufferReader | None:
        states = {i.name for i in reader.graph.input if i.name in reader.consts}
        found = [g for g in groups if g.name in states]
        if len(found) > 1:
            raise Ai8xError("model.data-buffer", ", ".join(g.name for g in found),
                            f"{len(found)} data buffers; the accelerator's networks keep "
                            "one (seed 000, Rolling Buffers)", "use one data buffer")
        if not found:
            return None
        buf = cls(reader, found[0])
        buf.read()
        return buf

    def fail(self, message: str) -> Ai8xError:
        return Ai8xError("model.data-buffer", self.where, message,
                         "write the buffer as docs/design.md section 1 says (Slice of the "
                         "state input in the shift layer, `B/insert` Reshape, `B/update` "
                         "Concat on axis 2, `B/next` graph output), e.g. with "
                         "ai8x_torch.export_onnx")

    def read(self) -> None:
        r, name = self.r, self.group.name
        by_name = {n.name: n for n in self.group.nodes}
        update, nxt = by_name.get(f"{name}/update"), by_name.get(f"{name}/next")
        extra = set(by_name) - {f"{name}/insert", f"{name}/update", f"{name}/next"}
        if update is None or nxt is None or extra or update.op_type != "Concat" or \
                nxt.op_type != "Identity" or len(update.input) != 2:
            raise self.fail("the buffer's nodes are not `B/insert` (Reshape), `B/update` "
                            "(Concat of two tensors) and `B/next` (Identity)")
        state = r.consts[self.state]
        if state.ndim != 3 or state.shape[0] != 1 or np.any(state != 0) or \
                state.dtype != np.int8:
            raise self.fail(f"the state input's initializer is {state.dtype} "
                            f"{tuple(state.shape)}; it must be int8 zeros (1, C, L): the "
                            "buffer before the first inference")
        _, self.channels, self.length = (int(v) for v in state.shape)
        axis = int(_attrs(update).get("axis", 0))
        if axis not in (2, -1):
            raise self.fail(f"`{name}/update` concatenates along axis {axis}, not the "
                            "buffer's positions (axis 2)")
        self.shifted, inserted = update.input
        insert = by_name.get(f"{name}/insert")
        if insert is not None:
            if insert.op_type != "Reshape" or insert.output[0] != inserted:
                raise self.fail(f"`{name}/insert` is not the Reshape feeding `{name}/update`")
            inserted = insert.input[0]
        self.inserted = inserted
        self.updated, self.next = update.output[0], nxt.output[0]
        if nxt.input[0] != self.updated or self.next not in {o.name for o in r.graph.output}:
            raise self.fail(f"`{name}/next` must pass `{name}/update` to a graph output")
        shifted = r.shape(self.shifted, update)
        self.k = self.length - shifted[-1] if len(shifted) == 2 else 0
        if shifted[:1] != (self.channels,) or not 0 < self.k < self.length:
            raise self.fail(f"the shifted part {shifted} is not ({self.channels}, L - k) "
                            f"of a buffer of {self.length} positions")

    def apply(self, layers: list[Layer], finals: list[str]) -> tuple[list[Layer], DataBuffer]:
        """The layers with buffer_shift / buffer_insert set, and the buffer."""
        index = {t: k for k, t in enumerate(finals)}
        shift, insert = index.get(self.shifted), index.get(self.inserted)
        if shift is None or insert is None:
            raise self.fail("`B/update` must join the shift layer's result and the "
                            "inserting layer's result")
        sl = layers[shift]
        if sl.in_sequences != (DATA_BUFFER,) or sl.operator != Op.NONE or \
                sl.input_dim != (self.length - self.k, 1):
            raise self.fail(f"layer `{sl.name}` is not a pass-through layer reading the "
                            f"buffer's positions {self.k}.. (a Slice of `{self.state}`)")
        slices = [n for n in self.r.graph.node if n.op_type == "Slice"
                  and n.input[0] == self.state]
        if len(slices) != 1 or not self._is_tail(slices[0]):
            raise self.fail(f"the shift layer must read `{self.state}` through one Slice "
                            f"of positions {self.k}..{self.length} on axis 2")
        out = list(layers)
        out[shift] = replace(sl, buffer_shift=self.k)
        out[insert] = replace(layers[insert], buffer_insert=self.k)
        return out, DataBuffer(self.state, self.channels, self.length)

    def _is_tail(self, node: NodeProto) -> bool:
        consts = self.r.consts
        args = [consts.get(t) for t in node.input[1:]]
        if len(args) < 2 or any(a is None for a in args):
            return False
        starts, ends = args[0].tolist(), args[1].tolist()
        axes = args[2].tolist() if len(args) > 2 else [0]
        steps = args[3].tolist() if len(args) > 3 else [1]
        return starts == [self.k] and ends[0] >= self.length and axes in ([2], [-1]) \
            and steps == [1]


class _LayerReader:
    """Reads one group of nodes into a Layer."""

    def __init__(self, reader: _Reader, group: _Group, index: int, final: str) -> None:
        self.r, self.g, self.index, self.final = reader, group, index, final
        self.by_type: dict[str, list] = {}
        for node in group.nodes:
            if not (node.op_type == "Identity" and node.name == f"{group.name}/output"):
                self.by_type.setdefault(node.op_type, []).append(node)
        self.inside = {o for n in group.nodes for o in n.output}
        self.main = next((n for n in group.nodes if n.name == group.name), None)

    def fail(self, node: NodeProto | None, message: str, hint: str,
             code: str = "model.pattern") -> Ai8xError:
        where = self.g.name if node is None else (node.name or self.g.name)
        return Ai8xError(code, where, message, hint)

    def one(self, op_types: tuple[str, ...], what: str) -> NodeProto | None:
        found = [n for t in op_types for n in self.by_type.get(t, [])]
        if len(found) > 1:
            raise self.fail(found[1], f"layer `{self.g.name}` has {len(found)} {what} nodes; "
                            "one hardware layer has at most one",
                            "split the computation into several layers")
        return found[0] if found else None

    def const(self, tensor: str, node: NodeProto) -> np.ndarray:
        if tensor not in self.r.consts:
            raise self.fail(node, f"input `{tensor}` of {node.op_type} must be a constant "
                            "(initializer)", "export weights, biases and shapes as "
                            "initializers")
        return self.r.consts[tensor]

    def shape(self, tensor: str, node: NodeProto) -> tuple[int, ...]:
        return self.r.shape(tensor, node)

    # -- tracing -------------------------------------------------------------------------
    def trace_source(self, tensor: str) -> str:
        """Follow a tensor back through the layer's unary nodes to its external source."""
        seen = 0
        while tensor in self.inside:
            node = self.r.producer[tensor]
            if node.op_type == "Split":
                tensor = node.input[0]
            elif node.op_type == "Concat":
                raise _Concat(node)
            else:
                tensor = node.input[0]
            seen += 1
            if seen > 64:
                break
        return tensor

    def sources(self) -> list[str]:
        """The external tensors the layer reads, in in_sequences order."""
        concat = self.one(("Concat",), "Concat")
        if concat is not None:
            return [self._strip(t) for t in concat.input]
        chain = self.chain()
        if chain:
            operands = [chain[0].input[0]] + [n.input[1] for n in chain]
            try:
                traced = [self.trace_source(t) for t in operands]
            except _Concat:
                traced = []
            ext = list(dict.fromkeys(traced))
            if traced and len(ext) == len(traced):
                return traced
            if len(ext) == 1:
                return ext
        ext = []
        for node in self.g.nodes:
            for t in node.input:
                # a state input has an initializer (its default) and is still data
                if t and t not in self.inside and t not in ext and \
                        (t not in self.r.consts or t in self.r.final):
                    ext.append(t)
        return ext

    def _strip(self, tensor: str) -> str:
        """A Concat input without the layer's own reshapes in front of it."""
        while tensor in self.inside and self.r.producer[tensor].op_type == "Reshape":
            tensor = self.r.producer[tensor].input[0]
        return tensor

    def chain(self) -> list[NodeProto]:
        """The element-wise nodes in order (the bias `Add` excluded)."""
        out = []
        for node in self.g.nodes:
            if node.op_type in _ELTWISE_OPS:
                if node.op_type == "Add" and any(t in self.r.consts for t in node.input):
                    continue  # bias
                out.append(node)
        kinds = {n.op_type for n in out}
        if len(kinds) > 1:
            raise self.fail(out[0], f"mixed element-wise operations {sorted(kinds)} in one "
                            "layer", "use one element-wise operation per layer")
        return out

    # -- the layer -----------------------------------------------------------------------
    def read(self) -> tuple[Layer, dict[str, str]]:
        meta = {} if self.main is None else {p.key: p.value for p in self.main.metadata_props}
        f: dict = {"name": self.g.name}
        srcs = self.sources()
        seq = []
        for t in srcs:
            if t not in self.r.final:
                producer = self.r.producer.get(t)
                raise self.fail(producer, f"layer `{self.g.name}` reads `{t}`, which is not "
                                "the result of a hardware layer or the network input",
                                "feed layers only with the network input or other layers' "
                                "results")
            seq.append(self.r.final[t])
        f["in_sequences"] = tuple(seq)
        chain = self.chain()
        split = self.one(("Split",), "Split")
        if split is not None:
            f["operands"] = len(split.output)
        elif chain:
            f["operands"] = len(chain) + 1
        else:
            f["operands"] = 1
        if chain:
            f["eltwise"] = _ELTWISE_OPS[chain[0].op_type]
            if f["operands"] != len(chain) + 1:
                raise self.fail(chain[0], f"{f['operands']} operands but {len(chain)} "
                                "element-wise nodes", "combine every operand once")
        else:
            f["eltwise"] = ELTWISE_NONE
            if f["operands"] != 1:
                raise self.fail(split, "a split input without an element-wise operation",
                                "add the operands (Add/Sub/BitwiseOr/BitwiseXor)")
        self.read_pool(f, chain)
        conv = self.one(("ConvInteger", "MatMulInteger"), "convolution")
        operator = self.read_operator(conv, meta)
        f["operator"] = operator
        if conv is not None:
            self.read_conv(f, conv, operator)
        else:
            self.read_passthrough(f, chain)
        self.read_numerics(f, conv, meta)
        out_shape = self.shape(self.final, self.main or self.g.nodes[-1])
        f["output_channels"] = out_shape[0]
        f["output_dim"] = _dims_of(out_shape)
        if operator.one_d or (operator.passthrough and len(out_shape) == 2):
            f["output_dim"] = (out_shape[1], 1)
        if "ai8x.flatten" in meta:
            f["flatten"] = meta["ai8x.flatten"].lower() in ("1", "true")
        if "ai8x.pool_dilation" in meta and operator.one_d:
            f["pool_dilation"] = (_meta_int(meta, "ai8x.pool_dilation", self.g.name), 1)
        return Layer(**f), meta

    def read_operator(self, conv: NodeProto | None, meta: Mapping[str, str]) -> Op:
        if conv is None:
            structural = Op.NONE
        elif conv.op_type == "MatMulInteger":
            structural = Op.LINEAR
        elif self._zero_insertion(conv) is not None:
            structural = Op.CONVTRANSPOSE2D
        else:
            k = _attrs(conv).get("kernel_shape") or self.const(conv.input[1], conv).shape[2:]
            structural = Op.CONV1D if len(k) == 1 else Op.CONV2D
        named = meta.get("ai8x.operator")
        if named is None:
            return structural
        if named not in _OPERATOR_CODES:
            raise self.fail(self.main, f"unknown `ai8x.operator` {named!r}",
                            f"use one of {', '.join(sorted(_OPERATOR_CODES))}")
        code = _OPERATOR_CODES[named]
        compatible = {Op.NONE: (Op.NONE,), Op.LINEAR: (Op.LINEAR, Op.CONV2D),
                      Op.CONV1D: (Op.CONV1D,), Op.CONV2D: (Op.CONV2D, Op.CONVTRANSPOSE2D),
                      Op.CONVTRANSPOSE2D: (Op.CONVTRANSPOSE2D,)}[structural]
        if code not in compatible:
            raise self.fail(self.main, f"`ai8x.operator` says {named} but the nodes form "
                            f"a {structural.word} layer",
                            "re-export the model; the metadata does not match the graph")
        return code

    def _zero_insertion(self, conv: NodeProto) -> NodeProto | None:
        """The `Pad` of a zero insertion feeding the convolution, if any."""
        t = conv.input[0]
        for _ in range(4):
            if t not in self.inside:
                return None
            node = self.r.producer[t]
            if node.op_type == "Pad":
                return node
            if node.op_type not in ("Reshape", "Slice"):
                return None
            t = node.input[0]
        return None

    def read_pool(self, f: dict, chain: list) -> None:
        pool = None
        pools = [n for t in _POOL_OPS for n in self.by_type.get(t, [])]
        if pools:
            kinds = {(n.op_type, tuple(_attrs(n).get("kernel_shape", ())),
                      tuple(_attrs(n).get("strides", ())), tuple(_attrs(n).get("dilations", ())))
                     for n in pools}
            if len(kinds) > 1:
                raise self.fail(pools[1], "operands are pooled differently",
                                "pool every element-wise operand the same way")
            pool = pools[0]
        operand = self._operand_tensor(pool, chain)
        in_shape = self.shape(operand, self.main or self.g.nodes[0])
        is_1d = len(in_shape) == 2
        f["input_channels"] = in_shape[0]
        f["input_dim"] = _dims_of(in_shape)
        f["pooled_dim"] = f["input_dim"]
        if chain and pool is not None:
            first_chain = min(self.r.position[id(n)] for n in chain)
            f["pool_first"] = self.r.position[id(pool)] < first_chain
        if pool is None:
            return
        a = _attrs(pool)
        if a.get("pads") and any(a["pads"]) or a.get("ceil_mode", 0) or \
                a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise self.fail(pool, "pooling with padding or ceil mode",
                            "the accelerator pools without padding (seed 000: \"Pooling does "
                            "not support padding\"); pad in a convolution or crop the data",
                            code="limit.pool-padding")
        k = tuple(a.get("kernel_shape", ()))
        s = tuple(a.get("strides", (1,) * len(k)))
        d = tuple(a.get("dilations", (1,) * len(k)))
        nd = 1 if is_1d else 2
        if len(k) != nd:
            raise self.fail(pool, f"{len(k)}-D pooling of {nd}-D data",
                            "pool with the data's dimensionality")
        pad1 = (lambda v: (v[0], 1)) if is_1d else (lambda v: (v[0], v[1]))
        f["pool"], f["pool_stride"], f["pool_dilation"] = pad1(k), pad1(s), pad1(d)
        f["pool_average"] = pool.op_type == "AveragePool"
        pooled = self._pooled_tensor(pool)
        f["pooled_dim"] = _dims_of(self.shape(pooled, pool))

    def _pooled_tensor(self, pool: NodeProto) -> str:
        """The pooling result: after ai8x.PoolRound and the vendor-count Slice."""
        t = pool.output[0]
        users = {}
        for node in self.g.nodes:
            for i in node.input:
                users.setdefault(i, []).append(node)
        for _ in range(2):
            nxt = [u for u in users.get(t, []) if u.op_type in ("PoolRound", "Slice")]
            if not nxt:
                break
            t = nxt[0].output[0]
        return t

    def _operand_tensor(self, pool: NodeProto | None, chain: list) -> str:
        """A tensor holding one operand as the layer reads it (C, *input_dim)."""
        if pool is not None:
            t = pool.input[0]
            prod = self.r.producer.get(t)
            if prod is not None and prod.op_type == "Cast" and t in self.inside:
                t = prod.input[0]  # average pooling runs on a float copy
            return t
        if chain:
            t = chain[0].input[0]
            prod = self.r.producer.get(t)
            if prod is not None and prod.op_type == "Cast" and t in self.inside:
                t = prod.input[0]
            return t
        conv = self.one(("ConvInteger", "MatMulInteger"), "convolution")
        if conv is not None:
            if conv.op_type == "MatMulInteger":
                flat = self.one(("Flatten",), "Flatten")
                if flat is None:
                    raise self.fail(conv, "MatMulInteger without the Flatten of its input",
                                    "write a Linear layer as Flatten + MatMulInteger")
                return flat.input[0]
            pad = self._zero_insertion(conv)
            if pad is not None:
                t = pad.input[0]
                while t in self.inside and self.r.producer[t].op_type == "Reshape" and \
                        len(self.shape(t, pad)) > 3:
                    t = self.r.producer[t].input[0]
                return t
            return conv.input[0]
        ident = self.by_type.get("Identity", [])
        if ident:
            return ident[0].input[0]
        raise self.fail(self.main, f"layer `{self.g.name}` has no pooling, element-wise "
                        "operation, convolution or pass-through node",
                        "every layer needs one of them")

    def read_conv(self, f: dict, conv: NodeProto, operator: int) -> None:
        w = self.const(conv.input[1], conv)
        if w.dtype not in (np.int8, np.uint8) and not np.issubdtype(w.dtype, np.integer):
            raise self.fail(conv, f"weights of type {w.dtype}; the accelerator takes integer "
                            "weights", "quantize the model (ai8x_torch.export_onnx)")
        if len(conv.input) > 2 and any(conv.input[2:]):
            zps = [self.const(t, conv) for t in conv.input[2:] if t]
            if any(np.any(z != 0) for z in zps):
                raise self.fail(conv, "non-zero zero points", "use symmetric quantization "
                                "(zero point 0), as the accelerator does")
        w = w.astype(np.int64)
        if conv.op_type == "MatMulInteger":
            flat = self.one(("Flatten",), "Flatten")
            src_shape = self.shape(flat.input[0] if flat is not None else conv.input[0], conv)
            f["weights"] = w.T.copy()
            f["flatten"] = _dims_of(src_shape) != (1, 1)
            f["input_channels"] = src_shape[0]
            if operator == Op.CONV2D:
                f["weights"] = f["weights"].reshape(*f["weights"].shape, 1, 1)
                f["flatten"] = True
        else:
            a = _attrs(conv)
            k = tuple(a.get("kernel_shape", w.shape[2:]))
            nd = len(k)
            strides = tuple(a.get("strides", (1,) * nd))
            dil = tuple(a.get("dilations", (1,) * nd))
            pads = tuple(a.get("pads", (0,) * (2 * nd)))
            group = int(a.get("group", 1))
            if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                raise self.fail(conv, "auto_pad is not supported", "give explicit pads")
            if operator.transposed:
                self._conv_transpose(f, conv, w, k, dil, pads, group)
            else:
                if pads[:nd] != pads[nd:]:
                    raise self.fail(conv, f"asymmetric padding {list(pads)}",
                                    "pad both sides equally (the hardware pads symmetrically)",
                                    code="limit.padding")
                f["weights"] = w
                f["input_channels"] = self.shape(conv.input[0], conv)[0]
                if nd == 1:
                    f["kernel_size"], f["padding"] = (k[0], 1), (pads[0], 0)
                    f["stride"], f["dilation"] = (strides[0], 1), (dil[0], 1)
                else:
                    f["kernel_size"], f["padding"] = (k[0], k[1]), (pads[0], pads[1])
                    f["stride"], f["dilation"] = tuple(strides), tuple(dil)
                f["conv_groups"] = group
        bias_add = next((n for n in self.by_type.get("Add", [])
                         if any(t in self.r.consts for t in n.input)), None)
        if bias_add is not None:
            bt = next(t for t in bias_add.input if t in self.r.consts)
            b = self.r.consts[bt].astype(np.int64).reshape(-1)
            f["bias"] = b
            f["bias_hw"] = b // 128 if np.all(b % 128 == 0) else None

    def _conv_transpose(self, f, conv, w, k, dil, pads, group) -> None:
        """Undo the builder's rewrite: zero insertion + ConvInteger with flipped taps."""
        pad_node = self._zero_insertion(conv)
        stride = (1, 1)
        if pad_node is not None:
            p = self.const(pad_node.input[1], pad_node).astype(np.int64).reshape(-1)
            half = len(p) // 2
            stride = (int(p[half + 3]) + 1, int(p[half + 5]) + 1)
        opg = w.shape[0] // group
        ipg = w.shape[1]
        cin = ipg * group
        orig = np.zeros((cin, opg, *w.shape[2:]), dtype=np.int64)
        for gi in range(group):
            blk = w[gi * opg:(gi + 1) * opg]  # (opg, ipg, kh, kw)
            orig[gi * ipg:(gi + 1) * ipg] = np.flip(blk, axis=(2, 3)).swapaxes(0, 1)
        f["weights"] = orig
        f["input_channels"] = cin
        f["kernel_size"] = (k[0], k[1])
        f["dilation"] = tuple(dil)
        f["stride"] = stride
        f["padding"] = (dil[0] * (k[0] - 1) - pads[0], dil[1] * (k[1] - 1) - pads[1])
        f["output_padding"] = (pads[2] - pads[0], pads[3] - pads[1])
        f["conv_groups"] = group

    def read_passthrough(self, f: dict, chain: list) -> None:
        # A layer without weights has no weight width; the vendor resolves it as 0, and
        # the layer-control registers scale by it (golden case.json, every such layer).
        f["quantization"] = 0

    def read_numerics(self, f: dict, conv: NodeProto | None,
                      meta: Mapping[str, str]) -> None:
        shifts = self.by_type.get("OutputShift", [])
        clamps = self.by_type.get("Clamp", [])
        final_type = self.r.dtype(self.final)
        f["output_width"] = 32 if final_type == TensorProto.INT32 else 8
        if conv is not None:
            after = self.r.position[id(conv)]
            shifts = [n for n in shifts if self.r.position[id(n)] > after]
            clamps = [n for n in clamps if self.r.position[id(n)] > after]
        if len(shifts) > 1:
            raise self.fail(shifts[1], "two output shifts in one layer",
                            "one hardware layer has one output stage")
        if shifts:
            a = _attrs(shifts[0])
            f["output_shift"] = int(a["shift"])
            if conv is not None:
                f["quantization"] = int(a.get("weight_bits", 8))
        if "ai8x.output_shift" in meta:
            f["output_shift"] = _meta_int(meta, "ai8x.output_shift", self.g.name)
        if conv is not None and "ai8x.weight_bits" in meta:
            f["quantization"] = _meta_int(meta, "ai8x.weight_bits", self.g.name)
        absn = [n for n in self.by_type.get("Abs", [])
                if conv is None or self.r.position[id(n)] > self.r.position[id(conv)]]
        if absn:
            f["activation"] = ACT_ABS
        elif clamps:
            lo = int(_attrs(clamps[-1]).get("min", -128))
            f["activation"] = ACT_RELU if lo == 0 and conv is not None else ACT_NONE
        else:
            f["activation"] = ACT_NONE
        if conv is not None and not shifts and f["output_width"] == 8:
            raise self.fail(conv, "a convolution without ai8x.OutputShift and ai8x.Clamp",
                            "end every layer with the hardware's output stage "
                            "(ai8x.OutputShift, activation, ai8x.Clamp to int8)")


class _Concat(Exception):
    """Internal: a traced operand came from a Concat (handled by the caller)."""

    def __init__(self, node: NodeProto) -> None:
        super().__init__(node.name)
        self.node = node


__all__ = ["ReadModel", "check_structure", "read_model", "read_model_full"]

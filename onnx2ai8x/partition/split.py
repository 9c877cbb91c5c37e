"""Where a float model's layers run: the accelerator's part, and the CPU's segments
before it (a stem) and after it (a head) (issue 28, item 1).

The accelerator's own checks decide: the float model is quantized and legalized as a
whole (the one front end's quantizer and limit rules); every layer a rule refuses moves
to the CPU together with its neighbours that only feed it (stem) or only read it (head),
and the rest is tried again. A layer is never moved while the accelerator can run it:
the loop stops at the first middle the accelerator accepts, so a model that converted
before is untouched.

A refused layer with weight layers both before and after it would need the accelerator
to stop and restart around the CPU (a segment between accelerator segments); that is
refused with a message naming the layer.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..devices import Device
from ..errors import EXIT_USAGE, Ai8xError

# Nodes that carry weights: the accelerator's layers (a stem or head holds none of the
# other side's weight layers, else the split would move runnable layers).
WEIGHT_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
# Diagnostics that are not about a layer (the file, the command line, the input):
# partitioning cannot help them.
NOT_LAYER_CODES = ("usage.", "model.", "float.opset", "float.inputs", "float.input-type",
                   "float.input-rank", "float.dynamic-shape", "float.simplify",
                   "float.already-ai8x", "calibration.")


@dataclass(frozen=True)
class Split:
    """The float model (simplified, batch 1) cut at one tensor before and one after the
    accelerator's part."""

    model: object  # onnx.ModelProto: the simplified float model, shapes inferred
    stem: tuple[str, ...]  # node names (model order) on the CPU before the accelerator
    head: tuple[str, ...]  # ... after it
    acc_input: str  # tensor entering the accelerator's part
    acc_output: str  # tensor leaving it
    reasons: tuple[str, ...]  # per moved layer: the refusal that moved it

    @property
    def trivial(self) -> bool:
        return not self.stem and not self.head


def simplified(path: Path):
    """The float model at batch 1 with constants folded (onnxsim) and shapes inferred,
    every node named (the split names nodes)."""
    import onnx

    model = onnx.load(str(path))
    inits = {i.name for i in model.graph.initializer}
    for vi in [*model.graph.input, *model.graph.output]:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        if dims:
            dims[0].Clear()
            dims[0].dim_value = 1
    try:
        import onnxsim

        model, ok = onnxsim.simplify(model, skip_fuse_bn=True)
    except Exception:  # noqa: BLE001 - the front end reports unsimplifiable models
        pass
    for k, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{k}"
    return onnx.shape_inference.infer_shapes(model)


def submodel(model, inputs: list[str], outputs: list[str]):
    """The part of `model` from tensors `inputs` to `outputs` (onnx's extractor)."""
    import onnx.utils

    return onnx.utils.Extractor(model).extract_model(inputs, outputs)


def graph_input(model) -> str:
    inits = {i.name for i in model.graph.initializer}
    return next(i.name for i in model.graph.input if i.name not in inits)


def run_float(model, x: np.ndarray, output: str) -> np.ndarray:
    """`model`'s tensor `output` on samples `x` (onnxruntime, one sample at a time so
    the batch-1 model takes them)."""
    return run_floats(model, x, [output])[output]


def run_floats(model, x: np.ndarray, outputs: list[str]) -> dict[str, np.ndarray]:
    """Several tensors of `model` on samples `x` (see run_float)."""
    import onnxruntime as ort

    sub = submodel(model, [graph_input(model)], outputs)
    sess = ort.InferenceSession(sub.SerializeToString(), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    runs = [sess.run(outputs, {name: x[i:i + 1].astype(np.float32)})
            for i in range(x.shape[0])]
    return {o: np.concatenate([r[k] for r in runs]) for k, o in enumerate(outputs)}


def _refused_nodes(exc: Ai8xError, names: list[str]
                   ) -> list[tuple[tuple[str, ...], str]]:
    """(nodes, rendered diagnostic) for each diagnostic naming nodes of `names` (a
    layer's nodes move together); empty when one is not about a layer (then the error
    stands)."""
    known = set(names)
    found: list[tuple[tuple[str, ...], str]] = []
    for d in exc.diagnostics:
        if d.code.startswith(NOT_LAYER_CODES):
            return []
        tokens = [t for t in re.split(r"[ ,()]+", d.where) if t]
        hit = [t for t in tokens if t in known]
        if not hit:
            return []
        found.append((tuple(hit), d.render().splitlines()[0]))
    return found


def _closure(model, start: str, forward: bool) -> set[str]:
    """`start` and every node before it (forward=False) or after it (True)."""
    nodes = {n.name: n for n in model.graph.node}
    producer = {o: n.name for n in model.graph.node for o in n.output}
    readers: dict[str, list[str]] = {}
    for n in model.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n.name)
    todo, seen = [start], {start}
    while todo:
        n = nodes[todo.pop()]
        nxt = ([r for o in n.output for r in readers.get(o, [])] if forward else
               [producer[i] for i in n.input if i in producer])
        for m in nxt:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def _boundary(model, part: set[str], outgoing: bool) -> list[str]:
    """The tensors crossing the edge of the node set `part` (outgoing: produced inside
    and read outside or a graph output; else read inside and produced outside)."""
    inits = {i.name for i in model.graph.initializer}
    graph_outs = {o.name for o in model.graph.output}
    made = {o for n in model.graph.node if n.name in part for o in n.output}
    if outgoing:
        read_out = {i for n in model.graph.node if n.name not in part for i in n.input}
        return sorted(t for t in made if t in read_out or t in graph_outs)
    return sorted({i for n in model.graph.node if n.name in part for i in n.input
                   if i and i not in made and i not in inits})


def find_split(path: Path, device: Device, calibration: np.ndarray,
               try_middle) -> Split:
    """Cut the float model at `path` so that `try_middle(middle_path, cal_path)` (the
    accelerator's quantizer and limits on the part in the middle) accepts it.
    `try_middle` raises the front end's Ai8xError on a refusal."""
    model = simplified(path)
    order = [n.name for n in model.graph.node]
    kind = {n.name: n.op_type for n in model.graph.node}
    stem: set[str] = set()
    head: set[str] = set()
    reasons: list[str] = []
    with tempfile.TemporaryDirectory(prefix="onnx2ai8x-split-") as tmp:
        for _ in range(len(order) + 1):
            acc_in, acc_out = _cuts(model, stem, head)
            middle = submodel(model, [acc_in], [acc_out])
            mid_path, cal_path = Path(tmp) / "middle.onnx", Path(tmp) / "cal.npy"
            import onnx

            onnx.save(middle, str(mid_path))
            cal = calibration if not stem else run_float(model, calibration, acc_in)
            np.save(cal_path, cal)
            try:
                try_middle(mid_path, cal_path)
            except Ai8xError as exc:
                mid_names = [n for n in order if n not in stem and n not in head]
                refused = _refused_nodes(exc, mid_names)
                if not refused:
                    raise
                nodes, why = min(refused, key=lambda r: min(map(order.index, r[0])))
                before = set().union(*(_closure(model, n, False) for n in nodes)) - stem
                after = set().union(*(_closure(model, n, True) for n in nodes)) - head
                if not any(kind[n] in WEIGHT_OPS for n in before - set(nodes)):
                    stem |= before
                elif not any(kind[n] in WEIGHT_OPS for n in after - set(nodes)):
                    head |= after
                else:
                    raise _between(nodes[0], why) from None
                if len(stem) + len(head) >= len(order):
                    raise _nothing_left(why) from None
                reasons.append(why)
                continue
            return Split(model=model, stem=tuple(n for n in order if n in stem),
                         head=tuple(n for n in order if n in head), acc_input=acc_in,
                         acc_output=acc_out, reasons=tuple(reasons))
    raise AssertionError("the split moves at least one node per round")


def _cuts(model, stem: set[str], head: set[str]) -> tuple[str, str]:
    """The one tensor from the stem into the accelerator and the one from it into the
    head (the model input and output without them)."""
    acc_in = graph_input(model)
    if stem:
        outs = _boundary(model, stem, True)
        if len(outs) != 1:
            raise _not_single("stem", outs)
        acc_in = outs[0]
    acc_out = model.graph.output[0].name
    if len(model.graph.output) != 1:
        raise Ai8xError("partition.outputs", "model",
                        "a model with more than one output cannot be split between the "
                        "accelerator and the CPU", "export one output", exit_code=EXIT_USAGE)
    if head:
        ins = _boundary(model, head, False)
        if len(ins) != 1:
            raise _not_single("head", ins)
        acc_out = ins[0]
    return acc_in, acc_out


def _not_single(what: str, tensors: list[str]) -> Ai8xError:
    return Ai8xError("partition.boundary", f"tensors {', '.join(tensors)[:200]}",
                     f"the CPU {what} and the accelerator would exchange "
                     f"{len(tensors)} tensors; one is supported",
                     "make one tensor pass between the CPU layers and the accelerator's")


def _between(node: str, why: str) -> Ai8xError:
    return Ai8xError("partition.between", node,
                     "the accelerator refuses this layer and has weight layers both "
                     f"before and after it ({why}); a CPU segment between accelerator "
                     "segments is not supported yet",
                     "change the layer to one the accelerator runs, or move it to the "
                     "start or the end of the network")


def _nothing_left(why: str) -> Ai8xError:
    return Ai8xError("partition.empty", "model",
                     f"no layer is left for the accelerator ({why})",
                     "the model must keep at least one layer the accelerator runs")


__all__ = ["Split", "find_split", "graph_input", "run_float", "simplified", "submodel"]

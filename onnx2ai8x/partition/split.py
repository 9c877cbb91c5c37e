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
from ..quantize import CPU_FALLBACK_TAILS
from .graphs import graph_input, run_float, submodel

# Nodes that carry weights: the accelerator's layers (a stem or head holds none of the
# other side's weight layers, else the split would move runnable layers).
WEIGHT_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul",
                        # quantized models' (onnxruntime's QOperator, integer ops)
                        "QLinearConv", "QLinearMatMul", "QGemm", "ConvInteger",
                        "MatMulInteger"})
# Diagnostics that are not about a layer (the file, the command line, the input):
# partitioning cannot help them.
NOT_LAYER_CODES = ("usage.", "model.", "float.opset", "float.inputs", "float.input-type",
                   "float.input-rank", "float.dynamic-shape", "float.simplify",
                   "float.already-ai8x", "calibration.",
                   "float.cpu-tail")  # (its own hint names --cpu-fallback)


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
    # CPU segments between accelerator parts (node names), and each one's (input,
    # output) tensors
    between: tuple[tuple[str, ...], ...] = ()
    cuts: tuple[tuple[str, str], ...] = ()
    results: tuple = ()  # what try_parts returned for the accepted parts

    @property
    def trivial(self) -> bool:
        return not self.stem and not self.head and not self.between

    @property
    def parts(self) -> list[tuple[str, str]]:
        """The accelerator's parts as (input, output) tensors, in order."""
        return _parts(self.acc_input, self.acc_output, list(self.cuts))


def simplified(path: Path):
    """The float model at batch 1 with constants folded (onnxsim) and shapes inferred,
    every node named (the split names nodes)."""
    import onnx

    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - onnx raises many kinds on damaged files
        raise _unreadable(path, exc) from None
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

        from ..console import foreign_stderr_silenced

        with foreign_stderr_silenced():
            model, ok = onnxsim.simplify(model, skip_fuse_bn=True)
    except Exception:  # noqa: BLE001 - the front end reports unsimplifiable models
        pass
    from collections import Counter

    names = Counter(n.name for n in model.graph.node)
    for k, node in enumerate(model.graph.node):
        if not node.name or names[node.name] > 1:
            node.name = f"{node.op_type}_{k}"
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except Exception as exc:  # noqa: BLE001
        raise _unreadable(path, exc) from None


def _unreadable(path, exc: Exception) -> Ai8xError:
    first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    return Ai8xError("model.invalid", str(path),
                     f"the model cannot be split: onnx cannot read it or infer its shapes "
                     f"({first})", "check the model with onnx.checker and onnxruntime")


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
    # initializers and the outputs of Constant nodes are constants, not data crossing
    # (quantize_cpu reads both as a node's parameters, e.g. a Resize's scales)
    inits = {i.name for i in model.graph.initializer} | {
        o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    graph_outs = {o.name for o in model.graph.output}
    made = {o for n in model.graph.node if n.name in part for o in n.output}
    if outgoing:
        read_out = {i for n in model.graph.node if n.name not in part for i in n.input}
        return sorted(t for t in made if t in read_out or t in graph_outs)
    return sorted({i for n in model.graph.node if n.name in part for i in n.input
                   if i and i not in made and i not in inits})


def find_split(path: Path, device: Device, calibration: np.ndarray,
               try_parts) -> Split:
    """Cut the float model at `path` so that `try_parts([(part_path, cal_path), ...])`
    (the accelerator's quantizer and limits on each part it runs, in order) accepts
    every part. `try_parts` raises the front end's Ai8xError on a refusal."""
    _check_model(path, device)
    model = simplified(path)
    _check_calibration(model, calibration)
    order = [n.name for n in model.graph.node]
    kind = {n.name: n.op_type for n in model.graph.node}
    stem: set[str] = set()
    head: set[str] = set()
    between: list[set[str]] = []
    reasons: list[str] = []
    head |= _tail(model)
    reasons += [f"{kind[n]} {n} at the model's output: the accelerator has no {kind[n]} "
                "(without --cpu-fallback the application computes it)"
                for n in order if n in head]
    import onnx

    with tempfile.TemporaryDirectory(prefix="onnx2ai8x-split-") as tmp:
        for _ in range(len(order) + 1):
            acc_in, acc_out = _cuts(model, stem, head)
            cuts = [_segment_cut(model, b) for b in between]
            parts = _parts(acc_in, acc_out, cuts)
            files = []
            for k, (t_in, t_out) in enumerate(parts):
                part_path, cal_path = Path(tmp) / f"part{k}.onnx", Path(tmp) / f"cal{k}.npy"
                sub = submodel(model, [t_in], [t_out])
                _check_part(sub, model, t_in, t_out)
                sub.graph.name = model.graph.name
                onnx.save(sub, str(part_path))
                cal = calibration if t_in == graph_input(model) else \
                    run_float(model, calibration, t_in)
                np.save(cal_path, cal)
                files.append((part_path, cal_path))
            try:
                results = try_parts(files)
            except Ai8xError as exc:
                taken = stem | head | set().union(*between)
                refused = _refused_nodes(exc, [n for n in order if n not in taken])
                if not refused:
                    raise _renamed(exc, files, path) from None
                nodes, why = min(refused, key=lambda r: min(map(order.index, r[0])))
                others = taken | set(nodes)
                before = set().union(*(_closure(model, n, False) for n in nodes)) - stem
                after = set().union(*(_closure(model, n, True) for n in nodes)) - head
                if not any(kind[n] in WEIGHT_OPS for n in before - others):
                    stem |= before
                    between = [b for b in between if not b <= stem]
                elif not any(kind[n] in WEIGHT_OPS for n in after - others):
                    head |= after
                    between = [b for b in between if not b <= head]
                else:
                    between = _joined(model, between, set(nodes), order)
                if len(stem | head | set().union(*between)) >= len(order):
                    raise _nothing_left(why) from None
                reasons.append(why)
                continue
            ordered = sorted(between, key=lambda b: min(map(order.index, b)))
            return Split(model=model, stem=tuple(n for n in order if n in stem),
                         head=tuple(n for n in order if n in head), acc_input=acc_in,
                         acc_output=acc_out, reasons=tuple(reasons),
                         between=tuple(tuple(n for n in order if n in b) for b in ordered),
                         cuts=tuple(_segment_cut(model, b) for b in ordered),
                         results=tuple(results))
    raise AssertionError("the split moves at least one node per round")


# What the float reader leaves to the application after the network (its "CPU tail");
# with --cpu-fallback the CPU runs it and the known answer checks it (the quantizer's
# refusal of such a tail offers --cpu-fallback for these).
TAIL_OPS = CPU_FALLBACK_TAILS


def _tail(model) -> set[str]:
    """The Sigmoid / Softmax nodes at the model's output (each the only reader of its
    input)."""
    producer = {o: n for n in model.graph.node for o in n.output}
    reads: dict[str, int] = {}
    for n in model.graph.node:
        for i in n.input:
            reads[i] = reads.get(i, 0) + 1
    tail: set[str] = set()
    node = producer.get(model.graph.output[0].name)
    while node is not None and node.op_type in TAIL_OPS and reads.get(node.input[0]) == 1:
        tail.add(node.name)
        node = producer.get(node.input[0])
    return tail


def _check_model(path: Path, device: Device) -> None:
    """The float reader's checks of the model as a whole (readable, one float input of
    fixed size, a supported opset): their messages name the user's file. Refusals of
    layers are the split's to handle."""
    from ..importer.float_onnx import read_float_model

    try:
        read_float_model(path, device.name)
    except Ai8xError as exc:
        if any(d.code.startswith(NOT_LAYER_CODES) for d in exc.diagnostics):
            raise


def _renamed(exc: Ai8xError, files: list, path: Path) -> Ai8xError:
    """`exc` naming the user's model instead of the split's temporary part files."""
    import dataclasses

    def where(text: str) -> str:
        for part, _ in files:
            text = text.replace(str(part), str(path))
        return text

    named = Ai8xError.many([dataclasses.replace(d, where=where(d.where),
                                                message=where(d.message))
                            for d in exc.diagnostics])
    named.exit_code = exc.exit_code
    return named


def _check_part(sub, model, t_in: str, t_out: str) -> None:
    """An accelerator part reads nothing but its input tensor: no connection jumps over
    the CPU layers before it into it (the extractor would compute earlier layers
    again)."""
    inits = {i.name for i in sub.graph.initializer}
    made = {o for n in sub.graph.node for o in n.output}
    free = {i for n in sub.graph.node for i in n.input
            if i and i not in made and i not in inits}
    reads = [i.name for i in sub.graph.input if i.name not in inits]
    if reads == [t_in] and free <= {t_in}:
        return
    producer = {o: n.name for n in model.graph.node for o in n.output}
    cpu = producer.get(t_in, t_in)
    raise Ai8xError("partition.skip", cpu,
                    f"a connection jumps over the CPU layers ending here: the "
                    f"accelerator's layers after them (up to {t_out}) also read values "
                    "from before them",
                    "a residual connection cannot jump over CPU layers: change the "
                    "CPU layers to ones the accelerator runs, or move them out of "
                    "the residual block")


def _check_calibration(model, x: np.ndarray) -> None:
    """At least one finite sample of the model's input shape."""
    inp = next(i for i in model.graph.input if i.name == graph_input(model))
    shape = tuple(d.dim_value for d in inp.type.tensor_type.shape.dim[1:])
    if x.ndim != len(shape) + 1 or tuple(x.shape[1:]) != shape or x.shape[0] < 1 or \
            not np.all(np.isfinite(x)):
        raise Ai8xError("usage.calibration", "calibration data",
                        f"the calibration data has shape {tuple(int(d) for d in x.shape)}"
                        f"{'' if np.all(np.isfinite(x)) else ' and values that are not finite'}"
                        f"; the model takes N x {shape}",
                        "save at least one sample of the model's input shape, finite "
                        "values only", exit_code=EXIT_USAGE)


def _segment_cut(model, nodes: set[str]) -> tuple[str, str]:
    """The one tensor into a CPU segment between accelerator parts and the one out of
    it. The segment may change the shape (a rank lift, an upsampling, a reshape): the
    next accelerator part reads what the CPU writes in that part's own input layout
    (partition/emit.py lays it out with the emitter's functions)."""
    ins, outs = _boundary(model, nodes, False), _boundary(model, nodes, True)
    if len(ins) != 1 or len(outs) != 1:
        raise _not_single("segment", sorted(set(ins) | set(outs)))
    return ins[0], outs[0]


def _joined(model, between: list[set[str]], nodes: set[str], order: list[str]
            ) -> list[set[str]]:
    """`between` with `nodes` added as a segment, merged with a segment it touches."""
    seg = set(nodes) | _gap(model, between, set(nodes))
    rest = []
    for b in between:
        touching = set(_boundary(model, b, True)) & set(_boundary(model, seg, False)) or \
            set(_boundary(model, seg, True)) & set(_boundary(model, b, False))
        if touching:
            seg |= b
        else:
            rest.append(b)
    return [*rest, seg]


def _gap(model, between: list[set[str]], seg: set[str]) -> set[str]:
    """The nodes between `seg` and an earlier or later CPU segment when none of them
    carries weights (say tf2onnx's Transpose back to channels-last between a refused
    activation and a refused Reshape): an accelerator part made of them alone would
    have no layer, so they run on the CPU with both."""
    producer = {o: n for n in model.graph.node for o in n.output}
    readers: dict[str, list] = {}
    for n in model.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    others = set().union(*between) if between else set()
    by_name = {n.name: n for n in model.graph.node}
    found: set[str] = set()
    for forward in (False, True):
        path, todo = [], sorted(seg)
        while todo:
            cur = by_name[todo.pop()]
            nxt = [r for o in cur.output for r in readers.get(o, [])] if forward else \
                [producer[i] for i in cur.input if i in producer and
                 producer[i].op_type != "Constant"]
            if len(nxt) != 1 or nxt[0].name in seg or nxt[0].name in path:
                continue
            if nxt[0].name in others:
                found.update(path)
                break
            if nxt[0].op_type in WEIGHT_OPS:
                continue
            path.append(nxt[0].name)
            todo.append(nxt[0].name)
    return found


def _parts(acc_in: str, acc_out: str, cuts: list[tuple[str, str]]
           ) -> list[tuple[str, str]]:
    """The accelerator's parts between the CPU segments, as (input, output) tensors."""
    tensors = [acc_in]
    for t_in, t_out in cuts:
        tensors += [t_in, t_out]
    tensors.append(acc_out)
    return [(tensors[k], tensors[k + 1]) for k in range(0, len(tensors), 2)]


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


def _nothing_left(why: str) -> Ai8xError:
    return Ai8xError("partition.empty", "model",
                     f"no layer is left for the accelerator ({why})",
                     "the model must keep at least one layer the accelerator runs")


__all__ = ["Split", "find_split", "graph_input", "run_float", "simplified", "submodel"]


FALLBACK_HINT = ("or pass --cpu-fallback: the Arm core runs the layers the accelerator "
                 "refuses (a CPU stem, head or segment between its layers)")


def with_fallback_hint(exc: Ai8xError) -> Ai8xError:
    """A float model's refusal with the --cpu-fallback hint added to each diagnostic about
    a layer (the others stand as they are)."""
    import dataclasses

    if not exc.diagnostics or any(d.code.startswith(NOT_LAYER_CODES)
                                  for d in exc.diagnostics):
        return exc
    named = Ai8xError.many([dataclasses.replace(
        d, hint=f"{d.hint}; {FALLBACK_HINT}" if d.hint else FALLBACK_HINT)
        for d in exc.diagnostics])
    named.exit_code = exc.exit_code
    return named

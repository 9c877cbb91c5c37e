"""Chains of data movement, read by what they do rather than how they are written
(issue 34, items 1 and 2).

Exporters write the same movement of values in many words: a nearest 2x upsampling is
torch's `Resize`, an old opset's `Upsample`, Keras' `UpSampling2D` as tf2onnx writes it
(`Unsqueeze -> Tile -> Transpose -> Reshape`, twice), or a `DepthToSpace` of channels
repeated by `Tile`/`Concat`; a layout round trip is a `Transpose` pair or a `Reshape`
pair. Recognizing each spelling is a recognizer per file seen. Instead this pass finds
every maximal chain of nodes that only move values (each reads one computed tensor and
constants), runs the chain once on a tensor whose values are distinct codes, and reads
off where each output value came from. Two shapes of that map are taken:

- every value stays where it was (same order): the chain is a reshape, written as one
  `Reshape` (`axes.py` and the walker take it from there);
- output (c, i, j) is input (c, i // fh, j // fw) with whole factors: nearest
  upsampling, written as one `Resize` in the canonical form (`mode="nearest"`,
  `coordinate_transformation_mode="asymmetric"`, `nearest_mode="floor"`, scales
  (1, 1, fh, fw)), which the walker lowers where the accelerator has it.

Any other map (a real transpose, a crop, an interpolation) is left as written, for the
walker to refuse with the node's name. Exact by construction: the map is the chain's
own result on distinct codes (checked with a second coding, so an interpolation that
lands on a code by chance is not taken for a copy).
"""
from __future__ import annotations

import numpy as np

from .base import Recognition
from .graph import Graph, attr, copy_node, label

DIALECT = "movement"
_MOVES = ("Unsqueeze", "Squeeze", "Reshape", "Flatten", "Transpose", "Tile", "Expand",
          "Resize", "Upsample", "DepthToSpace", "SpaceToDepth", "Identity", "Concat")
CANONICAL_RESIZE = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                    "nearest_mode": "floor"}


def _data_input(g: Graph, node) -> str | None:
    """The one computed tensor a movement node reads (the rest constant), or None."""
    if node.op_type not in _MOVES:
        return None
    computed = {x for x in node.input if x and g.const(x) is None}
    if len(computed) != 1:
        return None
    name = computed.pop()
    if node.op_type != "Concat" and node.input[0] != name:
        return None
    return name


def _chains(g: Graph):
    """Maximal chains (start tensor, nodes, end tensor) of movement nodes, each the only
    reader of the tensor before it, starting after a node that is not one."""
    for node in g.nodes:
        src = _data_input(g, node)
        if src is None or src == g.input or g.only_reader(src) is not node:
            continue
        prev = g.producer(src)
        if prev is not None and _data_input(g, prev) is not None:
            continue  # not the start: the chain starts at the first movement node
        chain, cur = [node], node.output[0]
        while True:
            nxt = g.only_reader(cur)
            if nxt is None or _data_input(g, nxt) != cur:
                break
            chain.append(nxt)
            cur = nxt.output[0]
        yield src, chain, cur


def _evaluate(g: Graph, src: str, chain, end: str, codes: np.ndarray) -> np.ndarray | None:
    """The chain's output for input `codes` (onnxruntime on the chain alone)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    used = {x for n in chain for x in n.input if x and x != src}
    inits = [numpy_helper.from_array(np.asarray(g.consts[x]), x) for x in sorted(used)
             if x in g.consts]
    graph = helper.make_graph(
        list(chain), "chain",
        [helper.make_tensor_value_info(src, TensorProto.FLOAT, list(codes.shape))],
        [helper.make_tensor_value_info(end, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=list(g.model.opset_import))
    model.ir_version = g.model.ir_version
    try:
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        return np.asarray(sess.run(None, {src: codes.astype(np.float32)})[0])
    except Exception:  # noqa: BLE001 - a chain onnxruntime cannot run is left as written
        return None


def source_map(g: Graph, src: str, chain, end: str) -> np.ndarray | None:
    """Per output value, the flat index of the input value it is; None when some output
    is not a copy of one input value."""
    shape = g.shapes.get(src)
    if shape is None or int(np.prod(shape)) >= 1 << 23:
        return None
    n = int(np.prod(shape))
    maps = []
    for seed in (1, 2):
        perm = np.random.default_rng(seed).permutation(n)
        out = _evaluate(g, src, chain, end, (perm + 1).reshape(shape))
        if out is None:
            return None
        inverse = np.full(n + 2, -1, np.int64)
        inverse[perm + 1] = np.arange(n)
        rounded = np.rint(out)
        if np.any(rounded != out) or np.any(rounded < 1) or np.any(rounded > n):
            return None
        maps.append(inverse[rounded.astype(np.int64)])
    if np.any(maps[0] != maps[1]) or np.any(maps[0] < 0):
        return None
    return maps[0]


def upsampling(shape: tuple[int, ...], m: np.ndarray) -> tuple[int, ...] | None:
    """The whole factors per spatial axis when `m` is nearest upsampling of data of
    `shape` (batch and channels kept), else None."""
    if len(shape) < 3 or m.ndim != len(shape) or m.shape[:2] != shape[:2]:
        return None
    factors = []
    for a in range(2, len(shape)):
        if m.shape[a] % shape[a]:
            return None
        factors.append(m.shape[a] // shape[a])
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    for a, f in enumerate(factors):
        idx = np.repeat(idx, f, axis=2 + a)
    return tuple(factors) if np.array_equal(idx, m) else None


def _text(node, key: str) -> str | None:
    value = attr(node, key)
    return value.decode() if isinstance(value, bytes) else value


def _is_canonical(node) -> bool:
    return node.op_type == "Resize" and all(_text(node, k) == v
                                            for k, v in CANONICAL_RESIZE.items())


_RESHAPES = ("Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity")


def _rewrite(g: Graph, tried: set) -> bool:
    for src, chain, end in _chains(g):
        key = (src, tuple(n.name or n.output[0] for n in chain))
        shape = g.shapes.get(src)
        if key in tried or all(n.op_type in _RESHAPES for n in chain) or \
                (len(chain) == 1 and _is_canonical(chain[0]) and shape is not None and
                 _squeezed(shape) == shape):
            continue  # pure reshapes are axes.py's and the walker's
        tried.add(key)
        shape, out_shape = g.shapes.get(src), g.shapes.get(end)
        if shape is None or out_shape is None:
            continue
        m = source_map(g, src, chain, end)
        if m is None:
            continue
        m = m.reshape(out_shape)
        names = ", ".join(label(n) for n in chain)
        if m.size == int(np.prod(shape)) and np.array_equal(m.reshape(-1),
                                                            np.arange(m.size)):
            new = g.node("Reshape", [src, g.add_const(
                "shape", np.array(out_shape, np.int64))], [end], chain[0].name)
            g.replace(chain, [new])
            g.rewrites.append(f"{names}: every value stays in place = one reshape "
                              f"{tuple(shape[1:])} -> {tuple(out_shape[1:])}")
            return True
        new = _upsampling_nodes(g, src, shape, m, end, chain[0].name)
        if new is None:
            continue
        g.replace(chain, new[0])
        g.rewrites.append(f"{names}: nearest upsampling by {new[1]}")
        return True
    return False


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Batch, channels and the spatial axes longer than 1."""
    return (*shape[:2], *[d for d in shape[2:] if d != 1])


def _upsampling_nodes(g: Graph, src: str, shape, m: np.ndarray, end: str, name: str):
    """(nodes, factors text) writing `end` as a canonical Resize of `src` when `m` is
    nearest upsampling, also when the chain adds or drops size-1 spatial axes (a
    Reshape before or after the Resize); None otherwise."""
    if len(shape) < 3 or len(m.shape) < 3:
        return None
    # size-1 spatial axes (a 1-D tensor lifted to 2-D) are left out: upsampling the
    # data they hold is upsampling without them
    before, after = _squeezed(shape), _squeezed(m.shape)
    if len(before) != len(after) or int(np.prod(after)) != m.size:
        return None
    factors = upsampling(before, m.reshape(after))
    if factors is None:
        return None
    nodes, cur = [], src
    if before != shape:
        cur = g.fresh(src)
        nodes.append(g.node("Reshape", [src, g.add_const("shape", np.array(before,
                                                                           np.int64))],
                            [cur], f"{name}_squeeze"))
    out = end if after == m.shape else g.fresh(end)
    scales = np.array([1.0, 1.0, *factors], np.float32)
    nodes.append(g.node("Resize", [cur, "", g.add_const("scales", scales)], [out], name,
                        **CANONICAL_RESIZE))
    if out != end:
        nodes.append(g.node("Reshape", [out, g.add_const("shape", np.array(
            m.shape, np.int64))], [end], f"{name}_lift"))
    return nodes, " x ".join(str(f) for f in factors)


_POINTWISE = ("Relu", "Clip", "Abs", "LeakyRelu", "Sigmoid", "Tanh", "Identity")


def _crop_into_transposed(g: Graph) -> bool:
    """A Slice with step 1 on the spatial axes of a transposed convolution's output (its
    one reader) is that convolution padded more: ConvTranspose keeps positions pb ..
    len - pe of its full result, so cropping s at the start and r at the end is pads
    (pb + s, pe + r) (Keras' Cropping2D after Conv2DTranspose, as tf2onnx writes it)."""
    for node in g.nodes:
        if node.op_type != "Slice" or len(node.input) < 3:
            continue
        conv, reader = g.producer(node.input[0]), node
        while conv is not None and conv.op_type in _POINTWISE and \
                g.only_reader(conv.output[0]) is reader:
            # an activation between them is cropped alike (it acts on each value)
            conv, reader = g.producer(conv.input[0]), conv
        out = g.shapes.get(node.input[0])
        if conv is None or conv.op_type != "ConvTranspose" or out is None or \
                g.only_reader(conv.output[0]) is not reader or \
                attr(conv, "output_shape") is not None or \
                attr(conv, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            continue
        vals = [g.const(x) if x else None for x in node.input[1:5]]
        if any(v is None for v in vals[:2]) or any(v is None for v, x in
                                                   zip(vals[2:], node.input[3:5],
                                                       strict=False) if x):
            continue
        starts, ends = (np.asarray(v, np.int64).reshape(-1) for v in vals[:2])
        rank = len(out)
        axes = np.arange(len(starts)) if len(vals) < 3 or vals[2] is None else \
            np.asarray(vals[2], np.int64).reshape(-1) % rank
        steps = np.ones(len(starts), np.int64) if len(vals) < 4 or vals[3] is None else \
            np.asarray(vals[3], np.int64).reshape(-1)
        nd = rank - 2
        pads = [int(v) for v in attr(conv, "pads", []) or [0] * (2 * nd)]
        ok = len(pads) == 2 * nd and np.all(steps == 1)
        for a, st, en in zip(axes, starts, ends, strict=False):
            n = out[a]
            st = min(max(int(st) + n if st < 0 else int(st), 0), n)
            en = min(max(int(en) + n if en < 0 else int(en), 0), n)
            if st == 0 and en == n:
                continue
            if a < 2 or en <= st:
                ok = False
                break
            pads[a - 2] += st
            pads[nd + a - 2] += n - en
        if not ok:
            continue
        new = copy_node(conv)
        kept = [x for x in new.attribute if x.name != "pads"]
        del new.attribute[:]
        new.attribute.extend(kept)
        new.attribute.append(g.onnx.helper.make_attribute("pads", pads))
        g.replace([conv], [new])
        g.replace([node], [g.node("Identity", [node.input[0]], node.output, node.name)])
        g.rewrites.append(f"{label(node)}: a crop of {label(conv)}'s output = its padding "
                          f"{pads}")
        return True
    return False


def recognize(model) -> Recognition | None:
    """The model with its movement chains rewritten (see the module text); None when it
    has none to rewrite."""
    if not any((n.op_type in _MOVES and n.op_type not in _RESHAPES) or n.op_type == "Slice"
               for n in model.graph.node):
        return None
    g = Graph(model)
    tried: set = set()  # chains already evaluated and left as written
    for _ in range(2 * len(g.nodes) + 2):
        if not _rewrite(g, tried) and not _crop_into_transposed(g):
            break
        g.infer()
    return g.recognition(DIALECT)


__all__ = ["CANONICAL_RESIZE", "recognize", "source_map", "upsampling"]

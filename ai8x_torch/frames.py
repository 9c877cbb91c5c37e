"""Find a frame loop in a traced model: the per-frame CNN feeding a data buffer.

The vendor's action-recognition model (training repo models/ai85net-actiontcn.py) takes
F frames, runs the same CNN on each (`for i in range(num_frames)` over `x[:, i]`),
writes frame i's result into slot i of a `torch.zeros(N, F, C, 1, 1)` tensor, reads that
as `(N, C, F)` and runs temporal Conv1d layers over it. The accelerator does this one
frame per inference: the frame's CNN result goes into a rolling data buffer kept in data
memory, and the temporal layers read the buffer (seed 000, "Rolling Buffers"). So the
traced loop is one frame's layers plus a buffer of C channels and F positions.

This pass only reads the traced graph; it decides which nodes are the one frame the
export keeps, which are its copies, and where the buffer is written and read. Anything
else between frames has no hardware form and is refused naming the node.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np
import torch
from torch import fx

from onnx2ai8x.errors import Ai8xError

# Tensor factories a forward() may call (the vendor's actiontcn: `torch.zeros(...)` for
# its frame buffer). While tracing they become graph nodes (export._Factories), so
# writes into the result are traced too; this pass decides what they mean.
FACTORIES = frozenset({torch.zeros, torch.ones, torch.full, torch.empty, torch.rand,
                       torch.randn, torch.tensor, torch.arange})

# Calls that only rearrange the buffer tensor's values (reading it as (N, C, F)).
_REARRANGE_METHODS = frozenset({"permute", "reshape", "view", "transpose", "flatten",
                                "squeeze", "unsqueeze", "contiguous"})
_REARRANGE_FUNCTIONS = frozenset({torch.permute, torch.reshape, torch.transpose,
                                  torch.flatten, torch.squeeze, torch.unsqueeze})


@dataclass(frozen=True)
class FrameLoop:
    """One frame's nodes out of F identical ones, and the buffer they fill."""

    frames: int  # F: the buffer's positions
    frame_shape: tuple[int, ...]  # one frame, (C, H, W) or (C, L): the accelerator input
    channels: int  # the buffer's channels: one frame's result, C_out
    first_slice: fx.Node  # x[:, 0], the kept frame's input
    insert: fx.Node  # the kept frame's write into the buffer
    copies: frozenset[fx.Node]  # the other frames' nodes, not exported
    rearrange: tuple[fx.Node, ...]  # the buffer read as (N, C, F); the last is the value


def _fail(where: str, message: str, hint: str) -> Ai8xError:
    return Ai8xError("export.unsupported", where, message, hint)


def _slot(node: fx.Node, target: fx.Node) -> int | None:
    """i for `target[:, i]` (a read, or the index of a write), else None."""
    index = node.args[1] if len(node.args) > 1 else None
    if node.op != "call_function" or node.args[0] is not target or \
            node.target not in (operator.getitem, operator.setitem):
        return None
    if isinstance(index, tuple) and len(index) == 2 and index[0] == slice(None) and \
            isinstance(index[1], int) and not isinstance(index[1], bool):
        return index[1]
    return None


def find(graph: fx.Graph, input_shape: tuple[int, ...]) -> FrameLoop | None:
    """The frame loop of a traced graph, None when it has none (no tensor factory)."""
    factories = [n for n in graph.nodes if n.op == "call_function" and
                 n.target in FACTORIES]
    if not factories:
        return None
    for node in factories:
        if node.target is not torch.zeros or node is not factories[0]:
            raise _fail(node.name, f"forward() creates a tensor with "
                        f"torch.{node.target.__name__}: the accelerator has no such "
                        "tensor", "create only the frame buffer, one torch.zeros(N, F, C, "
                        "1, 1) the frames' results are written into: the accelerator's "
                        "data buffer, all zero before the first frame (seed 000, Rolling "
                        "Buffers)")
    buffer = factories[0]
    shape = _buffer_shape(buffer)
    frames = shape[1]
    if frames < 2:
        # one position cannot roll: the shift layer moves positions 1.. down by one
        raise _fail(buffer.name, f"a frame loop over {frames} frame", "give the model "
                    "at least 2 frames: the example input's x.shape[1]")
    x = next(n for n in graph.nodes if n.op == "placeholder")
    slices = _slots(x, frames, "the input", "x[:, i]", writes=False)
    writes = _slots(buffer, frames, f"buffer `{buffer.name}`", "buf[:, i] = ...",
                    writes=True)
    members = _members(graph, slices, writes, frames)
    _same_frames(members, slices, writes)
    result_shape = shape[2:]
    if len(result_shape) < 1 or int(np.prod(result_shape[1:])) != 1:
        raise _fail(writes[0].name, f"each frame's result has shape {tuple(result_shape)}: "
                    "the data buffer keeps one position (C values) per frame",
                    "let the frame's last layer produce (C, 1, 1), e.g. a convolution or "
                    "pooling down to 1x1, as the vendor's actiontcn conv5 does")
    rearrange = _rearrange(buffer, writes, shape)
    return FrameLoop(frames=frames, frame_shape=tuple(input_shape[2:]),
                     channels=int(result_shape[0]), first_slice=slices[0],
                     insert=writes[0], rearrange=rearrange,
                     copies=frozenset(n for m in members[1:] for n in m))


def _buffer_shape(buffer: fx.Node) -> tuple[int, ...]:
    args = buffer.args[0] if len(buffer.args) == 1 and \
        isinstance(buffer.args[0], (tuple, list)) else buffer.args
    if not all(isinstance(a, int) for a in args) or len(args) < 3 or \
            buffer.kwargs.get("out") is not None:
        raise _fail(buffer.name, f"torch.zeros{tuple(args)} does not have a fixed (N, F, "
                    "C, ...) shape", "size the buffer from the input's shape and "
                    "constants: torch.zeros(x.shape[0], x.shape[1], C, 1, 1)")
    return tuple(int(a) for a in args)


def _slots(tensor: fx.Node, frames: int, what: str, form: str, *,
           writes: bool) -> list[fx.Node]:
    """The nodes reading (or writing) `tensor[:, i]`, one per frame, by i."""
    found: dict[int, fx.Node] = {}
    for user in tensor.users:
        is_write = user.target is operator.setitem
        if is_write != writes:
            continue
        i = _slot(user, tensor)
        if i is None or not 0 <= i < frames or i in found:
            raise _fail(user.name, f"{what} is used as `{user.format_node()}`; a frame loop "
                        f"uses it only as {form}, each of the {frames} frames once",
                        "read frame i as x[:, i] and write its result as buf[:, i] = ..., "
                        "nothing else")
        found[i] = user
    if len(found) != frames:
        missing = sorted(set(range(frames)) - set(found))
        raise _fail(tensor.name, f"{what}: frames {missing} are not used as {form}",
                    f"run the frame loop over all {frames} frames")
    return [found[i] for i in range(frames)]


def _members(graph: fx.Graph, slices: list[fx.Node], writes: list[fx.Node],
             frames: int) -> list[list[fx.Node]]:
    """Each frame's nodes in graph order: the ones computed from its slice, which must
    all lead to its write and to nothing else."""
    frame_of: dict[fx.Node, int] = {}
    members: list[list[fx.Node]] = [[] for _ in range(frames)]
    for node in graph.nodes:
        if node in slices:
            owners = {slices.index(node)}
        else:
            owners = {frame_of[a] for a in node.all_input_nodes if a in frame_of}
        if not owners:
            continue
        if len(owners) > 1:
            raise _fail(node.name, f"`{node.format_node()}` combines frames "
                        f"{sorted(owners)}: the accelerator runs one frame per inference",
                        "compute each frame only from its own x[:, i]; combine frames "
                        "only through the buffer the temporal layers read")
        i = owners.pop()
        if node.target is operator.setitem and node is not writes[i]:
            raise _fail(node.name, f"frame {i}'s result is written as "
                        f"`{node.format_node()}`", f"write frame {i} into buf[:, {i}]")
        frame_of[node] = i
        members[i].append(node)
    for i, nodes in enumerate(members):
        for node in nodes:
            if node is not writes[i] and not node.users:
                continue  # a result nothing reads (dropped like any unused result)
            if any(u not in frame_of for u in node.users) and node is not writes[i]:
                raise _fail(node.name, f"frame {i}'s `{node.name}` is used outside the "
                            "frame loop", "use a frame's results only through the buffer")
    return members


def _same_frames(members: list[list[fx.Node]], slices: list[fx.Node],
                 writes: list[fx.Node]) -> None:
    """Every frame calls the same modules the same way as frame 0."""
    def signature(i: int) -> list[tuple]:
        local = {n: k for k, n in enumerate(members[i])}

        def norm(a: object) -> object:
            if isinstance(a, fx.Node):
                return ("frame", local[a]) if a in local else ("node", a.name)
            return a

        sig = []
        for node in members[i]:
            args = node.args
            if node is slices[i] or node is writes[i]:
                args = (args[0], "slot", *args[2:])
            sig.append((node.op, node.target, fx.node.map_aggregate(args, norm),
                        fx.node.map_aggregate(dict(node.kwargs), norm)))
        return sig

    first = signature(0)
    for i in range(1, len(members)):
        sig = signature(i)
        for k, (a, b) in enumerate(zip(first, sig, strict=False)):
            if a != b:
                raise _fail(members[i][k].name, f"frame {i} computes "
                            f"`{members[i][k].format_node()}` where frame 0 computes "
                            f"`{members[0][k].format_node()}`", "run the same modules, "
                            "in the same order, on every frame: the accelerator runs one "
                            "frame's layers per inference")
        if len(sig) != len(first):
            where = members[i][-1] if members[i] else slices[i]
            raise _fail(where.name, f"frame {i} has {len(sig)} steps, frame 0 "
                        f"{len(first)}", "run the same modules on every frame")


def _rearrange(buffer: fx.Node, writes: list[fx.Node],
               shape: tuple[int, ...]) -> tuple[fx.Node, ...]:
    """The calls reading the filled buffer as (N, C, F): channel c of frame f at [n, c, f],
    what a Conv1d over the frames reads (checked on numbered values, whatever mix of
    permute/reshape/view spells it)."""
    order = {n: k for k, n in enumerate(buffer.graph.nodes)}
    readers = [u for u in buffer.users if u.target is not operator.setitem]
    if len(readers) != 1 or order[readers[0]] < max(order[w] for w in writes):
        where = readers[0].name if readers else buffer.name
        raise _fail(where, f"buffer `{buffer.name}` is read {len(readers)} times or before "
                    "every frame is written", "read the buffer once, after the frame loop, "
                    "as (N, C, F) for the temporal layers")
    chain = [readers[0]]
    while _rearranges(chain[-1]) and len(chain[-1].users) == 1 and \
            _rearranges(next(iter(chain[-1].users))):
        chain.append(next(iter(chain[-1].users)))
    values = torch.arange(int(np.prod(shape))).reshape(shape)
    want = values.reshape(shape[0], shape[1], shape[2]).permute(0, 2, 1)
    got = values
    for node in chain:
        if not _rearranges(node):
            got = None
            break
        others: list[fx.Node] = []
        fx.node.map_arg((node.args[1:], dict(node.kwargs)), others.append)
        if node.args[0] is not (chain[chain.index(node) - 1] if node is not chain[0]
                                else buffer) or others:
            got = None  # reads something besides the buffer's values
            break
        args = (got, *node.args[1:])
        fn = getattr(torch.Tensor, node.target) if node.op == "call_method" else node.target
        got = fn(*args, **dict(node.kwargs))
    if got is None or got.shape != want.shape or not torch.equal(got, want):
        raise _fail(chain[-1].name, f"the buffer {tuple(shape)} is read as "
                    f"{tuple(got.shape) if got is not None else 'something'} other than "
                    "(N, C, frames) with frame i's channel c at [:, c, i]",
                    "read it as buf.permute(0, 1, 3, 4, 2).reshape(N, F, -1)"
                    ".permute(0, 2, 1), the vendor's actiontcn layout")
    return tuple(chain)


def _rearranges(node: fx.Node) -> bool:
    return (node.op == "call_method" and node.target in _REARRANGE_METHODS) or \
        (node.op == "call_function" and node.target in _REARRANGE_FUNCTIONS)

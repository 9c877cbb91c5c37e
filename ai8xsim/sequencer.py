"""The sequencer: which layers run, in what order, from the layer count register's start
field (layer 0 unless the project sets it) to its last layer (or the stop and
next-layer fields), the streaming chain first.

Split from `engine` (one layer's computation) so that `stream` (the streaming layers,
built on the engine's layer model) is imported by the sequencer and imports only the
engine: no cycle between the two.
"""
from __future__ import annotations

from .engine import (
    CTL_FIFO,
    CTL_STREAM,
    LayerResult,
    check_order,
    decode,
    layer_count,
    register_order,
    run_layer,
    snoop_use,
    unmodelled,
)
from .machine import Machine, NotModelled
from .stream import fifo_frame, run_streaming, streaming_layers


def _lead_layers(m: Machine, snoop: str | None,
                 stop_after: int | None) -> list[LayerResult]:
    """The layers that run before the sequencer's memory-to-memory order: the streaming
    chain from layer 0 (CTRL stream enable), or a FIFO-fed layer 0 without streaming
    (CTRL FIFO enable: the vendor tool's --fifo on a network with no streaming layer),
    which reads its whole frame from the FIFOs and writes to data memory."""
    dev = m.dev
    ctl = m.ctl(0, dev.reg_ctl)
    if not ctl & (CTL_STREAM | CTL_FIFO):
        return []
    start, last = layer_count(m)
    if start:
        # the vendor tool refuses --start-layer with streaming or a FIFO: layer 0 is
        # the one that reads them
        raise NotModelled(f"a run starting at layer {start} with streaming or FIFO "
                          "input is not modelled (the FIFOs feed layer 0)")
    if snoop is not None:
        raise NotModelled(f"snoop units ({snoop}) with streaming or FIFO input are not "
                          "modelled")
    if ctl & CTL_STREAM:
        chain = streaming_layers(m, last)
        if stop_after is not None:
            chain = [ll for ll in chain if ll <= stop_after]
        return run_streaming(m, chain, bool(ctl & CTL_FIFO))
    what = unmodelled(m, 0)
    if what is not None:
        raise NotModelled(f"layer 0: {what} is not modelled yet")
    lr = decode(m, 0)
    return [run_layer(m, lr, fifo_frame(m, lr))]


def run(m: Machine, stop_after: int | None = None,
        order: tuple[int, ...] | None = None) -> list[LayerResult]:
    """The layers the layer count register asks for: from its start field (0 unless the
    project sets it; the MAX78002 may start later) to its last layer, or to the
    stop/next-layer fields; with `stop_after`, none after that layer (as the one-shot
    mode lets a debugger).

    `order`: the layers in the order the project is stated to run them. A project whose
    snoop units choose the order needs one (without, NotModelled); the layers then run
    in that order, each through the memories as always (`check_order` says what is
    checked of it).
    """
    dev = m.dev
    snoop = snoop_use(m)
    if snoop is not None and order is None:
        raise NotModelled(f"snoop units ({snoop}): the layer order depends on snoop "
                          "matches, and what the units match and when they stop or "
                          "branch is not described publicly (state the order the known "
                          "answer assumes with --layer-order to check the rest)")
    if order is not None:
        check_order(m, order, snoop)
    results = _lead_layers(m, snoop, stop_after)
    seen = len(results)
    if stop_after is not None and seen and results[-1].regs.index >= stop_after:
        m.runs += 1
        return results
    todo = list(order[seen:]) if order is not None else \
        register_order(m, seen if seen else None, dev.max_layers - seen)
    for layer in todo:
        what = unmodelled(m, layer)
        if what is not None:
            raise NotModelled(f"layer {layer}: {what} is not modelled yet")
        results.append(run_layer(m, decode(m, layer)))
        if stop_after is not None and layer == stop_after:
            break
    m.runs += 1
    return results

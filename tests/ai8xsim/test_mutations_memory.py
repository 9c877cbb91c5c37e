"""Placement mutations must make `verify` FAIL (issue 14): a layer's output moved onto
data a later layer still reads, and a layer's row count changed.

The project: a small network with a branch (layer 1's output is read by layers 2 and 5,
so it stays live while layers 2-4 run), placed by a hand-written sidecar: layers
alternate between processors 0-15 and 16-31 (no layer reads and writes the same
processors), the data of one processor set differ only by their offsets.

The verdict of each mutation comes from a second, independent memory model written here
at tensor level (`Shadow`): one 8-bit value per (processor, word), each layer reads its
input where the placement says, runs through the numpy reference alone
(`custom_ops.numpy_ref`) and writes its output where the placement says. It knows nothing
of registers and shares no code with `ai8xsim`. The mutated project's known answer
changes when, and only when, the words the project's check reads differ in this model;
`verify` must then FAIL, else PASS. Also, `first_bad_layer` must name the first layer
whose output differs from the reference in this model (what `verify --model` prints).

- relocation: layer 3 (`ha2`) writes its output, and layer 4 reads it, at a new offset
  that overlaps the live output of layer 1 (processors 0-7) which layer 5 reads later;
  the registers are the converter's own for that placement (`register_program`), so the
  write and read pointers move together and only the overwrite of live data is tested.
- row count: one layer's row count register (rows - 1 + 2 pad, pad in bits 16-17: the
  vendor tool's izer/backend/max7800x.py "Rows"), in every quadrant, changed by a few
  rows; that layer then reads that many rows of its input from memory (past the end:
  whatever the memory holds there) and writes that many output rows.
"""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ai8xsim.verify import execute, first_bad_layer, render
from onnx2ai8x.devices import MAX78000

WORDS = 8192  # per processor; far more than the network uses
# every offset with ONNX2AI8X_MUTATIONS=all (511 relocations); by default every eighth
OFFSET_STEP = 1 if os.environ.get("ONNX2AI8X_MUTATIONS") == "all" else 8

SIDECAR = """\
arch: branches
dataset: branches
layers:
  - {name: c0, processors: 0x7, out_offset: 0x0000, op: conv2d, kernel_size: 3x3, pad: 1,
     activate: ReLU, output_shift: @0}
  - {name: c1, processors: 0xffff0000, out_offset: 0x0400, op: conv2d, kernel_size: 3x3,
     pad: 1, activate: ReLU, output_shift: @1}
  - {name: ha, processors: 0xffff, out_offset: 0x0400, op: conv2d, kernel_size: 1x1, pad: 0,
     activate: ReLU, output_shift: @2}
  - {name: ha2, processors: 0xff0000, out_offset: 0x0800, op: conv2d, kernel_size: 3x3,
     pad: 1, activate: ReLU, output_shift: @3}
  - {name: ha3, processors: 0xff, out_offset: 0x0800, output_processors: 0xff0000,
     output: true, op: conv2d, kernel_size: 1x1, pad: 0, activate: ReLU, output_shift: @4}
  - {name: c2, in_sequences: [c1], in_offset: 0x0400, processors: 0xffff,
     out_offset: 0x0c00, op: conv2d, kernel_size: 3x3, pad: 1, max_pool: 2, pool_stride: 2,
     activate: ReLU, output_shift: @5}
  - {name: hb, processors: 0xffff0000, out_offset: 0x0c00, output_processors: 0xff,
     output: true, op: conv2d, kernel_size: 1x1, pad: 0, activate: ReLU, output_shift: @6}
"""
LIVE, MOVER = 1, 3  # layer 1's output is live while layer 3 runs (layer 5 reads it)


def _network():
    from custom_ops.numpy_ref import run_network
    from onnx2ai8x.network import Network
    from tests.map.test_auto import conv

    rng = np.random.default_rng(7)
    sample = rng.integers(-128, 128, (3, 16, 16))
    layers = [conv("c0", 3, 16, 16, (-1,)), conv("c1", 16, 16, 16, (0,)),
              conv("ha", 16, 8, 16, (1,), k=1), conv("ha2", 8, 8, 16, (2,)),
              conv("ha3", 8, 8, 16, (3,), k=1), conv("c2", 16, 16, 16, (1,), pool=2),
              conv("hb", 16, 8, 8, (5,), k=1)]
    chosen: list = []
    for lay in layers:
        # the output shift that keeps the most distinct activations (a live network: a
        # dead one would leave every mutation without effect)
        w = rng.integers(-40, 41, lay.weights.shape)
        best = None
        for shift in range(-2, 5):
            cand = dataclasses.replace(lay, weights=w, output_shift=shift)
            net = Network(layers=(*chosen, cand), input_shape=(3, 16, 16))
            out = run_network(net, sample, outputs=[len(chosen)])[0]
            score = len(np.unique(out)) - 2 * int(np.count_nonzero(out == 127))
            if best is None or score > best[0]:
                best = (score, cand)
        chosen.append(best[1])
    return Network(layers=tuple(chosen), input_shape=(3, 16, 16), device="MAX78000",
                   name="branches", outputs=(4, 6)), sample


def _procs(mask: int) -> list[int]:
    return [p for p in range(64) if mask >> p & 1]


class Shadow:
    """Data memory as (processor, word) -> value; layers run in order (see module doc)."""

    def __init__(self, network, placement, sample, rows: dict[int, int] | None = None):
        from custom_ops.numpy_ref import run_network

        self.mem = np.zeros((64, WORDS), dtype=np.int64)
        self.outputs: list[np.ndarray] = []
        first = placement.layers[0]
        c, h, w = sample.shape
        start = first.in_offset // 4
        self.mem[_procs(first.processor_map)[:c], start:start + h * w] = sample.reshape(c, -1)
        for ll, lay in enumerate(network.layers):
            pl = placement.layers[ll]
            rows_read = lay.input_dim[0] + (rows or {}).get(ll, 0)
            cols = lay.input_dim[1]
            base = pl.in_offset // 4
            ins = _procs(pl.processor_map)[:lay.input_channels]
            x = self.mem[ins, base:base + rows_read * cols].reshape(-1, rows_read, cols)
            ph, sh = lay.pool[0], lay.pool_stride[0]
            one = dataclasses.replace(
                lay, in_sequences=None, input_dim=(rows_read, cols),
                pooled_dim=((rows_read - ph) // sh + 1, lay.pooled_dim[1]))
            net1 = dataclasses.replace(network, layers=(one,), input_shape=x.shape,
                                       outputs=(0,))
            y = run_network(net1, x, outputs=[0])[0]
            self.outputs.append(y)
            outs = _procs(pl.output_processor_map)[:lay.output_channels]
            top = pl.out_offset // 4
            if set(ins) & set(outs) and top < base + x[0].size and base < top + y[0].size:
                raise ValueError(f"layer {ll} writes over its own input")
            self.mem[outs, top:top + y[0].size] = y.reshape(y.shape[0], -1)

    def words(self, regions) -> np.ndarray:
        return np.concatenate([self.mem[p, a:b].reshape(-1) for p, a, b in regions])


def _checked_regions(network, placement) -> list[tuple[list[int], int, int]]:
    """(processors, first word, end word) of every output layer: what the check reads."""
    out = []
    for ll in network.outputs:
        lay, pl = network.layers[ll], placement.layers[ll]
        n = lay.output_dim[0] * lay.output_dim[1]
        out.append((_procs(pl.output_processor_map)[:lay.output_channels],
                    pl.out_offset // 4, pl.out_offset // 4 + n))
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from custom_ops.builder import build_model
    from custom_ops.numpy_ref import run_network
    from onnx2ai8x.convert import plan

    tmp = tmp_path_factory.mktemp("mutmem")
    network, sample = _network()
    model, sidecar, npy = tmp / "branches.onnx", tmp / "branches.yaml", tmp / "sample.npy"
    model.write_bytes(build_model(network).SerializeToString())
    text = SIDECAR
    for ll, lay in enumerate(network.layers):
        text = text.replace(f"@{ll}}}", f"{lay.output_shift}}}")
    sidecar.write_text(text)
    np.save(npy, sample)
    out = tmp / "project"
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(model), "--device",
                           "MAX78000", "-o", str(out), "--sidecar", str(sidecar),
                           "--sample-input", str(npy), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    p = plan(model, MAX78000, sidecar)
    net, pl = p.network, p.placement
    refs = run_network(net, sample.reshape(net.input_shape),
                       outputs=list(range(len(net.layers))))
    shadow = Shadow(net, pl, sample)
    # the independent model reproduces the reference, layer by layer
    for got, want in zip(shadow.outputs, refs, strict=True):
        assert np.array_equal(got, want)
    outcome = execute(out)
    assert outcome.passed, render(outcome)
    regions = _checked_regions(net, pl)
    # the check reads exactly the output layers' words (8-bit, four processors a word)
    assert outcome.checked_words == sum((len(p) + 3) // 4 * (b - a) for p, a, b in regions)
    return {"dir": out, "model": model, "plan": p, "sample": sample, "refs": refs,
            "regions": regions, "words": shadow.words(regions)}


def _register_line(address: int) -> re.Pattern:
    return re.compile(rf"(\*\(\(volatile uint32_t \*\) 0x{address:08x}\) = )(0x[0-9a-f]{{8}})")


def _mutant(b, tmp: Path, writes: dict[int, int]) -> Path:
    target = tmp / "m"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(b["dir"], target)
    f = target / "cnn.c"
    text = f.read_text()
    for address, value in writes.items():
        pat = _register_line(address)
        assert len(pat.findall(text)) == 1, hex(address)
        text = pat.sub(lambda m, v=value: m.group(1) + f"0x{v:08x}", text)
    f.write_text(text)
    return target


def _first_differing_layer(b, shadow: Shadow) -> int | None:
    for ll, (got, want) in enumerate(zip(shadow.outputs, b["refs"], strict=True)):
        if got.shape != want.shape or not np.array_equal(got, want):
            return ll
    return None


def _judge(b, tmp: Path, writes: dict[int, int], shadow: Shadow, stats: Counter,
           kind: str) -> None:
    changed = not np.array_equal(shadow.words(b["regions"]), b["words"])
    outcome = execute(_mutant(b, tmp, writes))
    assert outcome.error is None, outcome.error
    if not changed:
        assert outcome.passed, f"{kind}: the answer is unchanged: " + render(outcome)
        stats[kind + " same"] += 1
        return
    assert not outcome.passed, f"{kind}: the answer changes but verify passes"
    stats[kind + " fail"] += 1
    # what `verify --model` names: the first layer whose output differs in the model
    bad = first_bad_layer(outcome, b["refs"])
    want = _first_differing_layer(b, shadow)
    assert bad is not None and bad.layer == want, (kind, bad, want)
    stats[kind + " first bad layer named"] += 1
    if not stats[f"{kind} checked with verify --model, layer {want}"]:
        # once per kind and first bad layer, as a user runs it: the ONNX model's own
        # reference, the printed report
        from onnx2ai8x.verification import verify

        result = verify(tmp / "m", model=b["model"])
        assert not result.passed
        assert result.data["first_bad_layer"]["layer"] == want, result.text
        assert f"first bad layer: {want}" in result.text, result.text
        stats[f"{kind} checked with verify --model, layer {want}"] += 1


def _relocations(b, tmp: Path, stats: Counter) -> None:
    from onnx2ai8x.emit.project import project_data
    from onnx2ai8x.emit.registers import register_program
    from onnx2ai8x.emit.unload import known_answer_layers
    from tests.lowering import lowered

    p = b["plan"]
    net, pl = p.network, p.placement
    outs = [b["refs"][ll] for ll in known_answer_layers(pl)]
    memory = project_data(lowered(pl), b["sample"], outs).memory
    before = {w.address: w.value for w in register_program(lowered(pl), memory)
              .cnn_configure}
    text = (b["dir"] / "cnn.c").read_text()
    live = pl.layers[LIVE].out_offset // 4
    n = net.layers[MOVER].output_dim[0] * net.layers[MOVER].output_dim[1]
    # the mover's input shares no processor with its output: any word offset is allowed
    assert not pl.layers[MOVER].processor_map & pl.layers[MOVER].output_processor_map
    readers = [ll for ll, lay in enumerate(net.layers) if MOVER in (lay.in_sequences or ())]
    assert readers == [MOVER + 1]
    # every word offset whose output region overlaps the live data
    for top in range(live - n + 1, live + n, OFFSET_STEP):
        layers = list(pl.layers)
        layers[MOVER] = dataclasses.replace(layers[MOVER], out_offset=4 * top)
        for r in readers:
            layers[r] = dataclasses.replace(layers[r], in_offset=4 * top)
        moved = dataclasses.replace(pl, layers=tuple(layers))
        after = {w.address: w.value for w in register_program(lowered(moved), memory)
                 .cnn_configure}
        writes = {a: v for a, v in after.items() if before.get(a) != v}
        assert writes and set(writes) <= set(before)
        for a in writes:  # the converter's registers are the project's
            m = _register_line(a).search(text)
            assert m and int(m.group(2), 16) == before[a], hex(a)
        _judge(b, tmp, writes, Shadow(net, moved, b["sample"]), stats, "output offset")


def _row_counts(b, tmp: Path, stats: Counter) -> None:
    from onnx2ai8x.devices import MAX78000

    p = b["plan"]
    net, pl = p.network, p.placement
    regs = MAX78000
    text = (b["dir"] / "cnn.c").read_text()
    for ll, lay in enumerate(net.layers):
        # every quadrant's copy of the layer's register (each drives its own processors)
        addresses = [a for a in (regs.lreg_addr(g, regs.regs.rcnt, ll) for g in range(4))
                     if _register_line(a).search(text)]
        values = {int(_register_line(a).search(text).group(2), 16) for a in addresses}
        assert len(values) == 1
        old = values.pop()
        pad = lay.padding[0]
        assert old == lay.input_dim[0] - 1 + 2 * pad | pad << 16  # see the module doc
        # a pooled layer changes by whole pooling windows (no partial window)
        step = lay.pool_stride[0]
        for d in (-3 * step, -2 * step, -step, step, 2 * step, 3 * step):
            if lay.input_dim[0] + d < max(lay.kernel_size[0], lay.pool[0]):
                continue
            try:
                shadow = Shadow(net, pl, b["sample"], rows={ll: d})
            except ValueError:  # the longer output would run into its own input
                continue
            _judge(b, tmp, dict.fromkeys(addresses, old + d), shadow, stats, "row count")


def test_placement_mutations_fail_verify(base, tmp_path: Path) -> None:
    stats: Counter = Counter()
    _relocations(base, tmp_path, stats)
    _row_counts(base, tmp_path, stats)
    print("\nmutations:", dict(sorted(stats.items())))
    assert stats["output offset fail"] >= 500 // OFFSET_STEP
    assert stats["row count fail"] >= 20
    assert stats["row count fail"] + stats["row count same"] >= 40

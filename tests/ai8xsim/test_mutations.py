"""Seeded single mutations of generated projects must make `verify` FAIL (issue 14).

Each mutation changes one thing in a generated project's C: a used kernel weight, a bias
byte of an output channel, or a processor-enable bit of a layer. Whether the known answer
changes is established without the simulator:

- weight / bias: the converter's own memory writer (`onnx2ai8x.emit.memory`) places the
  changed weight or bias into a new kernel or bias table (one word or byte differs), and
  the numpy reference (`custom_ops.numpy_ref`) runs the changed network;
- processor enable: a disabled processor contributes nothing, so the reference runs the
  network with the weights of that processor's input channels set to zero.

When the reference output changes, `verify` must FAIL; when it does not, `verify` must
PASS (the model is exact). The counts per kind are printed and asserted (>= 300 in all).
"""
from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ai8xsim.verify import execute, render
from onnx2ai8x.devices import MAX78000

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits"
SEED = 1414


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from custom_ops.numpy_ref import output_layers, run_network
    from onnx2ai8x.convert import plan

    out = tmp_path_factory.mktemp("mut") / "digits"
    proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", str(EXAMPLE / "digits.onnx"),
                           "--device", "MAX78000", "-o", str(out), "--sample-input",
                           str(EXAMPLE / "sample.npy"), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    p = plan(EXAMPLE / "digits.onnx", MAX78000, out / "digits.yaml")
    sample = np.load(EXAMPLE / "sample.npy").reshape(p.network.input_shape)
    kat = output_layers(p.network)
    ref = run_network(p.network, sample, outputs=kat)
    assert execute(out).passed
    return {"dir": out, "plan": p, "sample": sample, "kat": kat, "ref": ref,
            "run": run_network}


def _changes(b, network) -> bool:
    new = b["run"](network, b["sample"], outputs=b["kat"])
    return any(not np.array_equal(x, y) for x, y in zip(new, b["ref"], strict=True))


def _table(name: str, values: list[int], fmt: str) -> str:
    body = ", ".join(fmt.format(v) for v in values)
    return f"#define {name} {{ {body} }}"


def _replace_macro(text: str, name: str, new: str) -> str:
    m = re.search(rf"#define {name} \{{[^}}]*\}}", text)
    assert m, name
    return text[:m.start()] + new + text[m.end():]


def _kernel_table(stream) -> list[int]:
    flat = []
    for addr, words in stream:
        flat += [addr, len(words), *words]
    return [*flat, 0]


def _mutant(b, tmp: Path, edit) -> Path:
    target = tmp / "m"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(b["dir"], target)
    edit(target)
    return target


def _verdict(b, tmp: Path, edit, changed: bool, stats: Counter, kind: str) -> None:
    outcome = execute(_mutant(b, tmp, edit))
    assert outcome.error is None, outcome.error
    if changed:
        assert not outcome.passed, f"{kind}: the answer changes but verify passes"
        stats[kind + " fail"] += 1
    else:
        assert outcome.passed, f"{kind}: the answer is unchanged: " + render(outcome)
        stats[kind + " same"] += 1


def _with_layer(network, ll: int, **changes):
    layers = list(network.layers)
    layers[ll] = dataclasses.replace(layers[ll], **changes)
    return dataclasses.replace(network, layers=tuple(layers))


def _weight_mutations(b, tmp, rng, stats, count: int) -> None:
    from onnx2ai8x.emit.memory import kernel_stream
    from onnx2ai8x.map.lowered import lower

    p = b["plan"]
    net, pl = p.network, p.placement
    base = kernel_stream(p.hw)
    weighted = [i for i, lay in enumerate(net.layers) if lay.weights is not None]
    for _ in range(count):
        ll = int(rng.choice(weighted))
        lay = net.layers[ll]
        w = np.array(lay.weights, dtype=np.int64)
        bits = abs(lay.quantization)
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        idx = int(rng.integers(w.size))
        old = int(w.flat[idx])
        new = int(rng.choice([v for v in range(lo, hi + 1) if v != old]))
        w.flat[idx] = new
        mutated = _with_layer(net, ll, weights=w)
        stream = kernel_stream(lower(dataclasses.replace(pl, network=mutated)))
        diff = sum(a != c for (_, x), (_, y) in zip(base, stream, strict=True)
                   for a, c in zip(x, y, strict=True))
        assert diff == 1, "one weight is in one kernel-memory word"
        table = _table("KERNELS", _kernel_table(stream), "0x{:08x}")

        def edit(d: Path, table=table) -> None:
            f = d / "weights.h"
            f.write_text(_replace_macro(f.read_text(), "KERNELS", table))

        _verdict(b, tmp, edit, _changes(b, mutated), stats, "weight")


def _bias_mutations(b, tmp, rng, stats, count: int) -> None:
    from onnx2ai8x.emit.memory import bias_loads
    from onnx2ai8x.map.lowered import lower

    p = b["plan"]
    net, pl = p.network, p.placement
    base = bias_loads(p.hw)
    # layers whose bias is in bias memory (an all-zero bias is not stored)
    biased = [i for i, lay in enumerate(net.layers)
              if lay.bias_hw is not None and np.any(np.asarray(lay.bias_hw) != 0)]
    for _ in range(count):
        ll = int(rng.choice(biased))
        lay = net.layers[ll]
        hw = np.array(lay.bias_hw, dtype=np.int64)
        c = int(rng.integers(hw.size))
        old = int(hw[c])
        new = int(rng.choice([v for v in range(-128, 128) if v != old]))
        hw[c] = new
        bias = np.array(lay.bias, dtype=np.int64)
        bias[c] = new * 128
        mutated = _with_layer(net, ll, bias_hw=hw, bias=bias)
        loads = bias_loads(lower(dataclasses.replace(pl, network=mutated)))
        if len(loads) != len(base):  # the layer's bias became all zero: not stored
            continue
        changed_tables = [i for i, ((_, x), (_, y)) in enumerate(zip(base, loads, strict=True))
                          if list(x) != list(y)]
        assert len(changed_tables) == 1
        i = changed_tables[0]
        table = _table(f"BIAS_{i}", [v & 0xFF for v in loads[i][1]], "0x{:02x}")

        def edit(d: Path, table=table, i=i) -> None:
            f = d / "weights.h"
            f.write_text(_replace_macro(f.read_text(), f"BIAS_{i}", table))

        _verdict(b, tmp, edit, _changes(b, mutated), stats, "bias")


def _register_line(address: int) -> re.Pattern:
    return re.compile(rf"(\*\(\(volatile uint32_t \*\) 0x{address:08x}\) = )(0x[0-9a-f]{{8}})")


def _set_register(d: Path, address: int, value: int) -> None:
    f = d / "cnn.c"
    text = f.read_text()
    pat = _register_line(address)
    assert len(pat.findall(text)) == 1, hex(address)
    f.write_text(pat.sub(lambda m: m.group(1) + f"0x{value:08x}", text))


def _enable_mutations(b, tmp, stats) -> None:
    """Every processor of every plain convolution layer, one at a time."""
    from onnx2ai8x.devices import MAX78000
    from onnx2ai8x.map.hw import multipass

    p = b["plan"]
    net, pl = p.network, p.placement
    regs = MAX78000
    text = (b["dir"] / "cnn.c").read_text()
    for ll, lay in enumerate(net.layers):
        if lay.weights is None or lay.flatten or lay.operands != 1:
            continue
        pmap = pl.layers[ll].processor_map
        procs = [q for q in range(64) if pmap >> q & 1]
        passes, per_pass = multipass(lay.input_channels)
        if passes * per_pass != lay.input_channels and passes > 1:
            continue
        for rank, proc in enumerate(procs):
            addr = regs.lreg_addr(proc // 16, regs.regs.ena, ll)
            m = _register_line(addr).search(text)
            assert m, hex(addr)
            value = int(m.group(2), 16) & ~(1 << proc % 16 | 1 << (proc % 16 + 16))
            w = np.array(lay.weights, dtype=np.int64)
            for k in range(passes):
                c = k * per_pass + rank
                if c < lay.input_channels:
                    w[:, c] = 0
            mutated = _with_layer(net, ll, weights=w)
            _verdict(b, tmp, lambda d, a=addr, v=value: _set_register(d, a, v),
                     _changes(b, mutated), stats, "processor enable")


def test_seeded_single_mutations_fail_verify(base, tmp_path: Path) -> None:
    rng = np.random.default_rng(SEED)
    stats: Counter = Counter()
    _weight_mutations(base, tmp_path, rng, stats, 180)
    _bias_mutations(base, tmp_path, rng, stats, 100)
    _enable_mutations(base, tmp_path, stats)
    print("\nmutations:", dict(sorted(stats.items())))
    failing = sum(v for k, v in stats.items() if k.endswith(" fail"))
    assert sum(stats.values()) >= 300
    assert failing >= 200, stats

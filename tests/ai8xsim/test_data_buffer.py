"""Data-buffer projects (seed 000, Rolling Buffers) on the functional model.

Each small network of tests/emit/data_buffer_nets.py is imported from its vendor sidecar
and checkpoint and converted with its sidecar (the converter implies --zero-sram). The
project must pass its own known-answer test from random power-on memory, keep agreeing
with the ONNX reference over further inferences (the buffer state fed back), and fail
when the buffer is read or shifted one word off, a buffer processor is disabled, or the
data-memory self-test that zeroes the buffer is left out.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from ai8xsim.creader import Check, read_project
from ai8xsim.verify import FAIL, PASS, execute, run_again
from onnx2ai8x.cli import main
from onnx2ai8x.convert import plan
from onnx2ai8x.devices import get_device
from tests.emit.data_buffer_nets import ONE, TWO, TWO_K2, import_net, write_net

pytest.importorskip("torch")

CASES = [(ONE, "MAX78000"), (ONE, "MAX78002"), (TWO, "MAX78000"), (TWO_K2, "MAX78002")]


def _convert(root: Path, net, device: str) -> tuple[Path, Path, Path, np.ndarray]:
    yaml, ckpt, sample = write_net(net, root)
    model = import_net(yaml, ckpt, sample, root / f"{net.name}.onnx", device)
    out = root / "project"
    assert main([str(model), "--device", device, "--sidecar", str(yaml), "--sample-input",
                 str(sample), "-o", str(out), "--quiet"]) == 0
    return out, model, yaml, np.load(sample)


@pytest.fixture(scope="module", params=CASES, ids=[f"{n.name}-{d}" for n, d in CASES])
def project(request, tmp_path_factory):
    net, device = request.param
    root = tmp_path_factory.mktemp(f"{net.name}-{device}")
    return (*_convert(root, net, device), get_device(device))


def _mutate(project_dir: Path, tmp: Path, addresses, change) -> Path:
    """A copy of the project whose stores to `addresses` in cnn.c (those it has) have
    value change(value)."""
    copy = tmp / "mutant"
    shutil.copytree(project_dir, copy)
    text = (copy / "cnn.c").read_text()
    done = 0
    for address in addresses:
        pattern = re.compile(rf"(\*\(\(volatile uint32_t \*\) 0x{address:08x}\) = )"
                             r"0x([0-9a-f]+);")
        text, n = pattern.subn(lambda m: f"{m.group(1)}0x{change(int(m.group(2), 16)):08x};",
                               text)
        done += n
    assert done, "no store to mutate"
    (copy / "cnn.c").write_text(text)
    return copy


def _final_words(outcome, project_dir: Path) -> list[int]:
    """The data-memory words the project's known-answer test reads, as they are now."""
    checks = [op for op in read_project(project_dir).operations if isinstance(op, Check)]
    return [w for addr, _, words in checks[0].groups
            for w in outcome.machine.read_words(addr, len(words))]


def _layer_reg(dev, layer: int, reg: int, processors: int) -> int:
    """Address of a layer register in the first quadrant of `processors`."""
    group = (processors & -processors).bit_length() - 1
    return dev.lreg_addr(group // dev.processors_per_quadrant, reg, layer)


def _reference(result, sample: np.ndarray, state: np.ndarray | None = None):
    """(known-answer layers, the reference's values of them and of the buffer's next
    state) for one inference from `state` (None: the zero buffer)."""
    import custom_ops
    from custom_ops.builder import build_proto
    from onnx2ai8x.emit.unload import known_answer_layers

    wanted = known_answer_layers(result.placement)
    session = custom_ops.session(build_proto(result.network, outputs=wanted))
    feed = {session.get_inputs()[0].name: sample[np.newaxis].astype(np.int8)}
    if state is not None:
        feed[result.network.data_buffer.name] = state
    return wanted, session.run(None, feed)


def _reader(result) -> int:
    """The first layer that reads the data buffer without shifting it."""
    return next(i for i, lay in enumerate(result.network.layers)
                if lay.in_sequences == (-2,) and not lay.buffer_shift)


def test_known_answer_from_random_power_on(project):
    out_dir, *_ = project
    for seed in (None, 1, 2):
        assert execute(out_dir, power_on=seed).verdict == PASS


def test_later_inferences_follow_the_reference(project):
    """Four inferences in a row: the buffer shifts in place and keeps earlier frames; the
    reference is the ONNX model with the buffer's state output fed back."""
    from onnx2ai8x.emit.unload import expected_output

    out_dir, model, yaml, sample, dev = project
    result = plan(model, dev, yaml)
    outcome = execute(out_dir, power_on=3)
    assert outcome.verdict == PASS
    state, filled = None, []
    for k in range(4):
        _, values = _reference(result, sample, state)
        state = values[-1]
        filled.append(int(np.count_nonzero(state)))
        if k:
            run_again(outcome, out_dir)
        for addr, mask, words in expected_output(result.placement,
                                                 [np.asarray(v)[0] for v in values[:-1]]):
            got = outcome.machine.read_words(addr, len(words))
            assert [g & mask for g in got] == [w & mask for w in words], f"inference {k}"
    assert filled[-1] > filled[0]  # the buffer really holds more than one frame


def test_reading_the_buffer_one_word_off_fails(project, tmp_path):
    out_dir, model, yaml, _, dev = project
    result = plan(model, dev, yaml)
    ll = _reader(result)
    pl = result.placement.layers[ll]
    for delta in (1, -1):
        mutant = _mutate(out_dir, tmp_path / str(delta),
                         [_layer_reg(dev, ll, dev.regs.rptr_base, pl.processor_map)],
                         lambda v, d=delta: v + d)
        assert execute(mutant).verdict == FAIL


def test_a_disabled_buffer_processor_fails(project, tmp_path):
    out_dir, model, yaml, sample, dev = project
    result = plan(model, dev, yaml)
    ll = _reader(result)
    procs = result.placement.data_buffer.processors
    # the channel holding the largest value after the first inference (a small one can
    # vanish in the output shift)
    state = _reference(result, sample)[1][-1][0]
    channel = int(np.argmax(np.abs(state.astype(np.int64)).max(axis=1)))
    proc = [p for p in range(64) if procs >> p & 1][channel]
    bit = 1 << proc % dev.processors_per_quadrant
    mutant = _mutate(out_dir, tmp_path, [_layer_reg(dev, ll, dev.regs.ena, 1 << proc)],
                     lambda v: v & ~bit)
    assert execute(mutant).verdict == FAIL


def test_a_shift_one_word_off_shows_in_the_next_inference(project, tmp_path):
    """The first inference shifts zeros; a shift that writes one word too high leaves
    the older frame out of the place the next inference reads it from."""
    out_dir, model, yaml, sample, dev = project
    result = plan(model, dev, yaml)
    ll = next(i for i, lay in enumerate(result.network.layers) if lay.buffer_shift)
    wptrs = [dev.lreg_addr(g, dev.regs.wptr_base, ll) for g in range(dev.quadrants)]
    good, bad = execute(out_dir), execute(_mutate(out_dir, tmp_path, wptrs, lambda v: v + 1))
    assert good.verdict == bad.verdict == PASS  # one inference cannot tell
    run_again(good, out_dir)
    run_again(bad, out_dir)
    assert _final_words(good, out_dir) != _final_words(bad, out_dir)


def test_without_the_data_self_test_random_memory_fails(project, tmp_path):
    """The buffer's zeros come from the data-memory self-test alone (--zero-sram)."""
    out_dir, *_, dev = project
    start = dev.regs.bist_sram[0][1]
    starts = [dev.ctl_addr(g, dev.regs.reg_sram_test) for g in range(dev.quadrants)]
    text = (out_dir / "cnn.c").read_text()
    assert text.count(f"= 0x{start:08x}; // Data SRAM BIST") == dev.quadrants
    mutant = _mutate(out_dir, tmp_path, starts, lambda v: 0 if v == start else v)
    assert execute(mutant).verdict == PASS  # zero memory hides it
    assert execute(mutant, power_on=4).verdict == FAIL


def test_verify_with_the_model_names_the_reader_read_one_word_off(project, tmp_path, capsys):
    """`verify --model` compares every layer with the model's reference, which runs the
    buffer too (zeros, shift, insert): a reader one word off is the first bad layer."""
    out_dir, model, yaml, _, dev = project
    assert main(["verify", str(out_dir), "--model", str(model)]) == 0
    result = plan(model, dev, yaml)
    ll = _reader(result)
    pl = result.placement.layers[ll]
    mutant = _mutate(out_dir, tmp_path, [dev.lreg_addr(g, dev.regs.rptr_base, ll)
                                         for g in range(dev.quadrants)],
                     lambda v: v + 1)
    capsys.readouterr()
    assert main(["verify", str(mutant), "--model", str(model)]) != 0
    assert f"first bad layer: {ll}:" in capsys.readouterr().out
    assert pl.in_sequences == (-2,)

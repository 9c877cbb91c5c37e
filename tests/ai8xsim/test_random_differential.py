"""The random differential (issue 26): generated configurations, our projects in CI, the
vendor's beside them in the opt-in sweep.

CI runs a fixed sample of generated configurations through onnx2ai8x only: each
project must PASS `verify` (its known answer comes from our reference, the executed
registers from the model). ONNX2AI8X_RANDOM_SWEEP=N runs configurations 0..N-1 of each
device through the vendor tool as well (tests/ai8xsim/differential.py: the vendor's C
PASSes, ours is register-exact with it and PASSes); the full sweep of the issue is
`python -m tests.ai8xsim.differential --count 1000 --out DIR`.

The pass-through cases pin the fix of the model's repacking: a pass-through layer
whose input processors have gaps (0, 4, 8, 12, 16) writes them packed, four bytes to a
word (tests/test-passthrough-2.yaml of the vendor's suite: its known answer holds it).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ai8xsim.verify import NOT_MODELLED, PASS, execute, render
from tests.ai8xsim import differential
from tests.ai8xsim.differential import (
    agrees,
    our_project,
    run_config,
    vendor_available,
    vendor_suite_project,
)
from tests.ai8xsim.exceptions import RANDOM_CLASSES, random_class
from tests.ai8xsim.probe_nets import AGREE, EXPECTED, REFUSED, WE_REFUSE, probe
from tests.ai8xsim.random_nets import DEVICES, Config, Weights, generate, write

SWEEP = int(os.environ.get("ONNX2AI8X_RANDOM_SWEEP", "0") or 0)


@pytest.fixture(autouse=True, scope="module")
def _fork_servers(tmp_path_factory: pytest.TempPathFactory):
    """The programs forked from servers that imported them once, as the sweep runs
    them (the same files and results as new interpreters:
    test_fork_servers_judge_as_subprocesses), so the CI sample stays fast."""
    runner = differential.ForkServers(tmp_path_factory.mktemp("forkservers"))
    before, differential.RUNNER = differential.RUNNER, runner
    yield
    differential.RUNNER = before
    runner.close()

# A fixed sample: seeds whose configurations draw the layer kinds the model got wrong
# or that are rare (pass-through and pooling-only with repacked processors,
# element-wise with and without a convolution, CHW input, multi-pass, wide output).
# From 1000 (random_nets.GENERATION_2), seeds the sweep found to agree with the vendor
# and that draw the later features: transposed convolutions, unequal pooling sides and
# output_shift (MAX78000 1019), a flattening linear layer (1128 and MAX78002 1082),
# padding 2 with Conv1d dilation (1111), four operands (1084); depthwise with broadcast,
# read_gap, read-ahead (MAX78002 1003), pool dilation (1081), depthwise moving its data
# (1061). MAX78002 1401 and 1682 place a 1x1 or linear layer's kernels after another
# layer's from the end of kernel memory, where the vendor rounds the start into the
# other layer's word (exceptions.py, "kernels rounded into another layer's kernel word");
# 1200 is refused (a two-pass depthwise ending inside its last quadrant); 1379 moves a
# depthwise Conv1d's data (the time-slot offset the vendor leaves 0); in 1338 a streaming
# layer reads with read_gap (the model's streaming reader used to ignore the gap).
CI_SAMPLE = {"MAX78000": (0, 8, 9, 15, 16, 21, 42, 1019, 1084, 1111, 1128),
             "MAX78002": (10, 13, 14, 17, 26, 30, 36, 67, 1003, 1061, 1081, 1082, 1200,
                          1338, 1379, 1401, 1682)}


def _passthrough(pool: bool, device: str) -> Config:
    extra = "    max_pool: 2\n    pool_stride: 2\n" if pool else ""
    sidecar = ("arch: rnd\ndataset: random\nlayers:\n  - name: l0\n"
               "    processors: 0x0000000000011111\n"
               "    output_processors: 0x000000000001000f\n"
               f"    operation: none\n    out_offset: 0x2000\n{extra}")
    return Config(900 + pool, device, sidecar, (5, 17, 23), (), (), ("passthrough",))


def _ours_pass(config: Config, tmp: Path, verdict: str = PASS) -> None:
    files = write(config, tmp / "in")
    project, why = our_project(files, config.device, tmp / "ours", config.options)
    assert project is not None, why
    outcome = execute(project)
    assert outcome.verdict == verdict, render(outcome)
    assert outcome.checked_words > 0 or verdict != PASS


def _one_layer(device: str, body: str, shape: tuple[int, ...],
               weights: tuple[Weights, ...] = ()) -> Config:
    sidecar = "arch: rnd\ndataset: random\nlayers:\n  - name: l0\n" + body
    return Config(950, device, sidecar, shape, weights)


def test_passthrough_first_processor_writes_lane_0(tmp_path: Path) -> None:
    """Input on processors 2-3 leaves on processors 0-1 (lanes 0-1 of the word the
    write pointer names): the first enabled processor takes the first turn."""
    _ours_pass(_one_layer("MAX78000", "    processors: 0x000000000000000c\n"
                          "    output_processors: 0x0000000000000003\n"
                          "    operation: none\n    out_offset: 0x2000\n", (2, 5, 6)),
               tmp_path)




@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pool", [False, True], ids=["plain", "pool"])
def test_passthrough_with_processor_gaps_writes_packed(pool: bool, device: str,
                                                       tmp_path: Path) -> None:
    _ours_pass(_passthrough(pool, device), tmp_path)


@pytest.mark.parametrize(("device", "seed"),
                         [(d, s) for d in DEVICES for s in CI_SAMPLE[d]])
def test_generated_configuration_passes(device: str, seed: int, tmp_path: Path) -> None:
    """Our project PASSes, or gets the verdict of a classified disagreement the
    configuration belongs to (then an expected failure)."""
    config = generate(seed, device)
    files = write(config, tmp_path / "in")
    project, why = our_project(files, config.device, tmp_path / "ours", config.options)
    outcome = execute(project) if project is not None else None
    if outcome is not None and outcome.verdict == PASS:
        assert outcome.checked_words > 0
        return
    got = "refused" if outcome is None else outcome.verdict
    entry = next((c for c in RANDOM_CLASSES if c.applies(config.sidecar, config.options)
                  and c.our_outcome == got and c.refusal in why), None)
    assert entry is not None, why if outcome is None else render(outcome)
    if outcome is None:  # refused: the class's reason, named at a layer
        assert why.startswith("error[map.") and entry.refusal, why
        return
    pytest.xfail(f"{entry.reason.value}: {entry.why}")


def test_generator_is_deterministic_and_varied() -> None:
    a = [generate(s, "MAX78000") for s in range(40)]
    assert a == [generate(s, "MAX78000") for s in range(40)]
    kinds = {k.split("-")[0] for c in a for k in c.kinds}
    assert {"conv3x3", "conv1x1", "passthrough", "pool", "eltwise"} <= kinds
    assert any(isinstance(w, Weights) and w.bits < 8 for c in a for w in c.weights)


# The later features' sidecar keys (random_nets.GENERATION_2)
LATER_KEYS = ("groups:", "read_gap:", "readahead:", "dilation:", "operands:",
              "output_shift:", "convtranspose2d", "mlp", "3x3\n    pad: 2", "_pool: [")


def test_seeds_below_generation_2_draw_as_before() -> None:
    """Seeds 0-199 give the configurations the first generator gave (the digest was
    computed with random_nets.py as of 150a4a7, before the later features), so earlier
    sweeps' records and the CI sample keep their meaning."""
    digest = hashlib.sha256()
    for device in DEVICES:
        for seed in range(200):
            c = generate(seed, device)
            assert not any(k in c.sidecar for k in LATER_KEYS), (device, seed)
            digest.update(repr((c.sidecar, c.input_shape, c.options, c.kinds,
                                [(w.name, w.shape, w.bias, w.bits, w.output_shift)
                                 for w in c.weights])).encode())
    assert digest.hexdigest() == \
        "41821fe4450712adc6d7bb5fef3ee4d74117c3e5acad039be0995c3df24cf03f"


def test_generation_2_draws_the_later_features() -> None:
    drawn = {d: "".join(generate(s, d).sidecar for s in range(1000, 1200)) for d in DEVICES}
    for key in LATER_KEYS:
        assert key in drawn["MAX78002"], key
    for key in ("groups:", "read_gap:", "readahead:", "pool_dilation:"):
        assert key not in drawn["MAX78000"], key  # (MAX78002 only)
    assert "operands: 4" in drawn["MAX78000"] and "flatten: true" in drawn["MAX78000"]


@pytest.mark.skipif(not SWEEP, reason="set ONNX2AI8X_RANDOM_SWEEP=N to run the sweep")
@pytest.mark.parametrize("device", DEVICES)
def test_sweep_against_the_vendor(device: str, tmp_path: Path) -> None:
    if not vendor_available():
        pytest.skip("vendor synthesis tool or c2trace absent")
    bad = []
    for seed in range(SWEEP):
        config = generate(seed, device)
        result = run_config(config, tmp_path / str(seed))
        if not agrees(result) and random_class(config, result) is None:
            bad.append(f"{result.name}: vendor {result.vendor}, ours {result.ours}, "
                       f"same {result.same}: {result.detail}")
    assert not bad, "\n".join(bad)


def test_fork_server_runs_a_program_as_a_new_interpreter(tmp_path: Path) -> None:
    """Exit code, standard output and standard error of onnx2ai8x runs (a success, a
    user error, a help text) are the same forked from the server as from a new
    interpreter (the vendor's tool: test_fork_servers_judge_as_subprocesses)."""
    fresh, forked = differential.Subprocess(tmp_path), differential.ForkServers(tmp_path)
    try:
        for args in (["--version"], ["verify", "--help"],
                     ["convert", str(tmp_path / "absent.onnx"), "--device", "MAX78000",
                      "-o", str(tmp_path / "out")]):
            assert forked.run("ours", args) == fresh.run("ours", args), args
        assert forked.run("ours", ["--version"])[0] == 0
        assert forked.run("ours", ["verify", str(tmp_path / "absent")])[0] != 0
    finally:
        forked.close()


def _tree(root: Path) -> dict[str, bytes]:
    """The files under `root` by relative path, `root` itself written as ROOT."""
    return {str(f.relative_to(root)): f.read_bytes().replace(str(root).encode(), b"ROOT")
            for f in sorted(root.rglob("*")) if f.is_file()}


@pytest.mark.skipif(not SWEEP, reason="set ONNX2AI8X_RANDOM_SWEEP=N to run the sweep")
@pytest.mark.parametrize("device", DEVICES)
def test_fork_servers_judge_as_subprocesses(device: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep's fast path (programs forked from servers that imported them once)
    writes the same files and reaches the same result as new interpreters, on the
    first min(N, 10) configurations of each device."""
    if not vendor_available():
        pytest.skip("vendor synthesis tool or c2trace absent")
    runners = {"subprocess": differential.Subprocess(tmp_path),
               "fork": differential.ForkServers(tmp_path)}
    try:
        for seed in range(min(SWEEP, 10)):
            seen = {}
            for mode, runner in runners.items():
                monkeypatch.setattr(differential, "RUNNER", runner)
                work = tmp_path / "work"
                result = run_config(generate(seed, device), work)
                seen[mode] = (result, _tree(work))
                work.rename(tmp_path / f"{mode}-{seed}")
            assert seen["fork"][0] == seen["subprocess"][0], seed
            assert seen["fork"][1].keys() == seen["subprocess"][1].keys(), seed
            differ = [k for k, v in seen["fork"][1].items() if seen["subprocess"][1][k] != v]
            assert not differ, (seed, differ)
    finally:
        runners["fork"].close()


def _calcx4(kernel: int, bits: int, cin: int, cout: int) -> Config:
    """Three MAX78002 layers, all calcx4: 3 -> cin (3x3), cin -> cout and cout -> 64
    (`kernel` x `kernel`, `bits`-bit weights)."""
    def procs(ch: int) -> str:
        return f"0x{(1 << ch // ((ch + 63) // 64)) - 1:016x}"

    body = ("    processors: 0x0000000000000007\n    calcx4: true\n"
            "    operation: conv2d\n    kernel_size: 3x3\n    pad: 1\n"
            "    activate: ReLU\n    out_offset: 0x4000\n")
    for i, (p, act) in enumerate(((procs(cin), "None"), (procs(cout), "ReLU")), 1):
        body += (f"  - name: l{i}\n    processors: {p}\n    calcx4: true\n"
                 f"    operation: conv2d\n    kernel_size: {kernel}x{kernel}\n"
                 f"    pad: {kernel // 2}\n    activate: {act}\n"
                 f"    out_offset: 0x{0x8000 * (i % 2):04x}\n")
    return _one_layer("MAX78002", body, (3, 6, 5), (
        Weights("l0", (cin, 3, 3, 3), True, 8, 0),
        Weights("l1", (cout, cin, kernel, kernel), True, bits, 0),
        Weights("l2", (64, cout, kernel, kernel), False, bits, 0)))


@pytest.mark.parametrize(("bits", "cin", "cout"), [(4, 64, 128), (2, 128, 64), (1, 64, 64)])
def test_calcx4_runs_3x3_kernels_of_every_width(bits: int, cin: int, cout: int,
                                                tmp_path: Path) -> None:
    """calcx4 on 3x3 kernels narrower than 8 bits (multi-pass in and out): executed,
    and PASS (the vendor's projects for the same configurations PASS as well and are
    register-exact with ours: the differential's probes)."""
    _ours_pass(_calcx4(3, bits, cin, cout), tmp_path)


def test_calcx4_on_1x1_kernels_is_not_modelled(tmp_path: Path) -> None:
    _ours_pass(_calcx4(1, 8, 64, 64), tmp_path, NOT_MODELLED)


# The vendor suite's calcx4 configurations that are not golden cases (3x3 kernels,
# 2-bit weights, five passes, streaming from the FIFOs, with and without read-ahead):
# the vendor tool runs them with its own sample weights (tests/weights_*.npy).
HELD_OUT_X4 = ("ffsx4-nopad-multipass5q2", "ffsx4readahead-nopad-multipass5",
               "ffsx4readahead-nopad-multipass5-bias")


@pytest.mark.skipif(not SWEEP, reason="set ONNX2AI8X_RANDOM_SWEEP=N to run the sweep")
@pytest.mark.parametrize("name", HELD_OUT_X4)
def test_vendor_calcx4_suite_configuration_passes(name: str, tmp_path: Path) -> None:
    if not vendor_available():
        pytest.skip("vendor synthesis tool or c2trace absent")
    project, why = vendor_suite_project(name, "MAX78002", tmp_path, ("--fifo",))
    assert project is not None, why
    outcome = execute(project)
    assert outcome.verdict == PASS, render(outcome)


def test_passthrough_output_not_packed_is_refused(tmp_path: Path) -> None:
    """Output processors of a layer without a convolution must be its input processors
    packed per quadrant (the vendor tool refuses otherwise): input on 0-3 and 16 cannot
    leave on 0-4 (found by the differential: the project the converter used to write
    for it failed its known answer)."""
    config = _one_layer("MAX78000", "    processors: 0x000000000001000f\n"
                        "    output_processors: 0x000000000000001f\n"
                        "    operation: none\n    out_offset: 0x2000\n", (5, 6, 7))
    files = write(config, tmp_path / "in")
    project, why = our_project(files, config.device, tmp_path / "ours")
    assert project is None
    assert "sidecar.processors" in why and "quadrant 0" in why


@pytest.mark.skipif(not SWEEP, reason="set ONNX2AI8X_RANDOM_SWEEP=N to run the sweep")
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_probe_against_the_vendor(name: str, tmp_path: Path) -> None:
    """The hand-written probes (probe_nets.py) get what EXPECTED says of them."""
    if not vendor_available():
        pytest.skip("vendor synthesis tool or c2trace absent")
    want, why = EXPECTED[name]
    r = run_config(probe(name), tmp_path)
    if want == AGREE:
        assert agrees(r), r
    elif want == REFUSED:
        assert (r.vendor, r.ours) == ("refused", "refused"), r
    elif want in WE_REFUSE:
        assert (r.vendor, r.ours) == WE_REFUSE[want], r
    else:
        assert (r.vendor, r.ours, r.same) == (want, want, True), r


# The configuration each class of the sweep was found on (tests/ai8xsim/exceptions.py)
FOUND_ON = {
    "read-ahead with a pass shift count": ("MAX78002", 1016),
    "pool dilation with a window side other than 2": ("MAX78002", 1092),
    "depthwise with 32-bit output": ("MAX78002", 1073),
    "multi-pass depthwise ending inside its last quadrant": ("MAX78002", 1200),
    "depthwise Conv1d moving its data": ("MAX78002", 1379),
    "pool dilation on a window side of 1": ("MAX78002", 1399),
    "kernels rounded into another layer's kernel word": ("MAX78002", 1401),
    "CHW input read again; the vendor's known answer misses it": ("MAX78002", 1518),
    "FIFO input read again; the vendor's known answer misses it": ("MAX78000", 1535),
    "calcx4 kernels short of whole columns; the known answer misses it": ("MAX78002", 1385),
}


@pytest.mark.parametrize("name", sorted(FOUND_ON))
def test_class_recognizes_the_configuration_it_was_found_on(name: str) -> None:
    entry = next(c for c in RANDOM_CLASSES if c.name == name)
    device, seed = FOUND_ON[name]
    config = generate(seed, device)
    assert entry.applies(config.sidecar, config.options)
    # and not a configuration of the same device that agreed in the sweep (seed 1000)
    plain = generate(1000, device)
    assert not entry.applies(plain.sidecar, plain.options)

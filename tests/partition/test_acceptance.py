"""Issue 28's acceptance: models made by real tools with one of each kind of CPU segment
(a 5x5 and a 7x7 stride-2 stem, a LeakyReLU between accelerator layers, a large Dense
head, a Sigmoid multi-label head, a SeparableConv2D on MAX78000, a Hardswish
MobileNetV3-style block on MAX78002) convert with --cpu-fallback, their known answer is
the reference's (the whole split model's ONNX, run by onnxruntime), `verify` passes, and
the firmware builds with zero warnings (tests/emit/test_firmware_build's flow)."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

# The SDK's make flow against a private copy of the MSDK, warnings as errors and the
# project's own sources (the CPU files too) compiled again with -Wextra -Wformat.
from tests.emit.test_firmware_build import _build, _estimate_matches, sdk  # noqa: F401
from tests.float_onnx.helpers import cli, kat_words

from .models import CASES, Case, calibration, model_file

IDS = [c.name for c in CASES]


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """name -> (project, model, calibration, stdout): every case converted once."""
    out = {}
    for case in CASES:
        tmp = tmp_path_factory.mktemp(case.name)
        model, cal = model_file(case, tmp), calibration(case, tmp)
        project = tmp / "project"
        code, stdout, stderr = cli([model, "--device", case.device, "--calibration", cal,
                                    "-o", project, "--cpu-fallback"])
        out[case.name] = (project, model, cal, stdout, code, stderr)
    return out


def _case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


@pytest.mark.parametrize("name", IDS)
def test_converts_with_the_split_shown(name: str, converted: dict) -> None:
    project, _, _, stdout, code, stderr = converted[name]
    assert code == 0, stderr
    assert "SPLIT BETWEEN THE ARM CORE AND THE ACCELERATOR" in stdout
    split = json.loads((project / "report.json").read_text())["partition"]
    kinds = {"stem": bool(split["stem_nodes"]), "mid": bool(split["between_nodes"]),
             "head": bool(split["head_nodes"])}
    assert {k for k, v in kinds.items() if v} == set(_case(name).segments)
    assert split["refusals"], "a split names the refusal that made it"
    assert all(r["cycles"] > 0 for r in split["cpu_layers"])
    # every layer in the order the project runs it, with where it runs
    where = [(s["segment"], s["runs_on"]) for s in split["sequence"]]
    assert ("accelerator", "accelerator") in where
    assert {s for s, r in where if r == "cpu"} == \
        {s["segment"] for s in split["segments"]}
    if "stem" in _case(name).segments:
        assert where[0] == ("cpu-stem", "cpu")
    if "head" in _case(name).segments:
        assert where[-1] == ("cpu-head", "cpu")
    for f in ("cpu_layers.c", "cpu_layers.h", "cpu_io.c", "cpu_io.h"):
        assert (project / f).is_file()


@pytest.mark.parametrize("name", IDS)
def test_known_answer_is_the_reference(name: str, converted: dict) -> None:
    """The project's known answer equals the whole model's ONNX (CPU segments as
    standard integer ONNX, the accelerator's parts as ai8x-ONNX) run by onnxruntime on
    the project's sample, and the pipeline the converter computed it with."""
    import onnx

    from onnx2ai8x.convert import plan
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.emit.unload import expected_output
    from onnx2ai8x.frontend import QuantizeRequest
    from onnx2ai8x.partition.build import partition
    from onnx2ai8x.partition.project import run_joined
    from onnx2ai8x.partition.reference import run_full

    project, model, cal, _, code, _ = converted[name]
    assert code == 0
    case = _case(name)
    part = partition(model, get_device(case.device), QuantizeRequest(calibration=cal))
    joined = run_joined(part, np.load(cal)[:1])
    full = onnx.load(str(project / f"{model.stem}_with_cpu.onnx"))
    got = run_full(full, joined.sample)
    assert np.array_equal(got.reshape(-1), np.asarray(joined.final).reshape(-1))
    io = (project / "cpu_io.c").read_text()
    if "head" in case.segments:
        body = re.search(r"cpu_expected\[\d+\] = \{(.*?)\};", io, re.S).group(1)
        assert [int(v) for v in re.findall(r"-?\d+", body)] == \
            [int(v) for v in got.reshape(-1)]
        return
    if "stem" in case.segments:
        body = re.search(r"cpu_sample\[\d+\] = \{(.*?)\};", io, re.S).group(1)
        assert [int(v) for v in re.findall(r"-?\d+", body)] == \
            [int(v) for v in joined.sample.reshape(-1)]
    acc = plan(project / f"{model.stem}.onnx", get_device(case.device), None)
    want = expected_output(acc.placement, [got.reshape(joined.acc_output.shape)])
    assert kat_words(project) == [(a, m, list(w)) for a, m, w in want]


@pytest.mark.parametrize("name", IDS)
def test_verify_passes(name: str, converted: dict) -> None:
    """verify runs stem (host C), accelerator (ai8xsim), CPU segments between its runs
    and head in order, and the known answer holds."""
    project, _, _, _, code, _ = converted[name]
    assert code == 0
    rc, stdout, stderr = cli(["verify", project])
    assert rc == 0, stdout + stderr
    assert stdout.startswith("PASS"), stdout
    for seg, text in (("stem", "CPU stem"), ("head", "CPU head"), ("mid", "CPU segment")):
        assert (text in stdout) == (seg in _case(name).segments), stdout


def test_verify_fails_when_the_cpu_code_is_wrong(converted: dict, tmp_path: Path) -> None:
    """A CPU segment that computes something else fails verify (the check can fail)."""
    import shutil

    project = converted["torch_leaky_between"][0]
    broken = tmp_path / "broken"
    shutil.copytree(project, broken)
    c = (broken / "cpu_layers.c").read_text()
    table = re.search(r"(static const int8_t \w+\[256\] = \{\s*)(-?\d+)", c)
    assert table is not None
    c = c[:table.start(2)] + str(int(table.group(2)) ^ 1) + c[table.end(2):]
    # flip every table entry's low bit: every value the LeakyReLU writes changes
    c = re.sub(r"(static const int8_t \w+\[256\] = \{)(.*?)(\};)",
               lambda m: m.group(1) + re.sub(r"-?\d+", lambda v: str(int(v.group()) ^ 1),
                                             m.group(2)) + m.group(3), c, flags=re.S)
    (broken / "cpu_layers.c").write_text(c)
    rc, stdout, _ = cli(["verify", broken])
    assert rc != 0 and "FAIL" in stdout, stdout


CPU_SOURCES = frozenset({"main.c", "cnn.c", "cpu_layers.c", "cpu_io.c"})


@pytest.mark.parametrize("name", IDS)
def test_firmware_builds_without_warnings(name: str, converted: dict,
                                          sdk: Path) -> None:  # noqa: F811
    project, _, _, _, code, _ = converted[name]
    assert code == 0
    result = _build(project, _case(name).device, "EvKit_V1", sdk, sources=CPU_SOURCES)
    # the fit check convert makes counts the Arm-core layers' constants too
    _estimate_matches(project, _case(name).device, result)


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
def test_split_project_builds_in_the_sdk_tree(device: str, converted: dict,
                                              sdk: Path) -> None:  # noqa: F811
    """Issue 28 item 3: a project with CPU segments also builds where users put vendor
    examples, inside the SDK tree, without MAXIM_PATH (its Makefile finds the SDK it
    sits in)."""
    name = next(c.name for c in CASES if c.device == device)
    project = converted[name][0]
    in_tree = sdk / "Examples" / device / "CNN" / f"split-{name}"
    shutil.copytree(project, in_tree, ignore=shutil.ignore_patterns("build"))
    try:
        result = _build(in_tree, device, "EvKit_V1", None, sources=CPU_SOURCES)
        assert "Using the MSDK this project sits in" in result.log
    finally:
        shutil.rmtree(in_tree)

"""The MSDK's own CNN examples, read in place by `verify` (issue 14).

`Examples/MAX78000/CNN/mnist` is a generated known-answer project: it passes.

`Examples/MAX78002/CNN/kws20_demo` is an application: its main() reads a microphone and
checks nothing, so verify drives the project's API with its sampledata.h and checks
its sampleoutput.h. It fails on all 21 words, and the cause is the example, not the
model: its cnn.c and weights.h are the vendor tool's output for the 2023 KWS20 v3 weights
(the checkpoint cnn.c names, trained 2023.02.13, in the synthesis repository since
commit 36b230b), while its sampleoutput.h is still the one written for the previous
weights (2021, commit d2836d0); the demo never runs it, so nobody noticed. The opt-in test
below establishes this with the vendor tool itself (the version before its kernel
placement change e174459, which wrote the example): for the 2023 weights it writes the
example's cnn.c and weights.h exactly, its own known answer equals what verify computes
for the SDK project, and for the 2021 weights its known answer is the SDK's file.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from ai8xsim.creader import Check, Load, LoadSample, read_project
from ai8xsim.verify import execute, render
from tests.ai8xsim.exceptions import Kind, judge
from tests.conftest import GOLDEN

EXAMPLES = GOLDEN.parent / "msdk" / "Examples"
MNIST = EXAMPLES / "MAX78000" / "CNN" / "mnist"
KWS = EXAMPLES / "MAX78002" / "CNN" / "kws20_demo"
MIRROR = Path(os.environ.get(
    "ONNX2AI8X_SYNTH_MIRROR",
    GOLDEN.parents[1] / ".mirror" / "analogdevicesinc+ai8x-synthesis" / "repo"))
PYTHON = Path(os.environ.get("ONNX2AI8X_VENDOR_PYTHON", "/tmp/vendor/venv/bin/python"))

TOOL_BEFORE_PLACEMENT_CHANGE = "e174459~1"
WEIGHTS_2023 = "36b230b"  # "Update KWS20 weights on MAX78002" (2023-02-15)
WEIGHTS_2021 = "d2836d0"  # "Initial support for MAX78002" (2021-11-05)


def _need(path: Path) -> None:
    if not path.is_dir():
        pytest.skip(f"{path} is absent")


def test_sdk_mnist_passes() -> None:
    _need(MNIST)
    outcome = execute(MNIST)
    judge(str(MNIST.relative_to(EXAMPLES)), Kind.SDK, outcome)
    assert outcome.checked_words == 10 and outcome.note is None


def test_sdk_kws20_demo_is_driven_through_its_api() -> None:
    _need(KWS)
    project = read_project(KWS)
    assert project.device == "MAX78002" and project.driven
    samples = [op for op in project.operations if isinstance(op, LoadSample)]
    # 128 channels of 128 samples, HWC: 16 memories of 256 words (cnn_load_data's layout)
    assert [s.processor for s in samples] == list(range(0, 64, 4))
    assert {len(s.words) for s in samples} == {256}
    assert all(op.express for op in project.operations if isinstance(op, Load))
    outcome = execute(KWS)
    assert outcome.error is None and len(outcome.layers) == 9
    assert outcome.checked_words == 21
    # stale sampleoutput.h (see the module docstring and the test below)
    assert len(outcome.mismatches) == 21
    assert "sampleoutput.h" in render(outcome)
    from onnx2ai8x.verification import verify

    result = verify(KWS)
    assert not result.passed and "sampleoutput.h" in result.data["note"]
    # the example's allow-list entry (a vendor defect): it must keep failing, no other way
    judge(str(KWS.relative_to(EXAMPLES)), Kind.SDK, outcome)


def _words(text: str, name: str) -> list[int]:
    body = re.search(rf"#define\s+{name}\s*\{{(.*?)\}}", text, re.S).group(1)
    return [int(v, 0) for v in re.findall(r"0x[0-9a-fA-F]+", body)]


def _code(path: Path) -> str:
    """C text without comments and blank space (the license headers differ)."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    return re.sub(r"\s+", "", re.sub(r"//[^\n]*", "", text))


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory, request) -> dict[str, Path]:
    if not (request.config.getoption("--golden-all")
            or os.environ.get("ONNX2AI8X_VENDOR_PROJECTS")):
        pytest.skip("regenerating the SDK example: run with --golden-all or "
                    "ONNX2AI8X_VENDOR_PROJECTS=1")
    _need(KWS)
    _need(MIRROR)
    if not PYTHON.is_file():
        pytest.skip(f"vendor tool's Python {PYTHON} is absent")
    root = tmp_path_factory.mktemp("kws20_demo")
    tool = root / "tool"
    tool.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(MIRROR), "archive", TOOL_BEFORE_PLACEMENT_CHANGE, "ai8xize.py",
         "izer", "assets", "networks", "tests/sample_kws_20.npy"],
        capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tool)], input=archive.stdout, check=True)
    out = {}
    for commit in (WEIGHTS_2023, WEIGHTS_2021):
        ck = root / f"{commit}.pth.tar"
        ck.write_bytes(subprocess.run(
            ["git", "-C", str(MIRROR), "show",
             f"{commit}:trained/ai87-kws20_v3-qat8-q.pth.tar"],
            capture_output=True, check=True).stdout)
        # the options cnn.c of the SDK example names (--timer only adds timing code)
        proc = subprocess.run(
            [str(PYTHON), "ai8xize.py", "--test-dir", str(root / commit), "--prefix", "p",
             "--checkpoint-file", str(ck), "--config-file",
             "networks/ai87-kws20-v3-hwc.yaml", "--sample-input", "tests/sample_kws_20.npy",
             "--device", "MAX78002", "--softmax", "--timer", "0", "--no-version-check",
             "--overwrite"],
            cwd=tool, capture_output=True, text=True, timeout=900,
            env={**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
        if proc.returncode != 0:
            pytest.skip(f"vendor tool failed: {(proc.stdout + proc.stderr)[-300:]}")
        out[commit] = root / commit / "p"
    return out


def test_sdk_kws20_demo_known_answer_is_from_the_previous_weights(regenerated) -> None:
    new, old = regenerated[WEIGHTS_2023], regenerated[WEIGHTS_2021]
    # the SDK example's network is the 2023 one, with the same sample input
    for name in ("cnn.c", "weights.h", "sampledata.h"):
        assert _code(new / name) == _code(KWS / name), name
    # the vendor's known answer for that network: verify computes exactly this
    passed = execute(new)
    assert passed.passed, render(passed)
    want = _words((new / "sampleoutput.h").read_text(), "SAMPLE_OUTPUT")
    sdk = _words((KWS / "sampleoutput.h").read_text(), "SAMPLE_OUTPUT")
    assert want != sdk
    outcome = execute(KWS)
    check = next(op for op in read_project(new).operations if isinstance(op, Check))
    for addr, _mask, words in check.groups:
        assert outcome.machine.read_words(addr, len(words)) == list(words)
    # and the SDK's sampleoutput.h is the vendor's known answer for the 2021 weights
    assert _words((old / "sampleoutput.h").read_text(), "SAMPLE_OUTPUT") == sdk

"""Speed work must not change a byte (issue 39): a fixed set of conversions, each file of
each written project compared with a digest recorded from the tree before the change.

The set spans the paths the emitter takes: the examples (ai8x-ONNX, a float model
quantized with calibration data, the CPU fallback) under the options that change the
generated C (FIFO, fast FIFO, RISC-V, mlator, energy, no known answer), and golden cases
of both parts with their sidecars, samples and recorded options (streaming, snoop
units, multi-pass, 32-bit outputs, unloads that read in a loop).

The digests live in tests/project_digests.json. When a change is MEANT to change what is
written, rewrite them and say why in the commit:

    python -m tests.test_project_bytes --write
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIGESTS = Path(__file__).with_name("project_digests.json")
DIGITS = ROOT / "examples" / "digits"
FLOAT = ROOT / "examples" / "digits_float"

# name -> (model, sample, sidecar, extra options); a model "golden:CASE" is the golden
# case imported (its sidecar, sample and vendor options are used)
EXAMPLES: dict[str, tuple[Path, tuple[str, ...]]] = {
    "digits": (DIGITS / "digits.onnx", ()),
    "digits-softmax-timer-mlator": (DIGITS / "digits.onnx",
                                    ("--softmax", "--timer", "0", "--mlator")),
    "digits-fifo": (DIGITS / "digits.onnx", ("--fifo",)),
    "digits-riscv-fast-fifo": (DIGITS / "digits.onnx", ("--riscv", "--fast-fifo")),
    "digits-energy-no-kat": (DIGITS / "digits.onnx", ("--energy", "--no-kat")),
    "digits-float": (FLOAT / "digits_float.onnx",
                     ("--calibration", str(FLOAT / "calibration.npy"))),
    "digits-cpu-stem": (FLOAT / "digits_cpu_stem.onnx",
                        ("--calibration", str(FLOAT / "calibration.npy"),
                         "--cpu-fallback")),
}
GOLDEN_CASES = ("ai85-mnist", "ai85-kws20_v3", "ai85-cifar-10", "ai85-cats-dogs",
                "ai87-kws20_v3_1", "ai87-cats-dogs", "ai85-suite-fifostream-pool-stride-hwc",
                "ai85-suite-multilayer-eltwise", "ai85-suite-conv1d-abs",
                "ai87-suite-snoop2-skip", "ai87-suite-x4-multipass5-stream",
                "ai87-suite-wideout-binary", "ai87-suite-depthwise-mixed")


def _digests(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _convert(argv: list[str]) -> None:
    from onnx2ai8x import cli

    code = cli.main([*argv, "--quiet"])
    assert code == 0, f"conversion failed: {argv}"


def _example(name: str, work: Path) -> dict[str, str]:
    model, extra = EXAMPLES[name]
    # the examples' own sample where the model takes it (the float ones use calibration)
    sample = ("--sample-input", str(DIGITS / "sample.npy")) if model.parent == DIGITS else ()
    out = work / "project"
    _convert([str(model), "--device", "MAX78000", "-o", str(out), *sample, *extra])
    return _digests(out)


def _golden(name: str, work: Path) -> dict[str, str]:
    from tests.golden import pipeline

    out, proc = pipeline.convert_case(name, work, sidecar=True)
    assert proc.returncode == 0, proc.stderr
    return _digests(out)


def _make(name: str) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        if name in EXAMPLES:
            return _example(name, Path(tmp))
        return _golden(name, Path(tmp))


def _golden_available() -> bool:
    from tests.conftest import GOLDEN

    try:
        import torch  # noqa: F401 - import-izer reads the golden checkpoints with it
    except ImportError:
        return False
    return GOLDEN.is_dir()


@pytest.mark.parametrize("name", [*EXAMPLES, *GOLDEN_CASES])
def test_project_bytes_unchanged(name):
    if name in GOLDEN_CASES and not _golden_available():
        pytest.skip("needs ../shared/golden and torch")
    recorded = json.loads(DIGESTS.read_text())[name]
    made = _make(name)
    assert sorted(made) == sorted(recorded), "the project's files changed"
    changed = [f for f in recorded if made[f] != recorded[f]]
    assert not changed, f"these files are no longer byte-identical: {changed}"


def main() -> None:
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m tests.test_project_bytes --write")
    record = {name: _make(name) for name in [*EXAMPLES, *GOLDEN_CASES]}
    DIGESTS.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {DIGESTS} ({len(record)} projects)")


if __name__ == "__main__":
    main()

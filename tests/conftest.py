"""Shared test fixtures: where the golden corpus lives and which cases run by default."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parents[2] / "shared" / "golden"

# A fixed, representative subset run by default: every operator, both devices, multi-pass,
# element-wise, concatenation, 1D, transposed, streaming, low-bit and binary weights.
# The full sweep runs with --golden-all.
REPRESENTATIVE = [
    "ai85-mnist",
    "ai85-cifar-10",
    "ai85-kws20_v3",
    "ai85-cats-dogs",
    "ai87-kws20_v3_1",
    "ai87-cats-dogs",
    "ai85-suite-conv1d-pool-5-q4",
    "ai85-suite-conv1d-dilation7-pad0",
    "ai85-suite-conv1d-multilayer-q1248",
    "ai85-suite-chan1024",
    "ai85-suite-eltwiseadd-poolafter-avg",
    "ai85-suite-eltwisexor",
    "ai85-suite-eltwisesub",
    "ai85-suite-mpadd3-256",
    "ai85-suite-mlpflatten768to100-quant4",
    "ai85-suite-flatten-bias",
    "ai85-suite-passthrough-pool",
    "ai85-suite-pooling16x16s7",
    "ai85-suite-upsample-nonsquare-pad1A",
    "ai85-suite-fifostream-pool-stride-hwc",
    "ai85-suite-stream-transition",
    "ai85-suite-widein-bias-q2",
    "ai85-suite-wideout-q4",
    "ai85-suite-multilayer-eltwise",
    "ai85-suite-outputshift",
    "ai85-suite-conv1d-abs",
    "ai87-suite-depthwise-mixed",
    "ai87-suite-depthwiset2d",
    "ai87-suite-conv2d-pooldilation-mixed-stride3",
    "ai87-suite-multipass5m8",
    "ai87-suite-widein-bias-binary",
    "ai87-suite-wideout-binary",
    "ai87-suite-snoop2-range",
    "ai87-suite-snoop2-skip",
    "ai87-suite-x4-multipass5-stream",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--golden-all", action="store_true", default=False,
                     help="run golden tests on every case in ../shared/golden")
    parser.addoption("--fuzz-cases", type=int, default=0,
                     help="hostile-input cases per input kind (default: the fixed CI "
                          "counts in tests/fuzz/test_fuzz.py)")
    parser.addoption("--fuzz-seed", type=int, default=15,
                     help="seed of the hostile-input cases")
    parser.addoption("--matrix-all", action="store_true", default=False,
                     help="run every cell of the layer x exporter matrix (tests/matrix), "
                          "not only its representative subset")


def all_cases() -> list[str]:
    if not GOLDEN.is_dir():
        return []
    return sorted(p.name for p in GOLDEN.iterdir() if (p / "case.json").is_file())


def golden_params(config: pytest.Config | None = None) -> list:
    """Case names to parametrize golden tests with (full sweep marked slow)."""
    cases = all_cases()
    params = []
    for name in cases:
        marks = [] if name in REPRESENTATIVE else [pytest.mark.slow]
        params.append(pytest.param(name, marks=marks, id=name))
    return params


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if not config.getoption("--matrix-all"):
        skip_cell = pytest.mark.skip(reason="full matrix: run with --matrix-all")
        for item in items:
            if "matrix_full" in item.keywords:
                item.add_marker(skip_cell)
    if config.getoption("--golden-all"):
        return
    skip = pytest.mark.skip(reason="full golden sweep: run with --golden-all")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def load_case(name: str) -> dict:
    return json.loads((GOLDEN / name / "case.json").read_text())


@pytest.fixture
def golden_dir() -> Path:
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus ../shared/golden is absent")
    return GOLDEN


# Firmware sizes measured by tests/emit/test_firmware_build.py, printed after the run so
# that CI's log shows what each project of the build subset costs on the part.
_FIRMWARE_SIZES = pytest.StashKey[list]()


def record_firmware_size(config: pytest.Config, project: str, result) -> None:
    """Note one built project's sizes (an onnx2ai8x.emit.build.BuildResult)."""
    config.stash.setdefault(_FIRMWARE_SIZES, []).append(
        (project, result.target, result.board, result.sizes.text, result.sizes.data,
         result.sizes.bss))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    rows = config.stash.get(_FIRMWARE_SIZES, [])
    if not rows:
        return
    terminalreporter.section("firmware built with the MSDK (bytes)")
    terminalreporter.write_line(f"{'project':<36} {'target':<9} {'board':<10} "
                                f"{'text':>8} {'data':>7} {'bss':>7}")
    for project, target, board, text, data, bss in rows:
        terminalreporter.write_line(f"{project:<36} {target:<9} {board:<10} "
                                    f"{text:>8} {data:>7} {bss:>7}")

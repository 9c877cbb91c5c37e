"""Every float pattern the accelerator refuses (tests/float_onnx/test_unsupported.py),
converted with --cpu-fallback: it converts and verifies, or stops with one clear error
(no traceback, nothing written). The mechanism is general, not one per model."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.float_onnx.helpers import cli
from tests.float_onnx.test_unsupported import CASES, write_case

RNG = np.random.default_rng(28)
# the split runs these on the CPU (the rest stay clear refusals: one-layer models with
# nothing left for the accelerator, the input itself, operations or layouts the CPU
# cannot take either, residual jumps over CPU layers)
CONVERTS = {"leaky_relu", "sigmoid_mid", "softmax_mid", "tanh", "clip_negative",
            "maxpool_padding", "reshape_not_flatten", "transposed_conv_input",
            "global_pool_too_big",
            # issue 34: a per-channel affine op on the CPU (a depthwise 1x1 convolution)
            "batchnorm_on_input"}


@pytest.mark.parametrize("name", CASES)
def test_refused_pattern_with_cpu_fallback(name: str, tmp_path: Path) -> None:
    _, _, path, cal = write_case(name, tmp_path, RNG)
    project = tmp_path / "p"
    code, stdout, stderr = cli([path, "--device", "MAX78000", "--calibration", cal, "-o",
                                project, "--cpu-fallback"])
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    if name not in CONVERTS:
        assert code in (1, 2) and stderr.startswith("error["), (code, stderr)
        assert not project.exists()
        return
    if code != 0 and "partition.start-layer" in stderr:
        # a CPU segment between accelerator layers: the hint (MAX78002) applied
        assert "--device MAX78002" in stderr and not project.exists(), stderr
        code, stdout, stderr = cli([path, "--device", "MAX78002", "--calibration", cal,
                                    "-o", project, "--cpu-fallback"])
    assert code == 0, stderr
    assert "SPLIT BETWEEN THE ARM CORE AND THE ACCELERATOR" in stdout
    rc, out, err = cli(["verify", project])
    assert rc == 0 and out.startswith("PASS"), out + err

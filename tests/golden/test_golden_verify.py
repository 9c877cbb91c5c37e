"""Golden cases on the virtual accelerator (issue 14): every project generated from a
case, with the case's own sidecar (register-exact with the vendor's C) and with automatic
mapping, passes its known-answer test on `ai8xsim`.

A project whose registers use a feature the functional model does not execute yet
(on the MAX78002: the snoop units, whose matching rules nothing public describes) gets a
"not modelled yet" error from the model; such cases are expected failures that name the
feature, never a PASS the model cannot vouch for. Cases whose known answer
the hardware cannot produce from their registers sit in HARDWARE_EXCEPTIONS with the
reason (SIDECAR_EXCEPTIONS when only the vendor's placement is at fault); defects of the
generated project that verify finds sit in CONVERTER_DEFECTS.
The default run covers the representative subset; --golden-all runs all cases.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ai8xsim.verify import execute, render
from tests.conftest import GOLDEN, golden_params
from tests.golden import pipeline

pytestmark = pytest.mark.skipif(not GOLDEN.is_dir(), reason="golden corpus is absent")

# name -> why the hardware, executing the case's registers, cannot give its known answer
HARDWARE_EXCEPTIONS = {
    # Layer 1 adds two operands that are both layer 0's single 8-channel output. The
    # vendor's expected values cut that output (8 channels x 400 pixels, CHW) into two
    # halves and add them as two 8 x 200 operands (then xor the same way in layer 2):
    # recomputed from layer 0's output as the model leaves it, that reading gives all
    # 200 expected words and the hardware's gives none
    # (tests/ai8xsim/test_max78002_features.py). The accelerator fetches the operands
    # of pixel i at words 2i and 2i + 1 of each processor's own byte lane (seed 000,
    # "Residual Connections": each machine fetch gathers one operand; every other
    # element-wise case passes that way), and processor c reads no other lane, so no
    # value of layers 1-2's registers reaches the split. Layer 0 would need a write gap.
    "ai85-suite-multilayer-eltwise": "operands read interleaved by the hardware, split by "
                                     "channel in the known answer",
}

# name -> why the vendor's placement of the case (its network.yaml), executed as the
# registers of the project generated from it say, cannot give the known answer. The
# automatic mapping of the same case places the layers itself and must pass.
SIDECAR_EXCEPTIONS = {
    # Layer 0 (not calcx4) keeps its 320 kernels per processor at kernel words 784-1103;
    # layer 1 (calcx4) reads instance 1 of processors 0-2 from word 1024 (the vendor
    # allocates calcx4 kernels in unsplit word numbers after a non-calcx4 layer, its
    # "FIXME ... mixed non-x4/x4" workaround in izer/kernels.py). The C loads both into
    # words 1024-1103, so layer 1 runs with some of layer 0's weights; the layer-by-layer
    # reference (verify --model) first differs at layer 1, in a channel of instance 1
    # (tests/ai8xsim/test_max78002_features.py recomputes the overlap). The vendor tool's
    # own project for the case, generated locally, fails verify on the same word.
    "ai87-suite-ffsx4readahead-nopad-multipass5-w8": "layers 0 and 1 load kernels into "
                                                     "the same kernel-memory words",
}

# name -> a defect of the project generated from the case's sidecar that verify finds (to
# be fixed in the converter; the case stays here until it is, and fails the test once it
# passes)
CONVERTER_DEFECTS: dict[str, str] = {
    # (empty) verify found one: HWC input channels on processors 0, 16 and 32 were fed
    # to FIFO 0 only, as the vendor tool feeds them; fifo_feed now follows the processor
    # map (ai85-suite-fifostream-group-notvga64x48-hwc passes).
}


def _judge(name: str, outcome, defects: dict[str, str]) -> None:
    if outcome.error and "not modelled yet" in outcome.error:
        pytest.xfail(outcome.error)
    for listed in (HARDWARE_EXCEPTIONS, defects):
        if name in listed:
            assert not outcome.passed, f"{name} passes now: remove it from the list"
            pytest.xfail(listed[name])
    assert outcome.passed, render(outcome)
    assert outcome.checked_words > 0


@pytest.mark.parametrize("name", golden_params())
def test_sidecar_project_passes_verify(name: str, tmp_path: Path) -> None:
    out, proc = pipeline.convert_case(name, tmp_path, sidecar=True)
    assert proc.returncode == 0, proc.stderr
    _judge(name, execute(out), {**SIDECAR_EXCEPTIONS, **CONVERTER_DEFECTS})


@pytest.mark.parametrize("name", golden_params())
def test_automatic_mapping_project_passes_verify(name: str, tmp_path: Path) -> None:
    out, proc = pipeline.convert_case(name, tmp_path, sidecar=False, options=False)
    assert proc.returncode == 0, proc.stderr
    # (the automatic mapping puts that input on processors 0-2: its FIFO feed is right)
    _judge(name, execute(out), {})

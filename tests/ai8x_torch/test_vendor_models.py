"""export_onnx on the vendor training repository's own model files (issue 15).

Every model a file defines (its `models` list) is built with its defaults, given random
quantized weights and exported: it must export, or be refused with an Ai8xError naming
the construct. A Python exception of any other kind fails the test. The repository is
fetched locally (tests/ai8x_torch/vendor_models.py says where); the test is skipped
when it is absent. The counts are printed (pytest -s) for the record.
"""
from __future__ import annotations

import sys
from collections import Counter

import pytest

pytest.importorskip("torch")

from .vendor_models import export_all, repository  # noqa: E402


@pytest.mark.skipif(repository() is None, reason="vendor training repository absent "
                    "(set AI8X_TRAINING to a checkout or mirror)")
def test_vendor_model_files_export_or_are_refused_clearly(tmp_path):
    import ai8x_torch

    outcomes = export_all(tmp_path)
    ai8x_torch.set_device(85, simulate=False, round_avg=False, verbose=False)
    counts = Counter(o.result for o in outcomes)
    print(f"\nvendor model files: {dict(sorted(counts.items()))}", file=sys.stderr)
    for o in outcomes:
        print(f"  {o.result:<11} {o.file} {o.model}: {o.detail[:120]}", file=sys.stderr)
    failed = [o for o in outcomes if o.result == "failed"]
    assert not failed, "\n".join(f"{o.file} {o.model}: {o.detail}" for o in failed)
    assert counts["exported"] >= 1
    # the autoencoder's forward(x, return_bottleneck=False) traces with the default
    autoencoder = [o for o in outcomes if o.model == "ai85autoencoder"]
    assert autoencoder and "cannot be traced" not in autoencoder[0].detail


def test_python_arguments_with_defaults_are_export_constants(tmp_path):
    import onnx
    import torch
    from torch import nn

    import ai8x_torch

    from .helpers import randomize

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = ai8x_torch.FusedConv2dReLU(1, 8, 3, padding=1)
            self.c2 = ai8x_torch.Conv2d(8, 4, 3, padding=1)

        def forward(self, x, return_bottleneck=False, scale=None):
            y = self.c1(x)
            if return_bottleneck:
                return y
            if scale is not None:
                y = y * scale
            return self.c2(y)

    import numpy as np

    model = Branchy()
    randomize(model, np.random.default_rng(1))
    ai8x_torch.export_onnx(model, torch.zeros(1, 1, 8, 8), tmp_path / "b.onnx")
    graph = onnx.load(tmp_path / "b.onnx").graph
    consts = {t.name for t in graph.initializer}
    assert len([i for i in graph.input if i.name not in consts]) == 1
    assert graph.output[0].type.tensor_type.shape.dim[1].dim_value == 4  # c2 ran

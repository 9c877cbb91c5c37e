"""ai8x_torch simulate mode on every golden case PyTorch can express gives the vendor
tool's known answer, word for word.

Each case's resolved layers are written as an ai8x_torch model with the case's integers
loaded as a `-q` checkpoint holds them — the export sweep's `CaseModel`
(tests/ai8x_torch/test_export_golden.py), used here unchanged — and run in simulate mode
(the case's device and average-pool rounding) on `sample.npy`. Every output layer's
values, laid out in data memory as the case's placement puts them, must equal
`expected_output`. Cases without an ai8x_torch form are skipped with the reason.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import golden_params

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", golden_params())
def test_simulate_gives_the_known_answer(name: str) -> None:
    import ai8x_torch as ai8x
    from tests.ai8x_torch.test_export_golden import golden_case_model
    from tests.golden.case_network import (
        case_words,
        compare_words,
        expected_output,
        load_sample,
    )

    case_dir, net, outs, model, device, round_avg = golden_case_model(name)
    sample = load_sample(case_dir, net)
    with ai8x.using_device(device, simulate=True, round_avg=round_avg), torch.no_grad():
        ys = model(torch.from_numpy(sample[np.newaxis].astype(np.float32)))
    values = []
    for idx, y in zip(outs, ys, strict=True):
        v = y.numpy()[0]
        assert np.all(v == np.round(v))
        values.append(v.reshape(net.layers[idx].output_channels, -1))
    problems = compare_words(expected_output(case_dir), case_words(case_dir, net, values, outs))
    assert not problems, "\n".join(problems)

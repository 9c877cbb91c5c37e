"""ai8x_torch simulate mode on the zoo networks gives the vendor tool's known answers.

For each zoo case, the network from zoo_models.py loads the case's quantized checkpoint
strictly and runs `sample.npy` with `set_device(<device>, simulate=True)`:

* the final layer's values, laid out in data memory as the case's placement puts them,
  equal every word of the golden `expected_output` (the vendor tool's known answer);
* every intermediate layer's output equals `custom_ops.numpy_ref` run on the case's
  resolved network (case.json + checkpoint, read without ai8x_torch);
* a batch gives each sample's answer independently of the others.
"""
from __future__ import annotations

import numpy as np
import pytest

from custom_ops import numpy_ref
from tests.conftest import GOLDEN
from tests.golden.case_network import (
    case_network,
    case_outputs,
    case_words,
    compare_words,
    expected_output,
    load_sample,
)

torch = pytest.importorskip("torch")

ZOO_CASES = ["ai85-mnist", "ai85-kws20_v3", "ai85-cifar-10", "ai85-cats-dogs",
             "ai87-kws20_v3_1", "ai87-cats-dogs"]

pytestmark = pytest.mark.skipif(not GOLDEN.is_dir(), reason="golden corpus absent")


def _run(name: str, x: np.ndarray):
    """The loaded zoo model in simulate mode on batch `x`; the final output and every
    layer module's output in call order."""
    import ai8x_torch as ai8x
    from tests.golden.zoo_models import load_zoo, zoo_device

    model = load_zoo(name, GOLDEN)
    seen: list[np.ndarray] = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: seen.append(out.numpy()))
             for m in model.modules() if isinstance(m, ai8x.QuantizationAwareModule)]
    try:
        with ai8x.using_device(zoo_device(name), simulate=True), torch.no_grad():
            y = model(torch.from_numpy(x.astype(np.float32)))
    finally:
        for h in hooks:
            h.remove()
    return y.numpy(), seen


@pytest.mark.parametrize("name", ZOO_CASES)
def test_simulate_gives_the_known_answer(name: str) -> None:
    case_dir = GOLDEN / name
    net = case_network(case_dir)
    outs = case_outputs(case_dir)
    assert outs == [len(net.layers) - 1], "zoo cases check their final layer only"
    sample = load_sample(case_dir, net)
    y, _ = _run(name, sample[np.newaxis])
    assert y.dtype == np.float64 and np.all(y == np.round(y))
    final = y[0].reshape(net.layers[-1].output_channels, -1)
    problems = compare_words(expected_output(case_dir),
                             case_words(case_dir, net, [final], outs))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ZOO_CASES)
def test_every_layer_equals_the_numpy_reference(name: str) -> None:
    case_dir = GOLDEN / name
    net = case_network(case_dir)
    sample = load_sample(case_dir, net)
    # A second sample: the first one negated and saturated, so the batch is not uniform.
    batch = np.stack([sample, np.clip(-sample, -128, 127)])
    _, seen = _run(name, batch)
    assert len(seen) == len(net.layers), "one layer module per hardware layer"
    for n in range(2):
        want = numpy_ref.run_network(net, batch[n], outputs=list(range(len(net.layers))))
        for i, (got, ref) in enumerate(zip(seen, want, strict=True)):
            np.testing.assert_array_equal(got[n].reshape(ref.shape), ref,
                                          err_msg=f"{name} layer {i} sample {n}")

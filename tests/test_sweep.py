"""Sweeps on an existing engine (issue 36 item 6): what crosses a process boundary
(models as bytes or Network values, Checked / Converted / verify results, Ai8xError)
pickles whole and small; `api.check_many` / `api.sweep` take any
`concurrent.futures.Executor`, return results in the candidates' order and report a
refused candidate as a value. Run on a local process pool and a Dask LocalCluster; Ray
where installed.
"""
from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

import onnx2ai8x
from onnx2ai8x import api
from onnx2ai8x.errors import Ai8xError, Diagnostic

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.onnx"
SAMPLE = ROOT / "examples" / "digits" / "sample.npy"

pytestmark = pytest.mark.skipif(not DIGITS.is_file(), reason="examples absent")


def _candidates() -> list[object]:
    """Four candidates in a known order: the digits model twice (as bytes and as a
    path), bytes that are no model, and the digits model again."""
    data = DIGITS.read_bytes()
    return [data, str(DIGITS), b"not an onnx model", data]


def _assert_sweep(results: list[api.Swept], reference: api.Checked) -> None:
    assert [r.index for r in results] == [0, 1, 2, 3]
    assert [r.ok for r in results] == [True, True, False, True]
    for k in (0, 1, 3):
        assert results[k].result.cycles == reference.cycles
        assert results[k].result.report_json == reference.report_json
    error = results[2].error
    assert isinstance(error, Ai8xError)
    assert error.exit_code != 0 and error.diagnostics[0].code
    assert results[2].result is None


@pytest.fixture(scope="module")
def reference() -> api.Checked:
    return api.check(DIGITS.read_bytes(), "MAX78000")


def test_pickles_are_whole_and_small(reference, tmp_path: Path) -> None:
    data = pickle.dumps(reference)
    back = pickle.loads(data)
    assert back == reference
    assert len(data) < 64 * 1024, len(data)

    converted = api.convert(DIGITS, "MAX78000", tmp_path / "p", sample=SAMPLE)
    data = pickle.dumps(converted)
    assert pickle.loads(data) == converted
    assert len(data) < 64 * 1024, len(data)

    verified = api.verify(tmp_path / "p")
    data = pickle.dumps(verified)
    back = pickle.loads(data)
    assert (back.passed, back.verdict, back.text) == (verified.passed, verified.verdict,
                                                      verified.text)
    assert len(data) < 64 * 1024, len(data)


def test_errors_pickle_with_their_diagnostics() -> None:
    from onnx2ai8x.quantize.guard import QuantizationLoss

    many = Ai8xError.many([Diagnostic("a.b", "layer 3", "too wide", "narrow it"),
                           Diagnostic("c.d", "layer 4", "too deep")])
    many.exit_code = 3
    back = pickle.loads(pickle.dumps(many))
    assert type(back) is Ai8xError
    assert back.diagnostics == many.diagnostics and back.exit_code == 3
    assert str(back) == str(many)

    loss = QuantizationLoss(Diagnostic("float.loss", "model", "agreement 50 %"), "TABLE")
    back = pickle.loads(pickle.dumps(loss))
    assert type(back) is QuantizationLoss and back.table == "TABLE"
    assert str(back) == str(loss) and str(back).startswith("TABLE")


def test_check_many_here_in_order_with_errors_as_values(reference) -> None:
    _assert_sweep(api.check_many(_candidates(), "MAX78000"), reference)


@pytest.mark.parametrize("chunksize", [1, 3])
def test_check_many_on_a_process_pool(reference, chunksize) -> None:
    with ProcessPoolExecutor(max_workers=2) as pool:
        results = api.check_many(_candidates(), "MAX78000", executor=pool,
                                 chunksize=chunksize)
    _assert_sweep(results, reference)


def test_chunksize_must_be_positive() -> None:
    with pytest.raises(Ai8xError) as err:
        api.check_many(_candidates(), "MAX78000", chunksize=0)
    assert err.value.exit_code == 2


def test_options_reach_every_candidate() -> None:
    """A usage error from the shared options is every candidate's error, not a crash."""
    results = api.check_many([DIGITS.read_bytes()] * 2, "MAX78000",
                             weight_bits=ROOT / "no-such-file.yaml")
    assert [r.ok for r in results] == [False, False]
    assert all(r.error.exit_code == 2 for r in results)


def _digits_cycles(path: str, *, device: str) -> int:
    return onnx2ai8x.check(path, device).cycles


def test_sweep_takes_any_function(reference) -> None:
    results = api.sweep(_digits_cycles, [str(DIGITS), "missing.onnx"], device="MAX78000")
    assert results[0].result == reference.cycles
    assert results[1].error.code == "usage.missing-file"


def test_check_many_on_dask(reference) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        results = api.check_many(_candidates(), "MAX78000",
                                 executor=client.get_executor(), chunksize=2)
    _assert_sweep(results, reference)


def test_check_many_on_ray(reference) -> None:
    ray = pytest.importorskip("ray")
    import sys

    sys.path.insert(0, str(ROOT / "examples" / "sweep"))
    from engines import RayExecutor

    ray.init(num_cpus=2, include_dashboard=False)
    try:
        results = api.check_many(_candidates(), "MAX78000", executor=RayExecutor())
    finally:
        ray.shutdown()
    _assert_sweep(results, reference)


def test_engines_example_sweeps_every_model(reference) -> None:
    """examples/sweep/engines.py: a verdict for every example model on both devices,
    the same whether the sweep runs here or on a process pool."""
    import sys

    sys.path.insert(0, str(ROOT / "examples" / "sweep"))
    import engines

    here = engines.sweep(None)
    models = sorted((ROOT / "examples").rglob("*.onnx"))
    assert len(here) == 2 * len(models)
    digits = f"{DIGITS.relative_to(ROOT)} on MAX78000: {reference.cycles} cycles"
    assert digits in here
    with ProcessPoolExecutor(max_workers=2) as pool:
        assert engines.sweep(pool) == here


def test_a_network_crosses_whole_and_checks_the_same(reference) -> None:
    """A candidate as a Network value (what ai8x_torch.export.to_network gives a search)
    pickles whole and checks as the file does. It is bigger than the ONNX file (its
    weights are int64 arrays: 125 kB against 19 kB for digits), so the README names the
    bytes as the smaller form to send."""
    from onnx2ai8x.devices import get_device
    from onnx2ai8x.frontend import front_end

    network = front_end(DIGITS.read_bytes(), get_device("MAX78000")).read
    data = pickle.dumps(network)
    back = pickle.loads(data)
    # (a Network holds arrays, so == is not value equality: the round trip is)
    assert pickle.dumps(back) == data
    assert len(data) < 8 * DIGITS.stat().st_size, (len(data), DIGITS.stat().st_size)
    (swept,) = api.check_many([back], "MAX78000")
    assert swept.result.cycles == reference.cycles

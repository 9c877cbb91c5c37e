"""The Optuna architecture search over the digits family (examples/digits/search.py,
issue 36 item 6) runs as written at small size, and what it reports agrees with the
converter: each fitting trial's cycles are `check`'s estimate for that shape, and the
chosen network is one of the fitting trials, the fastest within the tolerance of the
best accuracy.
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEARCH = ROOT / "examples" / "digits" / "search.py"

pytest.importorskip("torch")
pytest.importorskip("optuna")
pytest.importorskip("sklearn")

_TRIAL = re.compile(r"trial (\d+): width1 (\d+), width2 (\d+), (\d) convolutions: "
                    r"(?:([\d.]+)%, (\d+) cycles|does not fit \((\S+)\))")


def _module():
    spec = importlib.util.spec_from_file_location("digits_search", SEARCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_search_runs_at_small_size() -> None:
    proc = subprocess.run([sys.executable, str(SEARCH), "--trials", "4", "--epochs", "1",
                           "--batch", "2", "--workers", "2", "--tolerance", "1.0"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    trials = [m.groups() for m in _TRIAL.finditer(proc.stdout)]
    assert [int(t[0]) for t in trials] == [0, 1, 2, 3]
    chosen = re.search(r"chosen: trial (\d+) .*: ([\d.]+)%, (\d+) cycles", proc.stdout)
    assert chosen, proc.stdout

    import ai8x_torch as ai8x
    from onnx2ai8x import api

    search = _module()
    ai8x.set_device(85, simulate=False, round_avg=False, verbose=False)
    fitting = []
    for number, w1, w2, convs, acc, cycles, reason in trials:
        shape = search.Shape(int(w1), int(w2), int(convs))
        if cycles is None:
            with pytest.raises(api.Ai8xError) as err:
                api.check(search.untrained_network(shape), "MAX78000")
            assert err.value.code == reason
            continue
        assert api.check(search.untrained_network(shape), "MAX78000").cycles == int(cycles)
        assert 0.0 <= float(acc) <= 100.0
        fitting.append((int(cycles), int(number)))
    # with a tolerance of 100 points every fitting trial is near enough: the choice is
    # the fastest one
    assert fitting
    assert int(chosen.group(3)) == min(fitting)[0]


def test_a_candidate_too_big_is_never_trained() -> None:
    """A shape the MAX78000 refuses is infeasible without training: its trial carries
    the converter's reason and the objective values Optuna is told are the worst."""
    search = _module()
    calls = []
    real = search.train_and_measure
    search.train_and_measure = lambda *a: calls.append(a) or real(*a)
    search.SPACE = {"width1": (128,), "width2": (512,), "convs": (2,)}
    study = search.search(trials=1, epochs=1, batch=1)
    (trial,) = study.trials
    assert trial.user_attrs["fits"] is False
    assert trial.user_attrs["reason"] == "limit.weight-memory"
    assert calls == []
    assert search.choose(study, 0.01) is None

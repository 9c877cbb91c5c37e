"""Converter findings of the random differential (issue 26), pinned without the vendor
tool: configurations the converter used to refuse although the vendor's C PASSes, and
configurations whose project fails on the chip that the converter now refuses.

Each case is written as the vendor's sidecar plus a checkpoint (tests/ai8xsim/
random_nets.py `write`) and run as a user does: import-izer, then convert with the
sidecar (differential.py `our_project`).
"""
from __future__ import annotations

from pathlib import Path

from ai8xsim.verify import PASS, execute, render
from tests.ai8xsim.differential import our_project
from tests.ai8xsim.random_nets import Config, Weights, write

H = "arch: rnd\ndataset: random\nlayers:\n"


def _ours(config: Config, tmp: Path) -> tuple[Path | None, str]:
    return our_project(write(config, tmp / "in"), config.device, tmp / "ours",
                       config.options)


def _passes(config: Config, tmp: Path) -> None:
    project, why = _ours(config, tmp)
    assert project is not None, why
    outcome = execute(project)
    assert outcome.verdict == PASS and outcome.checked_words > 0, render(outcome)


def test_pooling_only_layer_on_1d_data_takes_the_sidecars_pool(tmp_path: Path) -> None:
    """`max_pool: 2` on a pass-through layer over a conv1d's output: the data is 1-D,
    so the pool is 2x1 (the vendor's tool reads only the first number there), and the
    sidecar agrees with the imported model's 2x1 pool (random 2 of MAX78000 was refused
    as a contradiction while the vendor's C PASSed)."""
    sidecar = H + """  - name: l0
    data_format: HWC
    processors: 0x00000000ffffffff
    operation: conv1d
    kernel_size: 3
    pad: 1
    activate: ReLU
    output_processors: 0x000000000000ffff
    out_offset: 0x4000
  - name: l1
    processors: 0x000000000000ffff
    operation: none
    max_pool: 2
    pool_stride: 2
    output_processors: 0x000000000000ffff
    out_offset: 0x1000
  - name: l2
    processors: 0x000000000000ffff
    operation: none
    avg_pool: [2, 2]
    pool_stride: [2, 2]
    output_processors: 0x000000000000ffff
    out_offset: 0x2000
"""
    _passes(Config(31, "MAX78000", sidecar, (32, 20), (Weights("l0", (16, 32, 3), True,
                                                                8, 0),)), tmp_path)

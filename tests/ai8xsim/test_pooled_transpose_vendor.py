"""Pooling in a transposed layer, against the vendor tool run here (skipped without it).

The vendor tool accepts `max_pool` on a convtranspose2d layer and states the known answer
of pool, then upsample; but the registers it writes for such a layer do not carry the
pooling stride (its stride field stays 0, the row counter spans the unpooled input), so
on MAX78000 pool strides 1 and 2 write the same registers apart from the TRAM bound,
with known answers of different sizes. This is why onnx2ai8x refuses the fused form
(legalize rule convtranspose2d-pool) and ai8xsim calls it NOT MODELLED; the split form
(a pooling layer, then the transposed convolution) is register-exact with the vendor's
project for the same sidecar, both pass `verify`, and its known answer is the one the
vendor states for the fused form.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ai8xsim.verify import NOT_MODELLED, PASS, execute
from tests.ai8xsim.differential import (
    our_project,
    same_registers,
    vendor_available,
    vendor_project,
)
from tests.golden.pipeline import trace_of

pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not vendor_available(),
                                reason="vendor synthesis tool or c2trace absent")


def _files(tmp: Path, name: str, split: bool, stride: int = 2):
    from tests.float_onnx.test_pooled_transpose import _vendor_files

    folder = tmp / name
    folder.mkdir()
    side, ckpt, sample = _vendor_files(folder, split)
    if stride != 2:
        side.write_text(side.read_text().replace("pool_stride: 2",
                                                 f"pool_stride: {stride}"))
    return side, ckpt, sample


def _registers(trace: dict) -> dict:
    return {(f, w[1]): w[2] for f, writes in trace["functions"].items() for w in writes}


def _words(trace: dict) -> list[int]:
    return [w for _, _, words in trace["expected_output"] for w in words]


def test_pooled_transposed_layer_registers_do_not_state_the_pool_stride(
        tmp_path: Path) -> None:
    projects = {}
    for stride in (1, 2):
        files = _files(tmp_path, f"s{stride}", split=False, stride=stride)
        project, why = vendor_project(files, "MAX78000", tmp_path / f"v{stride}")
        assert project is not None, why
        projects[stride] = trace_of(project)
        # the model refuses to guess what the accelerator does with it
        assert execute(project).verdict == NOT_MODELLED
    one, two = (_registers(projects[s]) for s in (1, 2))
    differ = {k for k in one.keys() | two.keys() if one.get(k) != two.get(k)}
    assert len(differ) == 1  # the TRAM bound, not a register that steps the pooling
    assert len(_words(projects[1])) != len(_words(projects[2]))


def test_split_pooling_is_register_exact_and_keeps_the_vendors_answer(
        tmp_path: Path) -> None:
    fused = _files(tmp_path, "fused", split=False)
    theirs_fused, why = vendor_project(fused, "MAX78000", tmp_path / "vf")
    assert theirs_fused is not None, why
    ours_fused, why = our_project(fused, "MAX78000", tmp_path / "of")
    assert ours_fused is None and "limit.convtranspose2d-pool" in why

    split = _files(tmp_path, "split", split=True)
    theirs, why = vendor_project(split, "MAX78000", tmp_path / "vs")
    assert theirs is not None, why
    ours, why = our_project(split, "MAX78000", tmp_path / "os")
    assert ours is not None, why
    same, diff = same_registers(ours, theirs)
    assert same, diff
    assert execute(ours).verdict == PASS and execute(theirs).verdict == PASS
    assert sorted(_words(trace_of(theirs))) == sorted(_words(trace_of(theirs_fused)))

"""The characters onnx2ai8x refuses in a project path are the ones the SDK's make
cannot build in, and the ones it accepts build (issue 35: a project under a path with a
space converted, then failed to build with `mixed implicit and normal rules`). One
build of each kind here; the full table (36 characters, each built) is in
onnx2ai8x/makepath.py."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from onnx2ai8x import api
from onnx2ai8x.devices import get_device
from onnx2ai8x.emit.build import build_project
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.makepath import unsafe_character
from tests.emit.test_firmware_build import DIGITS, sdk  # noqa: F401 - the fixture

ACCEPTED = "a#b=c!d~e,f@g^h+i{j}k[l]m"


def test_a_path_with_the_accepted_characters_builds(tmp_path, sdk):  # noqa: F811
    out = tmp_path / ACCEPTED / "digits"
    assert unsafe_character(out) is None
    api.convert(DIGITS, "MAX78000", out)
    built = build_project(out, get_device("MAX78000"), board="EvKit_V1", maxim_path=sdk)
    assert built.elf.is_file()


@pytest.mark.parametrize("name", ["a b", "a(b)"])
def test_a_refused_path_indeed_fails_to_build(tmp_path, sdk, name):  # noqa: F811
    """Written elsewhere and moved there (the converter refuses to write it), the
    project does not build: the refusal spares the user a broken project."""
    with pytest.raises(Ai8xError):
        api.convert(DIGITS, "MAX78000", tmp_path / name / "digits")
    api.convert(DIGITS, "MAX78000", tmp_path / "plain")
    (tmp_path / name).mkdir()
    shutil.move(tmp_path / "plain", tmp_path / name / "digits")
    with pytest.raises(Ai8xError) as err:
        build_project(Path(tmp_path / name / "digits"), get_device("MAX78000"),
                      board="EvKit_V1", maxim_path=sdk)
    assert err.value.code == "build.failed"

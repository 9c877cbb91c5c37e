"""Hex formatting of the data sections (weights.h, sampledata.h, sampleoutput.h).

The expected text is written per value with Python's own "%0*x" formatting, the layout
the templates used to produce one value at a time."""
from __future__ import annotations

import pytest

from onnx2ai8x.emit.project import _initializer, _listed


def _plain_listed(values, digits, per_line):
    out = ""
    for i in range(0, len(values), per_line):
        # "%0*x": the formatting the templates applied (independent of the code tested)
        out += "".join("0x%0*x, " % (digits, v)  # noqa: UP031
                       for v in values[i:i + per_line]) + "\\\n"
    return out


def _plain_initializer(values, digits, per_line):
    lines = [", ".join("0x%0*x" % (digits, v)  # noqa: UP031
                       for v in values[i:i + per_line])
             for i in range(0, len(values), per_line)]
    return "".join(line + ("," if k + 1 < len(lines) else "") + " \\\n"
                   for k, line in enumerate(lines))


CASES = [
    [],
    [0],
    [0xFFFFFFFF, 1, 0x80000000, 0x12345678, 0, 7, 8, 9, 10],
    list(range(0, 2 ** 32, 2 ** 32 // 37)),
    [-1, 5, 2 ** 40],  # out of range: the slow path, same text as "%08x"
    list(range(16)),  # whole lines only
    list(range(17)),
]


@pytest.mark.parametrize("values", CASES)
@pytest.mark.parametrize("per_line", [1, 8])
def test_words_as_c_text(values, per_line):
    assert _listed(values, 8, per_line) == _plain_listed(values, 8, per_line)
    assert _initializer(values, 8, per_line) == _plain_initializer(values, 8, per_line)


def test_bytes_sixteen_to_a_line():
    values = [(37 * i) & 0xFF for i in range(40)]
    assert _initializer(values, 2, 16) == _plain_initializer(values, 2, 16)
    assert _listed(values, 2, 16).startswith("0x00, 0x25, 0x4a, ")
    assert _initializer([300, 1], 2, 16) == "0x12c, 0x01 \\\n"  # too wide: not cut

"""Layers that write over their own input (memory_check.in_place_margin): used by the
automatic mapping only when the data does not fit otherwise, accepted by the checker
only where no input pixel a later output needs is overwritten, and stated in the
written sidecar's header (the vendor tool needs --overlap-data for it)."""
from __future__ import annotations

import dataclasses

import numpy as np

from onnx2ai8x.devices import MAX78000
from onnx2ai8x.map.auto import auto_map, auto_place
from onnx2ai8x.map.memory_check import check_placement, in_place_margin, overlapping_layers
from onnx2ai8x.network import Network
from onnx2ai8x.sidecar.write import implied_flags, write_sidecar
from tests.map.test_auto import conv


def wide_1x1(dim: int = 88) -> Network:
    """64 channels of 88x88 fill every data memory instance (30,976 of 32,768 bytes):
    the 1x1 layers can only run in place (the first layers of the vendor's U-Net)."""
    rng = np.random.default_rng(3)
    layers = [conv("p0", 64, 64, dim, (-1,), k=1), conv("p1", 64, 32, dim, (0,), k=1),
              conv("p2", 32, 8, dim, (1,), k=1, pool=2)]
    layers = [dataclasses.replace(lay, weights=rng.integers(-3, 4, lay.weights.shape),
                                  output_shift=-3, padding=(0, 0)) for lay in layers]
    return Network(layers=tuple(layers), input_shape=(64, dim, dim), device="MAX78000",
                   name="wide")


def test_margin_follows_the_kernel_reach() -> None:
    net = wide_1x1()
    assert in_place_margin(net, 0) == 0 and in_place_margin(net, 1) == 0
    assert in_place_margin(net, 2) is None  # pooling: reads ahead of what it writes
    three = dataclasses.replace(net, layers=(dataclasses.replace(
        conv("c", 64, 64, 88, (-1,)), weights=None), *net.layers[1:]))
    assert in_place_margin(three, 0) == 4 * (88 + 1)  # one row and one pixel


def test_data_that_only_fits_in_place_maps_and_says_so() -> None:
    net = wide_1x1()
    hw = auto_map(net, MAX78000)
    placement = hw.placement
    assert check_placement(placement) == []
    assert overlapping_layers(hw) == (0, 1)
    p0 = placement.layers[0]
    assert p0.out_offset <= p0.in_offset
    flags = dict(implied_flags(placement, overlapping=overlapping_layers(hw)))
    assert "--overlap-data" in flags and "p0, p1" in flags["--overlap-data"]
    assert "--overlap-data" in write_sidecar(
        placement, flags=implied_flags(placement, overlapping=overlapping_layers(hw)))


def test_checker_refuses_writing_ahead_of_the_read() -> None:
    net = wide_1x1()
    placement = auto_place(net, MAX78000)
    layers = list(placement.layers)
    # the output above its input overwrites input pixels not read yet
    layers[0] = dataclasses.replace(layers[0], out_offset=layers[0].in_offset + 0x100)
    layers[1] = dataclasses.replace(layers[1], in_offset=layers[0].out_offset)
    bad = dataclasses.replace(placement, layers=tuple(layers))
    assert any(d.code == "map.overwrite" for d in check_placement(bad))


def test_data_that_fits_is_not_overlapped() -> None:
    net = wide_1x1(dim=32)
    hw = auto_map(net, MAX78000)
    assert check_placement(hw.placement) == []
    assert overlapping_layers(hw) == ()
    assert "--overlap-data" not in dict(
        implied_flags(hw.placement, overlapping=overlapping_layers(hw)))

"""A head applied to several feature maps (the same module called on each pyramid level)
exports as layers with identical weights: the mapper puts them on the same input
processors so their kernels are stored once (vendor izer/kdedup.py)."""
from __future__ import annotations

import dataclasses

import numpy as np

from onnx2ai8x.devices import MAX78000
from onnx2ai8x.map.auto import auto_place
from onnx2ai8x.map.kernels import allocate_kernels
from onnx2ai8x.map.memory_check import check_placement
from onnx2ai8x.network import Network
from tests.map.test_auto import conv


def shared_head(same: bool) -> Network:
    rng = np.random.default_rng(11)
    head = rng.integers(-3, 4, (8, 16, 3, 3))
    layers = [conv("c0", 3, 16, 16, (-1,)), conv("c1", 16, 16, 16, (0,)),
              conv("head_a", 16, 8, 16, (1,)), conv("c2", 16, 16, 16, (1,), pool=2),
              conv("head_b", 16, 8, 8, (3,))]
    layers = [dataclasses.replace(lay, weights=rng.integers(-3, 4, lay.weights.shape),
                                  output_shift=-3) for lay in layers]
    other = head if same else head + 1
    layers[2] = dataclasses.replace(layers[2], weights=head)
    layers[4] = dataclasses.replace(layers[4], weights=other)
    return Network(layers=tuple(layers), input_shape=(3, 16, 16), device="MAX78000",
                   name="shared")


def test_shared_head_reads_the_same_processors_and_stores_kernels_once() -> None:
    net = shared_head(same=True)
    placement = auto_place(net, MAX78000)
    assert check_placement(placement) == []
    assert placement.layers[4].processor_map == placement.layers[2].processor_map
    kernels = allocate_kernels(placement)
    assert kernels.offset[4] == kernels.offset[2]  # one copy of the kernels


def test_distinct_heads_are_placed_independently() -> None:
    net = shared_head(same=False)
    placement = auto_place(net, MAX78000)
    assert check_placement(placement) == []
    kernels = allocate_kernels(placement)
    same_procs = placement.layers[4].processor_map == placement.layers[2].processor_map
    assert not (same_procs and kernels.offset[4] == kernels.offset[2])

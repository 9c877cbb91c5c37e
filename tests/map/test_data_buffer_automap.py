"""Automatic mapping of a network with a data buffer (seed 000, Rolling Buffers), and the
sidecar written for it.

The buffer keeps its values from one inference to the next, so no other data may ever
share its bytes. The overlap check here is computed from the Placement alone (offsets,
processor maps and the layers' shapes), not from the mapper's or the checker's
bookkeeping.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from custom_ops.builder import build_model
from onnx2ai8x.convert import plan
from onnx2ai8x.devices import PROCESSORS, get_device
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.network import DATA_BUFFER, DataBuffer, Layer, Network, Op
from onnx2ai8x.placement import Placement
from onnx2ai8x.sidecar.parse import parse_text

DEVICES = ("MAX78000", "MAX78002")


def _conv(name: str, rng: np.random.Generator, cin: int, cout: int, dim: tuple[int, int],
          *, kernel: int = 3, pad: int = 1, pool: int = 1, pool_stride: int = 1,
          **kw) -> Layer:
    pooled = ((dim[0] - pool) // pool_stride + 1, (dim[1] - pool) // pool_stride + 1)
    out = (pooled[0] + 2 * pad - kernel + 1, pooled[1] + 2 * pad - kernel + 1)
    return Layer(name=name, operator=Op.CONV2D, input_channels=cin, output_channels=cout,
                 input_dim=dim, pooled_dim=pooled, output_dim=out,
                 kernel_size=(kernel, kernel), padding=(pad, pad), pool=(pool, pool),
                 pool_stride=(pool_stride, pool_stride), output_shift=-3,
                 weights=rng.integers(-128, 128, (cout, cin, kernel, kernel)).astype(np.int8),
                 **kw)


def _buffer_tail(rng: np.random.Generator, channels: int, length: int, k: int,
                 frame: Layer) -> tuple[Layer, ...]:
    """The vendor's order: shift the buffer, insert this frame's result, read it."""
    shift = Layer(name="shift", operator=Op.NONE, input_channels=channels,
                  output_channels=channels, input_dim=(length - k, 1),
                  pooled_dim=(length - k, 1), output_dim=(length - k, 1), quantization=0,
                  in_sequences=(DATA_BUFFER,), buffer_shift=k)
    tcn = Layer(name="tcn", operator=Op.CONV1D, input_channels=channels, output_channels=6,
                input_dim=(length, 1), pooled_dim=(length, 1), output_dim=(length - 2, 1),
                kernel_size=(3, 1), output_shift=-2, in_sequences=(DATA_BUFFER,),
                weights=rng.integers(-128, 128, (6, channels, 3)).astype(np.int8))
    return shift, frame, tcn


def small_network(channels: int, length: int, k: int, seed: int = 0) -> Network:
    """Frame CNN (two Conv2d) writing a 1 x k result into a (channels, length) buffer."""
    rng = np.random.default_rng(seed)
    conv0 = _conv("conv0", rng, 16, 32, (12, 4 * (2 + k)))
    frame = _conv("frame", rng, 32, channels, (12, 4 * (2 + k)), pad=0, pool=4,
                  pool_stride=4, in_sequences=(0,), buffer_insert=k)
    return Network(layers=(conv0, *_buffer_tail(rng, channels, length, k, frame)),
                   input_shape=(16, 12, 4 * (2 + k)), name="bufnet",
                   data_buffer=DataBuffer("Frames", channels, length))


def pressed_network(length: int) -> Network:
    """A 64-channel 90x90 input that fills nearly a whole MAX78000 memory instance in
    every lane, next to a 64-channel buffer (all lanes): it fits only while the input
    ends below the buffer."""
    rng = np.random.default_rng(7)
    conv0 = _conv("conv0", rng, 64, 64, (90, 90), kernel=1, pad=0)
    conv1 = _conv("conv1", rng, 64, 64, (90, 90), pad=0, pool=15, pool_stride=15)
    frame = _conv("frame", rng, 64, 64, (4, 4), pad=0, pool=2, pool_stride=1,
                  in_sequences=(1,), buffer_insert=1)
    return Network(layers=(conv0, conv1, *_buffer_tail(rng, 64, length, 1, frame)),
                   input_shape=(64, 90, 90), name="pressed",
                   data_buffer=DataBuffer("frames", 64, length))


def _plan(network: Network, device: str, tmp_path: Path):
    path = tmp_path / f"{network.name}.onnx"
    path.write_bytes(build_model(network).SerializeToString())
    return plan(path, get_device(device), None)


# --- an independent view of data memory --------------------------------------------------
def _instance_lanes(pmap: int) -> int:
    out = 0
    for p in range(PROCESSORS):
        if pmap >> p & 1:
            out |= 0xF << (p // 4 * 4)
    return out


def _regions(placement: Placement) -> list[tuple[str, int, int, int]]:
    """(what, lanes, first byte, end byte) of every layer output and the network input,
    from the Placement and the layers' shapes; outputs written into the buffer left out."""
    net = placement.network
    out = []
    first, pl0 = net.layers[0], placement.layers[0]
    h, w = first.input_dim
    passes = -(-first.input_channels // 64)
    if pl0.big_data:
        out.append(("input", _instance_lanes(pl0.processor_map), pl0.in_offset,
                    pl0.in_offset + 4 * -(-h * w // 4)))
    else:
        out.append(("input", pl0.processor_map, pl0.in_offset,
                    pl0.in_offset + 4 * h * w * passes))
    for lay, pl in zip(net.layers, placement.layers, strict=True):
        if lay.buffer_shift or lay.buffer_insert:
            continue
        h, w = lay.output_dim
        words = h * w * -(-lay.output_channels // 64) * (1 + pl.write_gap)
        wide = lay.output_width == 32
        lanes = _instance_lanes(pl.output_processor_map) if wide else pl.output_processor_map
        out.append((lay.name, lanes, pl.out_offset,
                    pl.out_offset + 4 * words * (4 if wide else 1)))
    return out


def _assert_buffer_alone(placement: Placement) -> None:
    net, where = placement.network, placement.data_buffer
    buf = net.data_buffer
    assert where is not None
    top = where.offset + 4 * buf.length
    assert top <= placement.device.data_instance_bytes
    for what, lanes, start, end in _regions(placement):
        clash = lanes & where.processors and start < top and where.offset < end
        assert not clash, (what, hex(start), hex(end), hex(where.offset), hex(top))


def _assert_buffer_access(placement: Placement) -> None:
    net, where = placement.network, placement.data_buffer
    length = net.data_buffer.length
    for lay, pl in zip(net.layers, placement.layers, strict=True):
        if lay.buffer_shift:
            assert pl.in_offset == where.offset + 4 * lay.buffer_shift
            assert pl.out_offset == where.offset
            assert pl.processor_map == pl.output_processor_map == where.processors
            assert pl.buffer_shift == lay.buffer_shift
        elif lay.buffer_insert:
            assert pl.out_offset == where.offset + 4 * (length - lay.buffer_insert)
            assert pl.output_processor_map == where.processors
            assert pl.buffer_insert == lay.buffer_insert
        elif lay.in_sequences == (DATA_BUFFER,):
            assert pl.in_offset == where.offset
            assert pl.processor_map == where.processors
            assert pl.in_sequences == (DATA_BUFFER,)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("channels,length,k", [(32, 15, 1), (8, 5, 2), (64, 7, 1),
                                               (13, 9, 3)])
def test_buffer_network_maps(device: str, channels: int, length: int, k: int,
                             tmp_path: Path) -> None:
    p = _plan(small_network(channels, length, k), device, tmp_path)
    where, dev = p.placement.data_buffer, p.device
    assert where is not None
    # one channel per processor, the highest ones from an instance boundary
    start = PROCESSORS - -(-channels // 4) * 4
    assert where.processors == ((1 << channels) - 1) << start
    assert where.offset == dev.data_instance_bytes - 4 * length
    _assert_buffer_access(p.placement)
    _assert_buffer_alone(p.placement)


def test_vendor_placement_of_its_buffer(tmp_path: Path) -> None:
    """32 channels, 15 positions on MAX78000: where the vendor's actiontcn sidecar puts
    its buffer (processors 32-63, 0x8000 - 4 * 15)."""
    p = _plan(small_network(32, 15, 1), "MAX78000", tmp_path)
    assert p.placement.data_buffer.processors == 0xFFFFFFFF00000000
    assert p.placement.data_buffer.offset == 0x7FC4


@pytest.mark.parametrize("device", DEVICES)
def test_data_is_kept_out_of_the_buffer(device: str, tmp_path: Path) -> None:
    """The input fills every lane up to 32400 bytes, the 17-position buffer starts at
    32700 on MAX78000: it maps, and nothing reaches into the buffer."""
    p = _plan(pressed_network(17), device, tmp_path)
    _assert_buffer_access(p.placement)
    _assert_buffer_alone(p.placement)


def test_no_room_below_the_buffer_is_refused(tmp_path: Path) -> None:
    """With 100 positions the buffer starts below the end of the 90x90 input in every
    lane (MAX78000): refused with a memory diagnostic, never placed over the buffer."""
    with pytest.raises(Ai8xError) as err:
        _plan(pressed_network(100), "MAX78000", tmp_path)
    assert err.value.diagnostics[0].code == "map.data-memory"


def test_too_many_buffer_channels_are_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    net = small_network(8, 5, 1)
    wide = DataBuffer("frames", 65, 5)
    shift, frame, tcn = _buffer_tail(rng, 65, 5, 1, _conv(
        "frame", rng, 32, 65, (12, 12), pad=0, pool=4, pool_stride=4, in_sequences=(0,),
        buffer_insert=1))
    net = Network(layers=(net.layers[0], shift, frame, tcn), input_shape=net.input_shape,
                  name="wide", data_buffer=wide)
    from onnx2ai8x.map.auto import auto_place

    with pytest.raises(Ai8xError) as err:
        auto_place(net, get_device("MAX78000"))
    d = err.value.diagnostics[0]
    assert d.code == "map.data-buffer"
    assert "`frames`" in d.where and "65 channels" in d.message and "64" in d.hint


@pytest.mark.parametrize("device", DEVICES)
def test_written_sidecar_reads_back(device: str, tmp_path: Path) -> None:
    p = _plan(small_network(13, 9, 2), device, tmp_path)
    text = p.sidecar_text
    head = text.split("arch:")[0]
    # the options the vendor tool needs for a buffer network, named in the header
    assert "--zero-sram" in head and "--overlap-data" in head
    side = parse_text(text)
    (buf,) = side.data_buffer
    where = p.placement.data_buffer
    # the vendor tool compares a lower-cased reference with the name as written
    assert buf.name == "frames"
    assert (buf.processors, buf.channels, buf.dim, buf.offset) == \
        (where.processors, 13, (9, 1), where.offset)
    for lay, pl, got in zip(p.network.layers, p.placement.layers, side.layers, strict=True):
        assert got.buffer_shift == pl.buffer_shift, lay.name
        assert got.buffer_insert == pl.buffer_insert, lay.name
        assert got.out_offset == pl.out_offset, lay.name
        if lay.in_sequences == (DATA_BUFFER,):
            # the keys the vendor requires of a buffer reader, all stated
            assert got.in_sequences == (DATA_BUFFER,)
            assert got.in_offset == pl.in_offset
            assert got.in_channels == lay.input_channels
            assert got.in_dim == lay.input_dim


def test_multipass_1x1_may_write_over_its_input() -> None:
    """A 96-channel 1x1 layer reads both words of a pixel before writing its one output
    word (the vendor's actiontcn sidecar writes it so); padded or multi-pass outputs
    may not."""
    from onnx2ai8x.map.memory_check import in_place_margin

    rng = np.random.default_rng(5)

    def margin(cout: int, kernel: int, pad: int) -> int | None:
        lay = _conv("c", rng, 96, cout, (8, 8), kernel=kernel, pad=pad)
        return in_place_margin(Network(layers=(lay,), input_shape=(96, 8, 8)), 0)

    assert margin(64, 1, 0) == 0
    assert margin(64, 3, 1) is None
    assert margin(96, 1, 0) is None


def test_report_names_the_buffer(tmp_path: Path) -> None:
    import json

    p = _plan(small_network(8, 5, 2), "MAX78000", tmp_path)
    where = p.placement.data_buffer
    kept = json.loads(p.report_json)["data_buffer"]
    assert kept["processor_map"] == f"0x{where.processors:016x}"
    assert (kept["offset"], kept["channels"], kept["length"]) == (where.offset, 8, 5)
    assert "data buffer `Frames`: 8 channels x 5" in p.summary
    # a network without a buffer reports none
    net = small_network(8, 5, 2)
    plain = Network(layers=net.layers[:1], input_shape=net.input_shape, name="plain")
    assert json.loads(_plan(plain, "MAX78000", tmp_path).report_json)["data_buffer"] is None

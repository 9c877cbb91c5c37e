"""Frame-loop models (the vendor's actiontcn pattern) export as one frame's layers plus a
data buffer (ai8x_torch/frames.py; docs/design.md section 1, data buffer).

The exported model run frame after frame, its `B/next` fed back as the buffer, must give
what the PyTorch model's own forward() gives on all frames (simulate mode: the
accelerator's integers, computed independently of the ONNX graph).
"""
from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from torch import nn

import ai8x_torch as ai8x
import custom_ops
from ai8x_torch.export import export_onnx, to_network
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.importer.onnx_reader import read_model
from onnx2ai8x.network import DATA_BUFFER, OP_CONV1D, OP_CONV2D, OP_NONE, DataBuffer
from tests.ai8x_torch.helpers import randomize

FRAMES, C, H = 5, 3, 6


class FrameNet(nn.Module):
    """A small model written like the vendor's actiontcn: a per-frame CNN down to
    (6, 1, 1), its results written into a zeros buffer, Conv1d layers over the frames."""

    def __init__(self, out_hw: int = 1, fill: str = "zeros", slot=None,
                 other_module_on: int | None = None, mix: bool = False) -> None:
        super().__init__()
        self.conv0 = ai8x.FusedConv2dReLU(C, 8, 3, padding=1)
        self.conv0b = ai8x.FusedConv2dReLU(C, 8, 3, padding=1)
        self.conv1 = ai8x.FusedMaxPoolConv2dReLU(8, 8, 3, padding=1)
        self.conv2 = ai8x.FusedConv2dReLU(8, 6, 3, padding=1 if out_hw > 1 else 0)
        self.add = ai8x.Add()
        self.tcn0 = ai8x.FusedConv1dReLU(6 * out_hw * out_hw, 6, 3, padding=0)
        self.tcn1 = ai8x.Conv1d(6, 4, 3, padding=0, wide=True)
        self.out_hw, self.fill, self.slot = out_hw, fill, slot or (lambda i, f: i)
        self.other_module_on, self.mix = other_module_on, mix

    def frame(self, x: torch.Tensor, i: int) -> torch.Tensor:
        first = self.conv0b if i == self.other_module_on else self.conv0
        return self.conv2(self.conv1(first(x)))

    def forward(self, x):
        n, f = x.shape[0], x.shape[1]
        make = torch.zeros if self.fill == "zeros" else torch.ones
        buf = make(n, f, 6, self.out_hw, self.out_hw, device=x.device)
        prev = None
        for i in range(f):
            out = self.frame(x[:, i], i)
            if self.mix and prev is not None:
                out = self.add(out, prev)
            prev = out
            buf[:, self.slot(i, f)] = out
        t = buf.permute(0, 1, 3, 4, 2).reshape(n, f, -1).permute(0, 2, 1)
        return self.tcn1(self.tcn0(t))


def _model(seed: int = 0, **kwargs) -> FrameNet:
    model = FrameNet(**kwargs)
    randomize(model, np.random.default_rng(seed), shift_range=(-1, 1))
    return model.eval()


def _frames(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (1, FRAMES, C, H, H))


def _simulate(fn, *args) -> np.ndarray:
    with ai8x.using_device(85, simulate=True), torch.no_grad():
        return fn(*(torch.from_numpy(np.asarray(a, dtype=np.float32)) for a in args)).numpy()


def _export(model, path) -> object:
    return _export_as(model, torch.zeros(1, FRAMES, C, H, H), path)


def _export_as(model, example, path) -> object:
    with ai8x.using_device(85):
        export_onnx(model, example, path)
    return custom_ops.session(path)


def test_frame_loop_exports_one_frame_and_a_buffer():
    with ai8x.using_device(85):
        net, outputs = to_network(_model(), torch.zeros(1, FRAMES, C, H, H))
    assert net.input_shape == (C, H, H)
    assert net.data_buffer == DataBuffer("buffer", 6, FRAMES)
    names = [lay.name for lay in net.layers]
    assert names == ["conv0", "conv1", "buffer_shift", "conv2", "tcn0", "tcn1"]
    shift, insert, tcn0 = net.layers[2], net.layers[3], net.layers[4]
    assert shift.operator == OP_NONE and shift.buffer_shift == 1
    assert shift.in_sequences == (DATA_BUFFER,) and shift.input_dim == (FRAMES - 1, 1)
    # the inserting layer still reads conv1, not the shift layer placed before it
    assert insert.operator == OP_CONV2D and insert.buffer_insert == 1
    assert insert.in_sequences == (1,) and insert.output_dim == (1, 1)
    assert tcn0.operator == OP_CONV1D and tcn0.in_sequences == (DATA_BUFFER,)
    assert tcn0.input_dim == (FRAMES, 1)
    assert outputs == [5]


def test_streaming_the_export_equals_the_model(tmp_path):
    """After F frames the output is the model's on those F frames; after F + 2 it is the
    model's on the last F (the buffer rolls)."""
    model = _model(seed=3)
    x = np.concatenate([_frames(4), _frames(7)[:, :2]], axis=1)
    sess = _export(model, tmp_path / "frames.onnx")
    assert read_model(tmp_path / "frames.onnx").data_buffer == DataBuffer("buffer", 6, FRAMES)
    state = np.zeros((1, 6, FRAMES), np.int8)
    for f in range(FRAMES + 2):
        out, state = sess.run(None, {"input": x[:, f].astype(np.int8), "buffer": state})
        if f + 1 >= FRAMES:
            want = _simulate(model, x[:, f + 1 - FRAMES:f + 1])
            assert np.any(want != 0)  # the comparison says something
            np.testing.assert_array_equal(
                np.asarray(out).reshape(want.shape).astype(np.int64), want.astype(np.int64))


def test_first_inference_sees_a_zero_buffer(tmp_path):
    """With no state fed, the buffer starts at zero: slots 0..F-2 hold zeros, not the
    CNN's result on a zero frame."""
    model = _model(seed=5)
    x = _frames(6)[:, 0]
    sess = _export(model, tmp_path / "first.onnx")
    out, nxt = sess.run(None, {"input": x.astype(np.int8)})
    frame = _simulate(lambda t: model.conv2(model.conv1(model.conv0(t))), x)
    buf = np.zeros((1, 6, FRAMES))
    buf[:, :, -1] = frame.reshape(1, 6)
    np.testing.assert_array_equal(np.asarray(nxt).astype(np.int64), buf.astype(np.int64))
    want = _simulate(lambda t: model.tcn1(model.tcn0(t)), buf)
    np.testing.assert_array_equal(np.asarray(out).reshape(want.shape).astype(np.int64),
                                  want.astype(np.int64))
    zero_frame = _simulate(lambda t: model.conv2(model.conv1(model.conv0(t))),
                           np.zeros_like(x))
    assert np.any(zero_frame != 0), "the zero frame's CNN result is zero: weak check"


@pytest.mark.parametrize("kwargs, where, words", [
    (dict(other_module_on=2), "conv0b", "frame 2 computes"),
    (dict(fill="ones"), "ones", "torch.ones"),
    (dict(out_hw=3), "setitem", "(6, 3, 3)"),
    (dict(mix=True), "add", "combines frames"),
    (dict(slot=lambda i, f: f - 1 - i), "setitem", "is written as"),
])
def test_other_frame_loops_are_refused_clearly(kwargs, where, words):
    with pytest.raises(Ai8xError) as info, ai8x.using_device(85):
        to_network(_model(**kwargs), torch.zeros(1, FRAMES, C, H, H))
    d = info.value.diagnostics[0]
    assert d.code == "export.unsupported"
    assert d.where.startswith(where), d.where
    assert words in d.message and d.hint
    assert info.value.__cause__ is None  # raised as is: no chained traceback


def test_a_single_frame_cannot_roll():
    with pytest.raises(Ai8xError) as info, ai8x.using_device(85):
        to_network(_model(), torch.zeros(1, 1, C, H, H))
    d = info.value.diagnostics[0]
    assert d.code == "export.unsupported" and d.where == "zeros" and "2 frames" in d.hint


def test_an_example_without_the_frame_axis_is_refused_with_the_shape_to_pass():
    with pytest.raises(Ai8xError) as info, ai8x.using_device(85):
        to_network(_model(), torch.zeros(1, C, H, H))
    d = info.value.diagnostics[0]
    assert d.code == "export.unsupported" and d.where == "conv0"
    assert "(1, F, C, H, W)" in d.hint


# --- the vendor's actiontcn, as written ------------------------------------------------

def _vendor_layers() -> list[dict]:
    import yaml

    from tests.map import vendor_zoo as vz

    if not vz.available(vz.SYNTHESIS_MIRROR):
        pytest.skip("vendor synthesis mirror absent")
    text = vz.show("networks/ai85-kinetics-actiontcn.yaml", vz.SYNTHESIS_MIRROR)
    return yaml.safe_load(text)["layers"]


@pytest.fixture(scope="module")
def vendor_actiontcn():
    """The vendor's model file as written, built through the ai8x drop-in with random
    quantized weights (as the zoo sweep builds it), and its input shape."""
    from tests.map import vendor_zoo as vz

    if not vz.available():
        pytest.skip("vendor training mirror absent")
    arch = next(a for a in vz.architectures() if a.id == "ai85net-actiontcn:ai85actiontcn")
    with vz.vendor_imports(), ai8x.using_device(arch.device_code):
        model = vz.build(arch)
    randomize(model, np.random.default_rng(1))
    return model.eval(), arch.input_shape


def test_vendor_actiontcn_streams_like_its_forward(vendor_actiontcn, tmp_path):
    model, shape = vendor_actiontcn
    frames = 15  # the vendor sidecar's buffer `dim`
    x = np.random.default_rng(9).integers(-128, 128, (1, frames, *shape))
    sess = _export_as(model, torch.zeros(1, frames, *shape), tmp_path / "tcn.onnx")
    state = np.zeros((1, 32, frames), np.int8)
    for f in range(frames):
        out, state = sess.run(None, {"input": x[:, f].astype(np.int8), "buffer": state})
    # forward() makes its buffer with device=x.get_device(), which is -1 on a CPU tensor
    # and refused by torch.zeros there (the vendor trains on CUDA); for this run its
    # module sees a torch.zeros that ignores the device
    module_globals = type(model).forward.__globals__
    real = module_globals["torch"]
    module_globals["torch"] = types.SimpleNamespace(
        zeros=lambda *a, device=None, **k: real.zeros(*a, **k))
    try:
        want = _simulate(model, x)
    finally:
        module_globals["torch"] = real
    assert np.any(want != 0)
    np.testing.assert_array_equal(np.asarray(out).reshape(want.shape).astype(np.int64),
                                  want.astype(np.int64))


def test_vendor_actiontcn_matches_the_vendor_sidecar(vendor_actiontcn):
    vendor = _vendor_layers()
    model, shape = vendor_actiontcn
    with ai8x.using_device(85):
        net = to_network(model, torch.zeros(1, 15, *shape))[0]
    assert len(net.layers) == len(vendor) == 21
    assert net.data_buffer.channels == 32 and net.data_buffer.length == 15
    names = {lay.get("name"): i for i, lay in enumerate(vendor)}

    def sources(i: int, lay: dict) -> list[int]:
        seqs = lay.get("in_sequences", [i - 1] if i else [-1])
        seqs = seqs if isinstance(seqs, list) else [seqs]
        return sorted(DATA_BUFFER if s == "tcn_buffer" else names.get(s, s) for s in seqs)

    ops = {"conv2d": OP_CONV2D, "conv1d": OP_CONV1D, "none": OP_NONE, "passthrough": OP_NONE}
    for i, (ours, theirs) in enumerate(zip(net.layers, vendor, strict=True)):
        ctx = f"layer {i} {ours.name} / {theirs.get('name')}"
        assert ours.operator == ops[theirs["operation"].lower()], ctx
        assert sorted(ours.in_sequences or ((i - 1,) if i else (-1,))) == \
            sources(i, theirs), ctx
        assert ours.buffer_shift == theirs.get("buffer_shift", 0), ctx
        assert ours.buffer_insert == theirs.get("buffer_insert", 0), ctx
        assert bool(ours.eltwise) == ("eltwise" in theirs), ctx
        assert ours.output_width == theirs.get("output_width", 8), ctx
        if ours.operator != OP_NONE:
            k = str(theirs["kernel_size"])
            assert ours.kernel_size[:1 if "x" not in k else 2] == \
                tuple(int(v) for v in k.split("x")), ctx
            assert ours.padding[0] == theirs["pad"], ctx
            assert ours.dilation[0] == theirs.get("dilation", 1), ctx
            assert (ours.activation is not None) == (theirs["activate"] != "None"), ctx
    # Pooling: the sidecar pools in its layer 3 where the model file pools in conv1
    # (layer 2, FusedMaxPoolConv2dBNReLU); the count and all other layers agree.
    pooled = [i for i, lay in enumerate(net.layers) if lay.pool != (1, 1)]
    theirs = [i for i, lay in enumerate(vendor) if "max_pool" in lay]
    assert len(pooled) == len(theirs)
    assert set(pooled) - {2, 3} == set(theirs) - {2, 3}
    assert net.layers[2].name == "conv1" and 2 in pooled

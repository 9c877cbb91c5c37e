"""Register facts of the data-buffer layers (seed 000, Rolling Buffers), for the small
network ONE of data_buffer_nets.py: what the vendor tool writes in cnn_configure for
the shift layer (1), the inserting layer (2) and the Conv1d reading the buffer (3), read
off its output (ai8xize.py ... --overlap-data --softmax --zero-sram, both devices; the
differential test compares whole projects when the tool is at hand). Note the shift
layer's write pointer in quadrant 0: the vendor programs it in every quadrant the
network uses although the buffer lives in quadrant 3.
"""
from __future__ import annotations

import dataclasses

import pytest

from onnx2ai8x.convert import plan
from onnx2ai8x.devices import get_device
from onnx2ai8x.emit.registers.program import register_program
from onnx2ai8x.options import EmitOptions
from tests.emit.data_buffer_nets import ONE, import_net, write_net
from tests.lowering import lowered

pytest.importorskip("torch")

VENDOR_LAYERS = {
    "MAX78000": {
        1: {
            0x50100014: 0x00000003, 0x50100314: 0x00000800, 0x50100394: 0x00002000,
            0x50100514: 0x00000801, 0x50100594: 0x00000920, 0x50100114: 0x00000101,
            0x50100794: 0x03000000, 0x50d00014: 0x00000003, 0x50d00314: 0x00018800,
            0x50d00394: 0x00002000, 0x50d00514: 0x00000801, 0x50d00594: 0x00000920,
            0x50d00114: 0x00000101, 0x50d00794: 0x03000000, 0x50d00714: 0x000000ff,
        },
        2: {
            0x50100018: 0x00000002, 0x50100098: 0x00000002, 0x50100318: 0x00018804,
            0x50100418: 0x00002000, 0x50100518: 0x00000400, 0x50100598: 0x00000b20,
            0x50100a18: 0x00003800, 0x50100618: 0x00000038, 0x50100798: 0x00022000,
            0x50100718: 0xff00ff00, 0x50d00018: 0x00000002, 0x50d00098: 0x00000002,
            0x50d00318: 0x00018804, 0x50d00418: 0x00002000, 0x50d00518: 0x00000400,
            0x50d00598: 0x00000b20, 0x50d00a18: 0x00003800, 0x50d00618: 0x00000038,
            0x50d00798: 0x00022000,
        },
        3: {
            0x5010001c: 0x00000004, 0x5010031c: 0x00000c00, 0x5010041c: 0x00002000,
            0x5010051c: 0x00000800, 0x5010059c: 0x00008b20, 0x50100a1c: 0x00003800,
            0x5010061c: 0x00000038, 0x5010011c: 0x00001300, 0x5010079c: 0x00022000,
            0x50d0001c: 0x00000004, 0x50d0031c: 0x00000c00, 0x50d0041c: 0x00002000,
            0x50d0051c: 0x00000800, 0x50d0059c: 0x00000b20, 0x50d00a1c: 0x00003800,
            0x50d0061c: 0x00000038, 0x50d0011c: 0x00001300, 0x50d0079c: 0x00023000,
            0x50d0071c: 0x00ff00ff,
        },
    },
    "MAX78002": {
        1: {
            0x51100104: 0x00010003, 0x51100108: 0x00010000, 0x51100118: 0x00000010,
            0x5110011c: 0x00000800, 0x51100120: 0x00008000, 0x5110012c: 0x00000801,
            0x51100130: 0x00000920, 0x51100140: 0x00000001, 0x5110010c: 0x00000101,
            0x5110014c: 0x03000000, 0x54100104: 0x00010003, 0x54100108: 0x00010000,
            0x54100118: 0x00000010, 0x5410011c: 0x00060800, 0x54100120: 0x00008000,
            0x5410012c: 0x00000801, 0x54100130: 0x00000920, 0x54100140: 0x00000001,
            0x5410010c: 0x00000101, 0x5410014c: 0x03000000, 0x54100148: 0x000000ff,
        },
        2: {
            0x51100204: 0x00010002, 0x51100208: 0x00010002, 0x51100218: 0x00000010,
            0x5110021c: 0x00060804, 0x51100224: 0x00008000, 0x5110022c: 0x00000400,
            0x51100230: 0x00880b20, 0x51100234: 0x00038000, 0x51100238: 0x00000038,
            0x51100240: 0x00000007, 0x5110024c: 0x00022000, 0x51100248: 0xff00ff00,
            0x54100204: 0x00010002, 0x54100208: 0x00010002, 0x54100218: 0x00000010,
            0x5410021c: 0x00060804, 0x54100224: 0x00008000, 0x5410022c: 0x00000400,
            0x54100230: 0x00880b20, 0x54100234: 0x00038000, 0x54100238: 0x00000038,
            0x54100240: 0x00000007, 0x5410024c: 0x00022000,
        },
        3: {
            0x51100304: 0x00010004, 0x51100308: 0x00010000, 0x51100318: 0x00000010,
            0x5110031c: 0x00000c00, 0x51100324: 0x00008000, 0x5110032c: 0x00000800,
            0x51100330: 0x00808b20, 0x51100334: 0x00038000, 0x51100338: 0x00000038,
            0x51100340: 0x00000007, 0x5110030c: 0x00001300, 0x5110034c: 0x00022000,
            0x54100304: 0x00010004, 0x54100308: 0x00010000, 0x54100318: 0x00000010,
            0x5410031c: 0x00000c00, 0x54100324: 0x00008000, 0x5410032c: 0x00000800,
            0x54100330: 0x00800b20, 0x54100334: 0x00038000, 0x54100338: 0x00000038,
            0x54100340: 0x00000007, 0x5410030c: 0x00001300, 0x5410034c: 0x00023000,
            0x54100348: 0x00ff00ff,
        },
    },
}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    root = tmp_path_factory.mktemp("regs")
    yaml, ckpt, sample = write_net(ONE, root)
    onnx = import_net(yaml, ckpt, sample, root / "one.onnx")
    return onnx, yaml


def _layer_addresses(dev, layer: int) -> set[int]:
    """Every address of a per-layer register of `layer`, in every quadrant."""
    regs = {v for f in dataclasses.fields(dev.regs)
            if isinstance(v := getattr(dev.regs, f.name), int) and f.name in (
                "nxtlyr", "rcnt", "ccnt", "oned", "prcnt", "pccnt", "stride", "wptr_base",
                "wptr_toffs", "wptr_moffs", "wptr_choffs", "rptr_base", "lctl", "lctl2",
                "mcnt", "mcnt1", "mcnt2", "ochan", "tptr", "ena", "post", "stream1",
                "stream2", "fmax")}
    return {dev.lreg_addr(g, r, layer) for g in range(dev.quadrants) for r in regs}


@pytest.mark.parametrize("device", sorted(VENDOR_LAYERS))
def test_buffer_layers_write_what_the_vendor_writes(model, device):
    dev = get_device(device)
    result = plan(model[0], dev, model[1])
    options = EmitOptions(overlap_data=True, softmax=True, zero_sram=True)
    program = register_program(lowered(result.placement, options))
    ours = {w.address: w.value for w in program.cnn_configure}
    for layer, facts in VENDOR_LAYERS[device].items():
        mine = {a: v for a, v in ours.items() if a in _layer_addresses(dev, layer)}
        assert mine == facts, f"layer {layer}"

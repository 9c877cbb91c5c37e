"""Two small networks with a data buffer (seed 000, Rolling Buffers), written the way the
vendor's kinetics action-recognition sidecar is: a per-frame CNN, a pass-through layer
that shifts the buffer, a layer that inserts the frame's result, and Conv1d layers that
read the buffer. Each comes as a vendor sidecar, a vendor-format checkpoint with random
8-bit weights and a sample, so that the vendor tool and import-izer read the same files.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Net:
    name: str
    sidecar: str
    input_shape: tuple[int, ...]
    # (layer name, weight shape, bias?) of every layer with weights, in order
    weights: tuple[tuple[str, tuple[int, ...], bool], ...]


# Net "one": 8 channels x 5 positions in quadrant 3, shift/insert one position.
ONE = Net("one", """arch: dbuf
dataset: test
data_buffer:
  - processors: 0x00ff000000000000
    dim: 5
    channels: 8
    offset: 0x2000
    name: buf
layers:
  - processors: 0x000000000000000f
    output_processors: 0x000000000000ff00
    in_offset: 0x0000
    out_offset: 0x1000
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    name: frame
  - processors: 0x00ff000000000000
    output_processors: 0x00ff000000000000
    in_offset: 0x2004
    in_channels: 8
    in_dim: 4
    in_sequences: buf
    out_offset: 0x2000
    operation: passthrough
    buffer_shift: 1
    name: shift
  - processors: 0x000000000000ff00
    output_processors: 0x00ff000000000000
    in_offset: 0x1000
    out_offset: 0x2010
    in_sequences: frame
    operation: conv2d
    kernel_size: 3x3
    pad: 0
    activate: ReLU
    buffer_insert: 1
    name: insert
  - processors: 0x00ff000000000000
    output_processors: 0x00000000000000ff
    in_offset: 0x2000
    in_channels: 8
    in_dim: 5
    in_sequences: buf
    out_offset: 0x3000
    operation: conv1d
    kernel_size: 3
    pad: 0
    activate: ReLU
    name: tcn0
  - processors: 0x00000000000000ff
    output_processors: 0x000000000000000f
    in_offset: 0x3000
    out_offset: 0x0000
    operation: conv1d
    kernel_size: 3
    pad: 0
    activate: None
    name: tcn1
""", (4, 3, 3), (("frame", (8, 4, 3, 3), True), ("insert", (8, 8, 3, 3), False),
                 ("tcn0", (8, 8, 3), True), ("tcn1", (4, 8, 3), False)))

# Net "two": 16 channels x 6 positions in quadrant 2, a pooled frame CNN, a dilated
# Conv1d reader.
TWO = Net("two", """arch: dbuf
dataset: test
data_buffer:
  - processors: 0x0000ffff00000000
    dim: 6
    channels: 16
    offset: 0x4000
    name: history
layers:
  - processors: 0x0000000000000007
    output_processors: 0x00000000ffff0000
    in_offset: 0x0000
    out_offset: 0x1000
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    max_pool: 2
    pool_stride: 2
    activate: ReLU
    name: frame
  - processors: 0x0000ffff00000000
    output_processors: 0x0000ffff00000000
    in_offset: 0x4004
    in_channels: 16
    in_dim: 5
    in_sequences: history
    out_offset: 0x4000
    operation: passthrough
    buffer_shift: 1
    name: shift
  - processors: 0x00000000ffff0000
    output_processors: 0x0000ffff00000000
    in_offset: 0x1000
    out_offset: 0x4014
    in_sequences: frame
    operation: conv2d
    kernel_size: 3x3
    pad: 0
    activate: ReLU
    buffer_insert: 1
    name: insert
  - processors: 0x0000ffff00000000
    output_processors: 0xffff000000000000
    in_offset: 0x4000
    in_channels: 16
    in_dim: 6
    in_sequences: history
    out_offset: 0x2000
    operation: conv1d
    kernel_size: 3
    dilation: 2
    pad: 0
    activate: ReLU
    name: tcn0
  - processors: 0xffff000000000000
    output_processors: 0x000000000000003f
    in_offset: 0x2000
    out_offset: 0x0000
    operation: conv1d
    kernel_size: 2
    pad: 0
    activate: None
    name: tcn1
""", (3, 6, 6), (("frame", (16, 3, 3, 3), True), ("insert", (16, 16, 3, 3), True),
                 ("tcn0", (16, 16, 3), False), ("tcn1", (6, 16, 2), True)))

# Net "two_k2": as "two", but shifting and inserting two positions (the frame CNN ends in
# two). The vendor tool stops on it (its known-answer model cannot insert more than one
# position: "could not broadcast input array from shape (1,16,2) into shape (2,16,1)"),
# so only our reference and simulator judge it.
TWO_K2 = Net("two_k2", """arch: dbuf
dataset: test
data_buffer:
  - processors: 0x0000ffff00000000
    dim: 6
    channels: 16
    offset: 0x4000
    name: history
layers:
  - processors: 0x0000000000000007
    output_processors: 0x00000000ffff0000
    in_offset: 0x0000
    out_offset: 0x1000
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    max_pool: 2
    pool_stride: 2
    activate: ReLU
    name: frame
  - processors: 0x0000ffff00000000
    output_processors: 0x0000ffff00000000
    in_offset: 0x4008
    in_channels: 16
    in_dim: 4
    in_sequences: history
    out_offset: 0x4000
    operation: passthrough
    buffer_shift: 2
    name: shift
  - processors: 0x00000000ffff0000
    output_processors: 0x0000ffff00000000
    in_offset: 0x1000
    out_offset: 0x4010
    in_sequences: frame
    operation: conv2d
    kernel_size: 1x1
    pad: 0
    activate: ReLU
    buffer_insert: 2
    name: insert
  - processors: 0x0000ffff00000000
    output_processors: 0xffff000000000000
    in_offset: 0x4000
    in_channels: 16
    in_dim: 6
    in_sequences: history
    out_offset: 0x2000
    operation: conv1d
    kernel_size: 3
    dilation: 2
    pad: 0
    activate: ReLU
    name: tcn0
  - processors: 0xffff000000000000
    output_processors: 0x000000000000003f
    in_offset: 0x2000
    out_offset: 0x0000
    operation: conv1d
    kernel_size: 2
    pad: 0
    activate: None
    name: tcn1
""", (3, 4, 2), (("frame", (16, 3, 3, 3), True), ("insert", (16, 16, 1, 1), True),
                 ("tcn0", (16, 16, 3), False), ("tcn1", (6, 16, 2), True)))

NETS = (ONE, TWO)  # the vendor tool builds these


def write_net(net: Net, root: Path, seed: int = 7, zero_every: int = 0
              ) -> tuple[Path, Path, Path]:
    """(sidecar, checkpoint, sample) of `net` under `root`: random 8-bit weights, output
    shift -1, bias values stored as the vendor's checkpoints hold them (x 2**7).
    `zero_every` n: every n-th kernel (one input channel of one output channel) is all
    zeros (with --zero-sram such kernels are not written)."""
    import torch

    rng = np.random.default_rng(seed)
    sd = {}
    for name, shape, bias in net.weights:
        w = rng.integers(-128, 128, shape)
        if zero_every:
            w.reshape(shape[0] * shape[1], -1)[::zero_every] = 0
        sd[f"{name}.op.weight"] = torch.tensor(w, dtype=torch.float32)
        if bias:
            sd[f"{name}.op.bias"] = torch.tensor(rng.integers(-128, 128, shape[0]) * 128.0)
        sd[f"{name}.weight_bits"] = torch.tensor([8.0])
        sd[f"{name}.output_shift"] = torch.tensor([-1.0])
    root.mkdir(parents=True, exist_ok=True)
    ckpt, yaml, sample = root / f"{net.name}.pth.tar", root / f"{net.name}.yaml", \
        root / f"{net.name}.npy"
    torch.save({"arch": "dbuf", "epoch": 0, "state_dict": sd, "extras": {}}, ckpt)
    yaml.write_text(net.sidecar)
    np.save(sample, rng.integers(-128, 128, net.input_shape).astype(np.int64))
    return yaml, ckpt, sample


def import_net(yaml: Path, ckpt: Path, sample: Path, out: Path,
               device: str = "MAX78000") -> Path:
    """`onnx2ai8x import-izer` of a written net (its sidecar and checkpoint) into `out`."""
    from onnx2ai8x.cli import main

    args = ["import-izer", "--config-file", str(yaml), "--checkpoint-file", str(ckpt),
            "--sample", str(sample), "--device", device, "-o", str(out)]
    assert main(args) == 0
    return out

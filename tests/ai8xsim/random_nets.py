"""Random valid network configurations for the differential against the vendor (issue 26).

`generate(seed, device)` draws a small network as the vendor's sidecar language states it
(seed 004): a chain of up to five layers over a random input, each a 3x3 or 1x1
convolution, a 1-D convolution, a pass-through, a pooling-only layer or a two-operand
element-wise layer (its operands written interleaved with `write_gap: 1`, optionally
followed by a convolution), with max or average pooling, ReLU/Abs/no activation, a
wide (32-bit) last layer, multi-pass channel counts (above 64), HWC or CHW input,
processors packed, shifted or spread (one channel every fourth processor), and the
output offsets in free data memory; on the MAX78002 also calcx4 on 3x3 convolutions.
Options: `--fifo` (FIFO input) and streaming of the first one or two convolutions.
`write` turns a configuration into the three files both tools read: the sidecar, a
vendor-format checkpoint with random weights of the layer's width, and a random sample.

The drawing is deterministic in (seed, device): a configuration is named by them
(`Config.name`) and comes back the same in every run.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DEVICES = ("MAX78000", "MAX78002")


@dataclass(frozen=True)
class Weights:
    """The checkpoint entry of one layer with weights."""

    name: str
    shape: tuple[int, ...]
    bias: bool
    bits: int
    output_shift: int
    outputs: int = 0  # output channels where not shape[0] (transposed: (in, out, k, k))


@dataclass(frozen=True)
class Config:
    seed: int
    device: str
    sidecar: str
    input_shape: tuple[int, ...]
    weights: tuple[Weights, ...]
    options: tuple[str, ...] = ()
    kinds: tuple[str, ...] = field(default=())  # the drawn layer kinds, for the record

    @property
    def name(self) -> str:
        return f"{'ai85' if self.device == 'MAX78000' else 'ai87'}-random-{self.seed}"


# Data-memory bytes one processor's memory holds per device (seed 000, "Data Memory"):
# the offsets are drawn below this.
MEMORY_BYTES = {"MAX78000": 0x8000, "MAX78002": 0x14000}
REGION = 0x1000  # bytes of one layer's output region (the drawn shapes stay below)

# Seeds below this draw what the first generator drew (their configurations are those
# of the earlier sweeps and of the CI sample); from it on, the features added later as
# well: depthwise convolutions (with and without broadcast), read_gap and readahead on
# the MAX78002, dilation, padding 2, Conv1d kernels up to 9, element-wise layers of 3-4
# operands, pooling of unequal sides and pool dilation, a sidecar output_shift,
# transposed convolutions and a flattening linear last layer.
GENERATION_2 = 1000


@dataclass
class _Tensor:
    """A layer output (or the input) as the next layer sees it."""

    channels: int
    dim: tuple[int, ...]  # (H, W) or (L,)
    processors: int
    offset: int
    name: str

    @property
    def one_d(self) -> bool:
        return len(self.dim) == 1

    @property
    def passes(self) -> int:
        return (self.channels + 63) // 64


def _hex(mask: int) -> str:
    return f"0x{mask:016x}"


def _block(start: int, count: int) -> int:
    return ((1 << count) - 1) << start


def _pack(channels: int, rng: random.Random) -> int:
    """Output processors for `channels` channels (64 per pass): a contiguous block at 0
    or shifted to a random quadrant-aligned or four-aligned start."""
    n = (channels + (channels + 63) // 64 - 1) // ((channels + 63) // 64)  # per pass
    starts = [s for s in range(0, 65 - n, 4)]
    start = 0 if rng.random() < 0.5 else rng.choice(starts)
    return _block(start, n)


def _spread(channels: int, rng: random.Random) -> int:
    """Input processors one every `step` processors (step 4, or 2), when that fits."""
    step = rng.choice((2, 4))
    if channels * step > 64:
        return _block(0, channels)
    return sum(1 << (i * step) for i in range(channels))


def _packed_like(processors: int, rng: random.Random) -> int:
    """Pass-through output processors: each quadrant's input processors packed
    (vendor rule: the output map of a quadrant is its input count of contiguous
    processors), starting at the quadrant's first processor or at a four-aligned one."""
    out = 0
    for g in range(4):
        n = bin(processors >> 16 * g & 0xFFFF).count("1")
        if not n:
            continue
        first = (processors >> 16 * g & 0xFFFF) & -(processors >> 16 * g & 0xFFFF)
        first = first.bit_length() - 1
        # (the unaligned start `first` is rare: the vendor's write pointer is four-aligned)
        starts = sorted({first & ~3, *[s for s in range(0, 17 - n, 4)]})
        if first + n <= 16 and rng.random() < 0.1:
            starts = [first]
        start = rng.choice(starts)
        out |= _block(start, n) << 16 * g
    return out


class _Builder:
    def __init__(self, seed: int, device: str) -> None:
        self.rng = random.Random(f"{device}:{seed}")
        self.device = device
        self.lines: list[str] = []
        self.weights: list[Weights] = []
        self.kinds: list[str] = []
        self.count = 0
        self.stream_left = 0  # convolutions still to stream
        # Seeds from GENERATION_2 also draw the later features, from their own stream so
        # that the first stream's draws (and so seeds below it) stay as they were.
        self.x = random.Random(f"{device}:{seed}:2") if seed >= GENERATION_2 else None

    def new(self, p: float) -> bool:
        """A later feature, drawn with probability `p` (never below GENERATION_2)."""
        return self.x is not None and self.x.random() < p

    def region(self, avoid: set[int]) -> int:
        """A free output region (not the input of this layer nor any kept output)."""
        top = MEMORY_BYTES[self.device] // REGION
        free = [r for r in range(top) if r not in avoid]
        return self.rng.choice(free) * REGION

    def add(self, entries: dict) -> str:
        name = f"l{self.count}"
        self.count += 1
        self.lines.append("  - name: " + name)
        for key, value in entries.items():
            self.lines.append(f"    {key}: {value}")
        return name

    def weight(self, name: str, shape: tuple[int, ...], bias: bool = True,
               outputs: int = 0) -> None:
        rng = self.rng
        bits = rng.choice((8, 8, 8, 4, 2))
        self.weights.append(Weights(name, shape, bias and rng.random() < 0.6, bits,
                                    rng.choice((-1, 0, 0, 1)), outputs))


def _pool(b: _Builder, t: _Tensor, entries: dict) -> tuple[int, ...]:
    """Maybe add pooling to `entries`; the dimensions after it."""
    rng = b.rng
    if t.one_d:
        if t.dim[0] >= 6 and rng.random() < 0.3:
            entries[rng.choice(("max_pool", "avg_pool"))] = 2
            entries["pool_stride"] = 2
            return ((t.dim[0] - 2) // 2 + 1,)
        return t.dim
    h, w = t.dim
    if min(h, w) >= 4 and rng.random() < 0.4:
        size, stride = rng.choice(((2, 2), (2, 2), (3, 3), (2, 1)))
        entries[rng.choice(("max_pool", "avg_pool"))] = size
        entries["pool_stride"] = stride
        sizes = (size, size)
        if b.new(0.3):  # unequal sides [H, W] (the stride stays square)
            sizes = (b.x.choice((1, 2, 3)), b.x.choice((1, 2, 3)))
            if sizes[0] == sizes[1]:
                sizes = (sizes[0], sizes[0] % 3 + 1)
            entries[next(k for k in ("max_pool", "avg_pool") if k in entries)] = \
                f"[{sizes[0]}, {sizes[1]}]"
        dil = 1
        if b.device == "MAX78002" and b.new(0.2) and max(sizes) > 1:
            dil = 2  # (pool_dilation, MAX78002 only)
            entries["pool_dilation"] = dil
        # the window spans dil * (size - 1) + 1 pixels
        out = tuple((d - dil * (k - 1) - 1) // stride + 1
                    for d, k in zip((h, w), sizes, strict=True))
        if min(out) < 1:
            entries.pop("pool_dilation", None)
            out = tuple((d - k) // stride + 1 for d, k in zip((h, w), sizes, strict=True))
        return out
    return (h, w)


def _conv(b: _Builder, t: _Tensor, kind: str, last: bool, extra: dict | None = None
          ) -> _Tensor:
    rng = b.rng
    entries: dict = {"processors": _hex(t.processors)}
    entries.update(extra or {})
    dim = _pool(b, t, entries)
    out_ch = rng.choice((1, 3, 4, 8, 12, 16, 24, 32, 48, 64)) if rng.random() < 0.85 \
        else rng.choice((72, 96, 128))
    # (the later features draw from b.x only, after the first stream's draws they change)
    if b.x is not None and _pixels(_Tensor(0, tuple(d + 4 for d in dim), 0, 0, "")) \
            * 4 * ((out_ch + 63) // 64) > REGION:
        out_ch = 64  # (an output of one pass fits the region)
    depthwise = b.device == "MAX78002" and b.new(0.2)  # groups = channels, MAX78002 only
    if depthwise:
        out_ch = t.channels
    if kind == "conv1d":
        k = rng.choice((1, 3, 5))
        pad = rng.choice((0, k // 2)) if k > 1 else 0
        if b.new(0.3):  # Conv1d kernels 1-9, padding below the kernel and at most 2
            k = b.x.randint(1, min(9, dim[0] + 4))
            pad = b.x.randint(0, min(2, k - 1))
            if dim[0] + 2 * pad < k:
                pad = min(2, k - 1)
        if dim[0] + 2 * pad < k:
            pad = k // 2
        # (dilation: the vendor takes kernels of at most 3 with it)
        dil = b.x.choice((2, 3)) if 1 < k <= 3 and b.new(0.2) else 1
        if dim[0] + 2 * pad - dil * (k - 1) < 1:
            dil = 1
        entries.update(operation="conv1d", kernel_size=k, pad=pad)
        out_dim: tuple[int, ...] = (dim[0] + 2 * pad - dil * (k - 1),)
        shape: tuple[int, ...] = (out_ch, 1 if depthwise else t.channels, k)
    else:
        k = 3 if kind == "conv3x3" else 1
        pad = rng.choice((0, 1, 1)) if k == 3 and min(dim) >= 3 else (1 if k == 3 else 0)
        if b.stream_left:
            pad = 1  # (the vendor wants padding on the last streaming layer)
        elif k == 3 and b.new(0.15):
            pad = 2
        dil = 1  # (Conv2d dilation: the vendor tool refuses it, "Conv1d only")
        entries.update(operation="conv2d", kernel_size=f"{k}x{k}", pad=pad)
        out_dim = tuple(d + 2 * pad - dil * (k - 1) for d in dim)
        shape = (out_ch, 1 if depthwise else t.channels, k, k)
    if dil > 1:
        entries["dilation"] = dil
    if depthwise:
        entries["groups"] = t.channels
    if b.stream_left:
        b.stream_left -= 1
        entries["streaming"] = "true"
    if kind == "conv3x3" and b.device == "MAX78002" and out_ch % 4 == 0 \
            and rng.random() < 0.25 and not depthwise:
        entries["calcx4"] = "true"
    out = _pack(out_ch, rng)
    if depthwise and (b.new(0.5) or not _contiguous(t.processors)):
        # broadcast: the output on the input's processors (without it, the input's
        # processors must be contiguous: gaps are not modelled)
        out = t.processors
    wide = last and out_ch <= 64 and rng.random() < 0.25
    if wide and b.x is not None and _pixels(_Tensor(0, out_dim, 0, 0, "")) * 16 > REGION:
        wide = False  # (32-bit output takes four words a pixel: it must fit the region)
    act = "None" if wide else rng.choice(("ReLU", "ReLU", "None", "Abs"))
    entries["activate"] = act
    if wide:
        entries["output_width"] = 32
    elif b.new(0.15):
        entries["output_shift"] = b.x.choice((-2, -1, 1, 2))
    avoid = {t.offset // REGION}
    if b.device == "MAX78002" and "streaming" not in entries and b.new(0.15):
        # read-ahead: input and output in different data memory instances (0x4000
        # bytes on the MAX78002: 5120 words x 4 memories / 5 instances)
        entries["readahead"] = "true"
        avoid |= {r for r in range(MEMORY_BYTES[b.device] // REGION)
                  if r * REGION // 0x4000 == t.offset // 0x4000}
    region = b.region(avoid)
    entries.update(output_processors=_hex(out), out_offset=f"0x{region:04x}")
    name = b.add(entries)
    b.weight(name, shape)
    b.kinds.append(("depthwise-" if depthwise else "") + kind + ("-wide" if wide else ""))
    return _Tensor(out_ch, out_dim, out, region, name)


def _pixels(t: _Tensor) -> int:
    return t.dim[0] * (1 if t.one_d else t.dim[1])


def _linear(b: _Builder, t: _Tensor) -> _Tensor:
    """A linear last layer (2-D input flattened unless it is 1x1)."""
    x = b.x
    out_ch = x.choice((1, 2, 4, 8, 10, 16))
    pixels = _pixels(t)
    entries: dict = {"processors": _hex(t.processors), "operation": "mlp"}
    if pixels > 1:
        entries["flatten"] = "true"
    wide = x.random() < 0.4
    entries["activate"] = "None" if wide else x.choice(("ReLU", "None"))
    if wide:
        entries["output_width"] = 32
    region = b.region({t.offset // REGION})
    out = _pack(out_ch, b.rng)
    entries.update(output_processors=_hex(out), out_offset=f"0x{region:04x}")
    name = b.add(entries)
    b.weight(name, (out_ch, t.channels * pixels))
    b.kinds.append("linear" + ("-flatten" if pixels > 1 else "") + ("-wide" if wide else ""))
    return _Tensor(out_ch, (1, 1), out, region, name)


def _transposed(b: _Builder, t: _Tensor) -> _Tensor:
    """A transposed 3x3 convolution (stride 2: the output about twice the input)."""
    x = b.x
    out_ch = x.choice((4, 8, 16, 32, 64))
    pad = x.choice((0, 1, 2))
    entries: dict = {"processors": _hex(t.processors), "operation": "convtranspose2d",
                     "kernel_size": "3x3", "pad": pad,
                     "activate": x.choice(("ReLU", "None"))}
    # (PyTorch's output size with the hardware's output padding of 1)
    dim = tuple((d - 1) * 2 - 2 * pad + 3 + 1 for d in t.dim)
    region = b.region({t.offset // REGION})
    out = _pack(out_ch, b.rng)
    entries.update(output_processors=_hex(out), out_offset=f"0x{region:04x}")
    name = b.add(entries)
    b.weight(name, (t.channels, out_ch, 3, 3), outputs=out_ch)  # (in, out, kH, kW)
    b.kinds.append("convtranspose2d")
    return _Tensor(out_ch, dim, out, region, name)


def _contiguous(mask: int) -> bool:
    low = mask & -mask
    return (mask + low) & mask == 0


def _passthrough(b: _Builder, t: _Tensor, kind: str) -> _Tensor:
    if b.x is not None and kind == "pool" and (t.passes > 1 or min(t.dim) < 2):
        kind = "passthrough"  # (pooling-only layers pool one pass, of at least 2x2)
    entries: dict = {"processors": _hex(t.processors), "operation": "none"}
    dim = _pool(b, t, entries) if kind == "pool" else t.dim
    if kind == "pool" and dim == t.dim:
        entries.update(max_pool=2, pool_stride=2)
        dim = tuple((d - 2) // 2 + 1 for d in t.dim)
    out = _packed_like(t.processors, b.rng) if t.passes == 1 else t.processors
    region = b.region({t.offset // REGION})
    entries.update(output_processors=_hex(out), out_offset=f"0x{region:04x}")
    name = b.add(entries)
    b.kinds.append(kind)
    return _Tensor(t.channels, dim, out, region, name)


def _eltwise(b: _Builder, t: _Tensor, last: bool) -> _Tensor:
    """Two convolutions of `t` written interleaved (write_gap 1), then an element-wise
    layer over both (pass-through, or with a convolution after it)."""
    rng = b.rng
    ch = rng.choice((4, 8, 16, 32))
    out = _pack(ch, rng)
    base = b.region({t.offset // REGION})
    n = 2
    if b.count + 5 <= 8 and _pixels(t) * 16 <= REGION and b.new(0.3):
        n = b.x.choice((3, 4))  # (`operands`: the operands written n-1 words apart)
    names = []
    for i in range(n):
        entries: dict = {"processors": _hex(t.processors), "operation": "conv2d",
                   "kernel_size": "3x3", "pad": 1, "activate": "ReLU",
                   "output_processors": _hex(out), "out_offset": f"0x{base + 4 * i:04x}",
                   "write_gap": n - 1}
        if t.one_d:
            entries.update(operation="conv1d", kernel_size=3)
        if i:  # the other operands read the block's input again
            entries.update(in_offset=f"0x{t.offset:04x}",
                           in_sequences="input" if t.name == "input" else t.name)
        name = b.add(entries)
        b.weight(name, (ch, t.channels, 3) if t.one_d else (ch, t.channels, 3, 3))
        names.append(name)
    op = rng.choice(("add", "sub", "xor", "or"))
    region = b.region({t.offset // REGION, base // REGION})
    entries = {"processors": _hex(out), "in_offset": f"0x{base:04x}",
               "in_sequences": f"[{', '.join(names)}]", "eltwise": op}
    if n > 2:
        entries["operands"] = n
    with_conv = not t.one_d and rng.random() < 0.4  # (no element-wise with Conv1d)
    if with_conv:
        out_ch = rng.choice((4, 8, 16))
        entries.update(operation="conv2d", kernel_size="3x3", pad=1,
                       activate=rng.choice(("ReLU", "None")))
        if rng.random() < 0.3 and not t.one_d:
            entries["pool_first"] = rng.choice(("true", "false"))
            entries["max_pool"] = 2
            entries["pool_stride"] = 1
        new_out = _pack(out_ch, rng)
    else:
        entries["operation"] = "none"
        out_ch, new_out = ch, out
    dim = t.dim
    if "max_pool" in entries:
        dim = (dim[0] - 1, dim[1] - 1)
    entries.update(output_processors=_hex(new_out), out_offset=f"0x{region:04x}")
    name = b.add(entries)
    if with_conv:
        # (the MAX78002 keeps a multi-operand element-wise convolution without bias)
        b.weight(name, (out_ch, ch, 3, 3), bias=b.device == "MAX78000")
    b.kinds.append(f"eltwise{n if n > 2 else ''}-{op}" + ("-conv" if with_conv else ""))
    return _Tensor(out_ch, dim, new_out, region, name)


def generate(seed: int, device: str) -> Config:
    """The random configuration `seed` for `device`."""
    b = _Builder(seed, device)
    rng = b.rng
    one_d = rng.random() < 0.2
    channels = rng.choice((1, 2, 3, 4, 5, 8, 12, 16, 32, 64)) if rng.random() < 0.9 \
        else rng.choice((96, 128))
    chw = not one_d and channels <= 16 and rng.random() < 0.3
    if one_d:
        dim: tuple[int, ...] = (rng.randint(6, 40),)
    else:
        dim = (rng.randint(3, 16), rng.randint(3, 16))
    # The input starts at processor 0 (the vendor tool wants quadrant 0 in use); CHW
    # input has one channel per data memory (every fourth processor).
    if chw:
        procs = sum(1 << 4 * i for i in range(channels))
    elif channels <= 16 and rng.random() < 0.3:
        procs = _spread(channels, rng)
    else:
        passes = (channels + 63) // 64
        procs = _block(0, (channels + passes - 1) // passes)
    options: tuple[str, ...] = ()
    if not one_d and not chw and channels <= 4 and rng.random() < 0.35:
        # FIFO input (HWC, the channels on processors 0-3 that FIFO 0 feeds), and
        # maybe the first one or two convolutions streaming from it
        procs = _block(0, channels)
        options = ("--fifo",)
        if rng.random() < 0.6:
            b.stream_left = rng.choice((1, 1, 2))
            dim = (rng.randint(8, 24), rng.randint(8, 24))
    t = _Tensor(channels, dim, procs, 0, "input")
    n_layers = max(rng.randint(1, 4), b.stream_left)
    previous = "input"
    for i in range(n_layers):
        last = i == n_layers - 1
        kinds = ["conv1d"] if t.one_d else ["conv3x3", "conv3x3", "conv1x1"]
        kinds += ["passthrough", "pool"]
        if not last and t.passes == 1 and b.count + 3 <= 8 and _pixels(t) * 8 <= REGION:
            kinds.append("eltwise")
        kind = rng.choice(kinds)
        if b.stream_left:
            kind = "conv3x3"
        before = len(b.lines)
        if kind == "eltwise":
            t = _eltwise(b, t, last)
        elif kind in ("passthrough", "pool"):
            t = _passthrough(b, t, kind)
        elif last and not t.one_d and t.passes == 1 and t.dim[0] * t.dim[1] <= 16 \
                and b.new(0.15):
            t = _linear(b, t)
        elif kind == "conv3x3" and not b.stream_left and max(t.dim) <= 12 \
                and b.new(0.12):
            t = _transposed(b, t)
        else:
            extra = None
            if b.device == "MAX78002" and previous == "conv" and t.passes == 1 \
                    and _pixels(t) <= 400 and b.new(0.25):
                # read_gap (MAX78002, single pass): the previous convolution writes
                # every other word (write_gap 1, a line of its block) and this layer
                # reads them where they are
                b.lines.append("    write_gap: 1")
                extra = {"read_gap": 1}
                b.kinds.append("read_gap")
            t = _conv(b, t, kind, last, extra)
        previous = "conv" if kind in ("conv3x3", "conv1x1", "conv1d") \
            and b.kinds[-1].split("-")[-1] in ("conv3x3", "conv1x1", "conv1d") \
            and "streaming: true" not in b.lines[before:] else kind
        if i == 0:
            # the first layer states where the input is and in which format
            b.lines.insert(before + 1, "    in_offset: 0x0000")
            b.lines.insert(before + 1, f"    data_format: {'CHW' if chw else 'HWC'}")
    sidecar = "\n".join([f"# random configuration {seed} for {device}", "arch: rnd",
                         "dataset: random", "layers:", *b.lines, ""])
    shape = (channels, dim[0], 1) if one_d else (channels, *dim)
    kinds = tuple(b.kinds) + tuple(o.strip("-") for o in options)
    if "streaming: true" in sidecar:
        kinds += ("streaming",)
    if "calcx4: true" in sidecar:
        kinds += ("calcx4",)
    return Config(seed, device, sidecar, shape, tuple(b.weights), options, kinds)


def write(config: Config, root: Path) -> tuple[Path, Path, Path]:
    """(sidecar, checkpoint, sample) of `config` under `root`: random weights of each
    layer's width, bias values as the vendor's checkpoints hold them (x 2**(bits-1))."""
    import torch

    rng = np.random.default_rng(config.seed)
    state = {}
    for w in config.weights:
        lo, hi = -(1 << (w.bits - 1)), 1 << (w.bits - 1)
        state[f"{w.name}.op.weight"] = torch.tensor(rng.integers(lo, hi, w.shape),
                                                    dtype=torch.float32)
        if w.bias:
            state[f"{w.name}.op.bias"] = torch.tensor(
                rng.integers(-128, 128, w.outputs or w.shape[0]) * float(1 << (w.bits - 1)))
        state[f"{w.name}.weight_bits"] = torch.tensor([float(w.bits)])
        state[f"{w.name}.output_shift"] = torch.tensor([float(w.output_shift)])
    root.mkdir(parents=True, exist_ok=True)
    yaml, ckpt, sample = root / "network.yaml", root / "checkpoint.pth.tar", \
        root / "sample.npy"
    torch.save({"arch": "rnd", "epoch": 0, "state_dict": state, "extras": {}}, ckpt)
    yaml.write_text(config.sidecar)
    np.save(sample, rng.integers(-128, 128, config.input_shape).astype(np.int64))
    return yaml, ckpt, sample

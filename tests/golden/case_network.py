"""A golden case as a Network, and its outputs laid out as the accelerator writes them.

`case_network(case_dir)` reads the vendor's resolved configuration (`case.json`
`layers`, column-wise) and the checkpoint's weights, independently of the sidecar
resolver. `output_words(...)` places output values in data memory (facts from the
vendor's izer/tornadocnn.py and izer/unload.py: HWC, four 8-bit channels per 32-bit
word of the processor quad's memory instance, one word per channel at 32 bits).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from onnx2ai8x.network import OP_CONV1D, OP_NONE, Layer, Network

# Data memory per device: SRAM base, distance between processor groups (16 processors),
# and 32-bit words per memory instance (one instance per 4 processors).
_MEMORY = {
    "MAX78000": (0x50400000, 0x400000, 2048),
    "MAX78002": (0x51800000, 0x1000000, 8192),
}
_MAX_PROCESSORS = 64


def _pairs(value) -> tuple[int, int]:
    return (int(value[0]), int(value[1]))


def execution_order(layers: dict) -> list[int]:
    """The layers the vendor simulates, in order: from `first_layer_used`, following
    `simulated_sequence` where set (its known answer does) and `next_sequence` otherwise."""
    order = []
    ll = int(layers["first_layer_used"])
    n = int(layers["layers"])
    while 0 <= ll < n and ll not in order:
        order.append(ll)
        sim = layers["simulated_sequence"][ll]
        nxt = sim if sim is not None else layers["next_sequence"][ll]
        if nxt is None or nxt == -1:
            break
        ll = int(nxt)
    return order


def case_network(case_dir: Path | str) -> Network:
    """The Network the vendor simulated for this case (layers named `layer<N>`)."""
    from onnx2ai8x.importer.checkpoint import load_checkpoint

    case_dir = Path(case_dir)
    case = json.loads((case_dir / "case.json").read_text())
    cols = case["layers"]
    n = int(cols["layers"])
    weights = iter(load_checkpoint(case_dir / "checkpoint.pth.tar"))
    # Weights belong to the layers with an operator, in layer order (golden README).
    ck_of = {i: next(weights) for i in range(n) if cols["operator"][i] != OP_NONE
             and not cols["bypass"][i]}
    order = execution_order(cols)
    pos = {ll: k for k, ll in enumerate(order)}
    built = []
    for k, ll in enumerate(order):
        seqs = cols["in_sequences"][ll]
        if seqs is None:
            # The vendor hands each layer the output of the layer simulated before it.
            in_seq = (k - 1,)
        else:
            in_seq = tuple(-1 if s == -1 else pos[int(s)] for s in seqs)
        ck = ck_of.get(ll)
        built.append(Layer(
            name=f"layer{ll}", operator=int(cols["operator"][ll]),
            input_channels=int(cols["input_channels"][ll]),
            output_channels=int(cols["output_channels"][ll]),
            input_dim=_pairs(cols["input_dim"][ll]), pooled_dim=_pairs(cols["pooled_dim"][ll]),
            output_dim=_pairs(cols["output_dim"][ll]),
            kernel_size=_pairs(cols["kernel_size"][ll]), padding=_pairs(cols["padding"][ll]),
            stride=_pairs(cols["stride"][ll]), dilation=_pairs(cols["dilation"][ll]),
            conv_groups=int(cols["conv_groups"][ll]), pool=_pairs(cols["pool"][ll]),
            pool_stride=_pairs(cols["pool_stride"][ll]),
            pool_dilation=_pairs(cols["pool_dilation"][ll]),
            pool_average=bool(cols["pool_average"][ll]),
            pool_first=bool(cols["pool_first"][ll]), eltwise=int(cols["eltwise"][ll]),
            operands=int(cols["operands"][ll]), activation=cols["activation"][ll],
            output_shift=int(cols["output_shift"][ll] or 0),
            quantization=int(cols["quantization"][ll]),
            output_width=int(cols["output_width"][ll]), flatten=bool(cols["flatten"][ll]),
            output_padding=_pairs(cols["output_padding"][ll]), in_sequences=in_seq,
            weights=None if ck is None else ck.weight,
            bias=None if ck is None else ck.accumulator_bias,
            bias_hw=None if ck is None else ck.bias_hw))
    sample = np.load(case_dir / "sample.npy")
    first = built[0]
    shape = tuple(int(d) for d in sample.shape)
    if first.operator == OP_CONV1D and shape[-1] == 1:
        shape = shape[:2]  # the vendor holds 1-D samples as (C, L, 1)
    return Network(layers=tuple(built), input_shape=shape, device=case["device"],
                   name=case["name"])


def case_outputs(case_dir: Path | str) -> list[int]:
    """Network indices of the layers whose output memory `expected_output` checks."""
    cols = json.loads((Path(case_dir) / "case.json").read_text())["layers"]
    order = execution_order(cols)
    outs = [k for k, ll in enumerate(order) if cols["output_layer"][ll]]
    if len(order) - 1 not in outs:
        outs.append(len(order) - 1)  # the last simulated layer is always unloaded
    return outs


def load_sample(case_dir: Path | str, network: Network) -> np.ndarray:
    """sample.npy shaped as the network input."""
    return np.load(Path(case_dir) / "sample.npy").reshape(network.input_shape)


def output_words(values: np.ndarray, device: str, out_offset: int, processor_map: int,
                 output_width: int, write_gap: int) -> dict[int, int]:
    """{address: 32-bit word} of one output layer's values (C, H, W) or (C, L).

    Channels are spread over the enabled processors in order, in passes of at most 64;
    each pixel occupies `passes` slots (of one word for 8 bits, four for 32 bits),
    every slot followed by `write_gap` unused ones.
    """
    base, group_bytes, instance_words = _MEMORY[device]
    vals = np.asarray(values, dtype=np.int64)
    chans = vals.shape[0]
    pixels = vals.reshape(chans, -1)
    passes = -(-chans // _MAX_PROCESSORS)
    per_pass = -(-chans // passes)
    if chans > _MAX_PROCESSORS:
        per_pass = min(-(-per_pass // 4) * 4, _MAX_PROCESSORS)
    procs = [p for p in range(_MAX_PROCESSORS) if processor_map >> p & 1]
    slot_words = output_width // 8
    words: dict[int, int] = {}
    for c in range(chans):
        this_pass, j = divmod(c, per_pass)
        proc = procs[j]
        quad = proc & ~3
        quad_used = [p for p in procs[:per_pass] if p & ~3 == quad]
        instance = (quad % 16) * instance_words + (quad // 16) * group_bytes // 4
        for px in range(pixels.shape[1]):
            word = instance + (px * passes + this_pass) * slot_words * (write_gap + 1)
            v = int(pixels[c, px])
            if slot_words == 1:
                addr = base + out_offset + 4 * word
                words[addr] = words.get(addr, 0) | (v & 0xFF) << (8 * (proc & 3))
            else:
                addr = base + out_offset + 4 * word + 4 * quad_used.index(proc)
                words[addr] = v & 0xFFFFFFFF
    return words


def case_words(case_dir: Path | str, network: Network, outputs: list[np.ndarray],
               indices: list[int]) -> dict[int, int]:
    """All output layers' values (one sample, no batch axis) as data memory words."""
    case = json.loads((Path(case_dir) / "case.json").read_text())
    cols = case["layers"]
    order = execution_order(cols)
    words: dict[int, int] = {}
    for idx, out in zip(indices, outputs, strict=True):
        ll = order[idx]
        words.update(output_words(out, case["device"], int(cols["out_offset"][ll]),
                                  int(cols["output_processor_map"][ll]),
                                  int(cols["output_width"][ll]), int(cols["write_gap"][ll])))
    return words


def expected_output(case_dir: Path | str) -> list:
    """`expected_output` of expected.json.gz: [address, mask, words] groups."""
    with gzip.open(Path(case_dir) / "expected.json.gz", "rt") as fh:
        return json.load(fh)["expected_output"]


def compare_words(expected: list, words: dict[int, int], limit: int = 8) -> list[str]:
    """Differences between expected memory groups and computed words (masked)."""
    problems = []
    for address, mask, values in expected:
        for i, want in enumerate(values):
            addr = address + 4 * i
            got = words.get(addr)
            if got is None:
                problems.append(f"{addr:#x}: no output layer writes this word")
            elif (got ^ want) & mask:
                problems.append(f"{addr:#x}: got {got & mask:#010x}, want {want & mask:#010x}")
            if len(problems) >= limit:
                return problems
    return problems

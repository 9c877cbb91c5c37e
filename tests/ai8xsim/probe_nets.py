"""Hand-written configurations for the differential (issue 26): the class of layers whose
output processors or packing differ from their input's (pass-through, pooling-only and
element-wise layers, with and without write_gap, HWC and CHW, depthwise), calcx4 on every
kernel shape and weight width, each with what the vendor tool, onnx2ai8x and `verify`
make of it (`EXPECTED`). Run through tests/ai8xsim/differential.py `run_config`
(opt-in: tests/ai8xsim/test_random_differential.py with ONNX2AI8X_RANDOM_SWEEP).
"""
from __future__ import annotations

from tests.ai8xsim.random_nets import Config, Weights

H = "arch: rnd\ndataset: random\nlayers:\n"


def W(name: str, shape: tuple[int, ...], bias: bool = True, bits: int = 8) -> Weights:  # noqa: N802
    return Weights(name, shape, bias, bits, 0)


def _x4(k: int, q: int, cin: int, cout: int, x0: str = "false") -> tuple:
    """Three MAX78002 convolutions, the last two calcx4 (`x0`: the first as well)."""
    mp = "0xffffffffffffffff"
    return ("MAX78002", H + f"""  - name: l0
    processors: 0x0000000000000007
    output_processors: {mp}
    calcx4: {x0}
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    out_offset: 0x4000
  - name: l1
    processors: {mp}
    operation: conv2d
    kernel_size: {k}x{k}
    pad: {k // 2}
    calcx4: true
    activate: None
    out_offset: 0x8000
  - name: l2
    processors: {hex((1 << (cout // ((cout + 63) // 64))) - 1)}
    operation: conv2d
    kernel_size: {k}x{k}
    pad: {k // 2}
    calcx4: true
    activate: ReLU
    out_offset: 0x0000
""", (3, 6, 5), (W("l0", (cin, 3, 3, 3)), W("l1", (cout, cin, k, k), True, q),
                        W("l2", (64, cout, k, k), False, q)))

PROBES: dict[str, tuple] = {
 # the vendor suite's passthrough-2: input on 0, 4, 8, 12, 16, output on 0-3 and 16
 "passthrough-2": ("MAX78000", H + """  - name: l0
    processors: 0x0000000000011111
    output_processors: 0x000000000001000f
    operation: none
    out_offset: 0x2000
""", (5, 17, 23), ()),
 # conv writing to gapped output processors, then pass-through packing them
 "conv-gap-out": ("MAX78000", H + """  - name: l0
    processors: 0x000000000000000f
    output_processors: 0x0000000000001111
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    out_offset: 0x2000
  - name: l1
    processors: 0x0000000000001111
    output_processors: 0x000000000000000f
    operation: none
    out_offset: 0x4000
""", (4, 8, 8), (W("l0", (4, 4, 3, 3)),)),
 # CHW input pass-through to packed processors
 "chw-pass": ("MAX78000", H + """  - name: l0
    data_format: CHW
    processors: 0x0000000000001111
    output_processors: 0x000000000000000f
    operation: none
    out_offset: 0x2000
""", (4, 8, 8), ()),
 "chw-pool": ("MAX78002", H + """  - name: l0
    data_format: CHW
    processors: 0x0000000000001111
    output_processors: 0x000000000000000f
    operation: none
    max_pool: 2
    pool_stride: 2
    out_offset: 0x2000
""", (4, 8, 8), ()),
 # pass-through writing with a gap, then an element-wise layer over it and a conv output
 "pass-writegap": ("MAX78000", H + """  - name: l0
    processors: 0x0000000000011111
    output_processors: 0x000000000001000f
    operation: none
    out_offset: 0x2000
    write_gap: 1
  - name: l1
    in_sequences: input
    in_offset: 0x0000
    processors: 0x0000000000011111
    output_processors: 0x000000000001000f
    operation: none
    out_offset: 0x2004
    write_gap: 1
  - name: l2
    in_sequences: [l0, l1]
    in_offset: 0x2000
    processors: 0x000000000001000f
    output_processors: 0x000000000000001f
    eltwise: add
    operation: none
    out_offset: 0x4000
""", (5, 6, 7), ()),
 # element-wise pass-through over gapped operands, packed output
 "eltwise-gap": ("MAX78002", H + """  - name: l0
    processors: 0x0000000000000007
    output_processors: 0x0000000000000111
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    out_offset: 0x2000
    write_gap: 1
  - name: l1
    in_sequences: input
    in_offset: 0x0000
    processors: 0x0000000000000007
    output_processors: 0x0000000000000111
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    out_offset: 0x2004
    write_gap: 1
  - name: l2
    in_sequences: [l0, l1]
    in_offset: 0x2000
    processors: 0x0000000000000111
    output_processors: 0x0000000000000007
    eltwise: xor
    operation: none
    out_offset: 0x4000
""", (3, 6, 7), (W("l0", (3, 3, 3, 3)), W("l1", (3, 3, 3, 3)))),
 "pt-unal-same": ("MAX78000", H + """  - name: l0
    processors: 0x000000000000000c
    output_processors: 0x000000000000000c
    operation: none
    out_offset: 0x2000
""", (2, 5, 6), ()),
 "pt-unal-pack": ("MAX78000", H + """  - name: l0
    processors: 0x000000000000000c
    output_processors: 0x0000000000000003
    operation: none
    out_offset: 0x2000
""", (2, 5, 6), ()),
 "pt-unal-4": ("MAX78002", H + """  - name: l0
    processors: 0x0000000000000ff3
    output_processors: 0x00000000000003ff
    operation: none
    avg_pool: 2
    pool_stride: 2
    out_offset: 0x2000
""", (10, 6, 6), ()),
 "pt-q1": ("MAX78000", H + """  - name: l0
    processors: 0x0000000055550003
    output_processors: 0x00000000ff000030
    operation: none
    out_offset: 0x2000
""", (10, 4, 5), ()),
 "pt-writegap": ("MAX78000", H + """  - name: l0
    processors: 0x0000000000011111
    output_processors: 0x000000000001000f
    operation: none
    out_offset: 0x2000
    write_gap: 1
  - name: l1
    in_sequences: input
    in_offset: 0x0000
    processors: 0x0000000000011111
    output_processors: 0x000000000001000f
    operation: none
    out_offset: 0x2004
    write_gap: 1
  - name: l2
    in_sequences: [l0, l1]
    in_offset: 0x2000
    processors: 0x000000000001000f
    output_processors: 0x000000000001000f
    eltwise: sub
    operation: none
    out_offset: 0x4000
""", (5, 6, 7), ()),
 "x4-1x1": _x4(1, 8, 64, 64),
 "x4-1x1-72": _x4(1, 8, 64, 72),
 "x4all-1x1": _x4(1, 8, 64, 64, x0="true"),
 "x4all-1x1-36": _x4(1, 8, 64, 36, x0="true"),
 "x4all-1x1-q2": _x4(1, 2, 128, 128, x0="true"),
 "x4-1x1-36": _x4(1, 8, 64, 36),
 "x4-3x3-q4": _x4(3, 4, 64, 128),
 "x4-3x3-q2": _x4(3, 2, 128, 64),
 "x4-1x1-q2": _x4(1, 2, 128, 128),
 "x4-1x1-q4": _x4(1, 4, 64, 64),
 "x4-1x1-q1": _x4(1, 1, 64, 64),
 "x4-3x3-q1": _x4(3, 1, 64, 64),
 # multi-pass pass-through (96 channels) onto other quadrants' processors
 "mp-pass": ("MAX78000", H + """  - name: l0
    processors: 0x0000ffffffffffff
    output_processors: 0x0000ffffffffffff
    operation: none
    max_pool: 2
    pool_stride: 2
    out_offset: 0x2000
""", (96, 6, 6), ()),
 # depthwise (MAX78002) with gapped processors
 "dw-gap": ("MAX78002", H + """  - name: l0
    processors: 0x0000000000001111
    output_processors: 0x0000000000001111
    operation: conv2d
    groups: 4
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    out_offset: 0x2000
""", (4, 6, 6), (W("l0", (4, 1, 3, 3)),)),
 "dw-pack": ("MAX78002", H + """  - name: l0
    processors: 0x0000000000001111
    output_processors: 0x000000000000000f
    operation: conv2d
    groups: 4
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    out_offset: 0x2000
""", (4, 6, 6), (W("l0", (4, 1, 3, 3)),)),
}

AGREE = "agree"  # vendor C PASS, ours register-exact with it and PASS
REFUSED = "refused"  # both tools refuse the configuration
# onnx2ai8x refuses what the vendor tool writes a project for that fails (FAIL) or that
# `verify` cannot judge (NOT MODELLED): (what the vendor's project gets, ours "refused")
WE_REFUSE = {"we refuse, vendor C fails": ("FAIL", "refused"),
             "we refuse, vendor C not modelled": ("NOT MODELLED", "refused")}

# What each probe gives. A verdict both projects get (register-exact) names its class:
EXPECTED: dict[str, tuple[str, str]] = {
    "passthrough-2": (AGREE, ""), "chw-pass": (AGREE, ""), "chw-pool": (AGREE, ""),
    "pt-unal-pack": (AGREE, ""),
    "pt-unal-4": (AGREE, ""), "pt-q1": (AGREE, ""), "pt-writegap": (AGREE, ""),
    "dw-gap": (AGREE, ""), "x4-3x3-q4": (AGREE, ""), "x4-3x3-q2": (AGREE, ""),
    "x4-3x3-q1": (AGREE, ""),
    "pass-writegap": (REFUSED, "pass-through output not packed per quadrant"),
    "mp-pass": (REFUSED, "pooling-only layer over more than 64 channels"),
    # VENDOR DEFECT: a convolution onto output processors with gaps: the vendor loads
    # the kernels packed (words 0..n-1) but its mask range spans the gaps (LCTRL2
    # output count = last - first output processor), so the gap slots take the next
    # channels' kernels; its own comment says uniform gaps need the time-slot offset,
    # which it does not program for a 3x3 convolution. onnx2ai8x refuses it
    # (map.output-gaps).
    "conv-gap-out": ("we refuse, vendor C fails", "convolution output processors with gaps"),
    "eltwise-gap": ("we refuse, vendor C fails", "convolution output processors with gaps"),
    # VENDOR DEFECT (model-based): a pass-through keeping its output at processors
    # 2-3: the write pointer names the word, the first turn writes lane 0.
    "pt-unal-same": ("FAIL", "vendor: pass-through output kept at an unaligned "
                     "processor"),
    # depthwise without broadcast on processors with gaps: the vendor's time slots and
    # bias layout disagree and no known answer shows which the hardware follows
    # (NOT MODELLED); onnx2ai8x refuses it (map.output-gaps).
    "dw-pack": ("we refuse, vendor C not modelled", "depthwise on processors with gaps"),
    # SIMULATOR GAP: 1x1 calcx4 (the vendor leaves those kernels unsplit: some
    # channels' kernels are not loaded).
    **{n: ("NOT MODELLED", "calcx4 on 1x1 kernels") for n in (
        "x4-1x1", "x4-1x1-72", "x4all-1x1", "x4all-1x1-36", "x4all-1x1-q2", "x4-1x1-36",
        "x4-1x1-q2", "x4-1x1-q4", "x4-1x1-q1")},
}


def probe(name: str) -> Config:
    device, sidecar, shape, weights = PROBES[name]
    return Config(7000 + sorted(PROBES).index(name), device, sidecar, shape, weights)

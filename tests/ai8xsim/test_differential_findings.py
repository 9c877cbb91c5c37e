"""Converter findings of the random differential (issue 26), pinned without the vendor
tool: configurations the converter used to refuse although the vendor's C PASSes, and
configurations whose project fails on the chip that the converter now refuses.

Each case is written as the vendor's sidecar plus a checkpoint (tests/ai8xsim/
random_nets.py `write`) and run as a user does: import-izer, then convert with the
sidecar (differential.py `our_project`).
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ai8xsim.verify import PASS, execute, render
from tests.ai8xsim.differential import our_project
from tests.ai8xsim.random_nets import Config, Weights, write

H = "arch: rnd\ndataset: random\nlayers:\n"


def _ours(config: Config, tmp: Path) -> tuple[Path | None, str]:
    return our_project(write(config, tmp / "in"), config.device, tmp / "ours",
                       config.options)


def _passes(config: Config, tmp: Path) -> None:
    project, why = _ours(config, tmp)
    assert project is not None, why
    outcome = execute(project)
    assert outcome.verdict == PASS and outcome.checked_words > 0, render(outcome)


def test_pooling_only_layer_on_1d_data_takes_the_sidecars_pool(tmp_path: Path) -> None:
    """`max_pool: 2` on a pass-through layer over a conv1d's output: the data is 1-D,
    so the pool is 2x1 (the vendor's tool reads only the first number there), and the
    sidecar agrees with the imported model's 2x1 pool (random 2 of MAX78000 was refused
    as a contradiction while the vendor's C PASSed)."""
    sidecar = H + """  - name: l0
    data_format: HWC
    processors: 0x00000000ffffffff
    operation: conv1d
    kernel_size: 3
    pad: 1
    activate: ReLU
    output_processors: 0x000000000000ffff
    out_offset: 0x4000
  - name: l1
    processors: 0x000000000000ffff
    operation: none
    max_pool: 2
    pool_stride: 2
    output_processors: 0x000000000000ffff
    out_offset: 0x1000
  - name: l2
    processors: 0x000000000000ffff
    operation: none
    avg_pool: [2, 2]
    pool_stride: [2, 2]
    output_processors: 0x000000000000ffff
    out_offset: 0x2000
"""
    _passes(Config(31, "MAX78000", sidecar, (32, 20), (Weights("l0", (16, 32, 3), True,
                                                                8, 0),)), tmp_path)


def _two_readers(data_format: str) -> str:
    """Layer 0 and layer 1 both read the network input (an element-wise block's two
    operands, as the generator draws them), then a pass-through adds them."""
    first = H + f"""  - name: l0
    data_format: {data_format}
    in_offset: 0x0000
    processors: 0x0000000000000001
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    output_processors: 0x000000000000000f
    out_offset: 0x4000
    write_gap: 1
"""
    return first + """  - name: l1
    processors: 0x0000000000000001
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    output_processors: 0x000000000000000f
    out_offset: 0x4004
    write_gap: 1
    in_offset: 0x0000
    in_sequences: input
  - name: l2
    processors: 0x000000000000000f
    in_offset: 0x4000
    in_sequences: [l0, l1]
    eltwise: add
    operation: none
    output_processors: 0x000000000000000f
    out_offset: 0x1000
"""


READERS = (Weights("l0", (4, 1, 3, 3), True, 8, 0), Weights("l1", (4, 1, 3, 3), True, 8, 0))


def _refused(config: Config, tmp: Path, code: str, *words: str) -> str:
    """The refusal's whole text (message and hint), after checking its exit status."""
    project, why = _ours(config, tmp)
    assert project is None, "converted"
    assert why.startswith(f"error[{code}] "), why
    # the convert step again, for all of its message (our_project keeps the first line)
    proc = subprocess.run(
        [sys.executable, "-m", "onnx2ai8x.cli", str(tmp / "model.onnx"), "--device",
         config.device, "--sidecar", str(tmp / "in" / "network.yaml"), "-o",
         str(tmp / "again"), "--quiet", *config.options],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "hint: " in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr
    return why


def test_a_later_reader_of_chw_input_is_refused(tmp_path: Path) -> None:
    """Only layer 0 reads CHW (the vendor tool sets the bit there only, and its C for
    this fails): layer 1 reading the input again is refused at its `in_sequences`
    line; the same network with HWC input converts and PASSes."""
    sidecar = _two_readers("CHW")
    why = _refused(Config(32, "MAX78000", sidecar, (1, 9, 8), READERS), tmp_path / "chw",
                   "map.chw", "layer `l1`", "`in_sequences`", "only the first layer")
    line = sidecar.splitlines().index("    in_sequences: input") + 1
    assert f"network.yaml:{line}: " in why
    _passes(Config(32, "MAX78000", _two_readers("HWC"), (1, 9, 8), READERS),
            tmp_path / "hwc")


def test_a_later_reader_of_fifo_input_is_refused(tmp_path: Path) -> None:
    """With --fifo the input feeds layer 0 only; a later reader is refused. The same
    network without --fifo converts and PASSes (the refusal is about the FIFO)."""
    sidecar = _two_readers("HWC")
    _refused(Config(33, "MAX78002", sidecar, (1, 9, 8), READERS, ("--fifo",)), tmp_path,
             "map.fifo-input", "layer `l1`", "through the FIFOs")
    _passes(Config(33, "MAX78002", sidecar, (1, 9, 8), READERS), tmp_path / "memory")


def _conv_to(output_processors: str, cout: int) -> Config:
    sidecar = H + f"""  - name: l0
    processors: 0x000000000000000f
    output_processors: {output_processors}
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    out_offset: 0x2000
"""
    return Config(34, "MAX78000", sidecar, (4, 8, 8), (Weights("l0", (cout, 4, 3, 3), True,
                                                                8, 0),))


def test_convolution_output_processors_with_gaps_are_refused(tmp_path: Path) -> None:
    """Gaps within a quadrant (0, 4, 8, 12) or across quadrants (0-3 and 16-19): the
    channels go to consecutive processors from the first (both tools' projects FAIL);
    refused with a packed map to use. Consecutive processors from an unaligned start
    still PASS."""
    _refused(_conv_to("0x0000000000001111", 4), tmp_path / "in-quadrant",
             "map.output-gaps", "layer `l0`", "0x0000000000001111 have gaps",
             "0x000000000000000f")
    _refused(_conv_to("0x00000000000f000f", 8), tmp_path / "across", "map.output-gaps",
             "use 8 consecutive output processors (e.g. 0x00000000000000ff)")
    _passes(_conv_to("0x000000000000000e", 3), tmp_path / "unaligned")


def test_depthwise_moving_its_data_over_processor_gaps_is_refused(tmp_path: Path) -> None:
    """Depthwise on processors 0, 4, 8, 12 writing to 0-3 (no broadcast): which bias
    byte each processor reads is shown by no known answer (the model says NOT
    MODELLED of the vendor's project): refused. With broadcast (output on its own
    processors) the same layer PASSes."""
    def dw(out: str) -> Config:
        return Config(35, "MAX78002", H + f"""  - name: l0
    processors: 0x0000000000001111
    output_processors: {out}
    operation: conv2d
    groups: 4
    kernel_size: 3x3
    pad: 1
    activate: ReLU
    out_offset: 0x2000
""", (4, 6, 6), (Weights("l0", (4, 1, 3, 3), True, 8, 0),))

    _refused(dw("0x000000000000000f"), tmp_path / "moving", "map.output-gaps",
             "depthwise", "quadrant 0")
    _passes(dw("0x0000000000001111"), tmp_path / "broadcast")


def _calcx4_first(outputs: int, bits: int, extra: str = "") -> Config:
    """A streaming calcx4 first layer on processor 0 alone (its kernels packed from the
    end of the extended kernel memory, words 4096-5119), then a plain 3x3 layer
    (`extra`: a third, calcx4 layer with `outputs` channels of `bits`-bit weights)."""
    sidecar = H + """  - name: l0
    processors: 0x0000000000000001
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    streaming: true
    calcx4: true
    activate: ReLU
    output_processors: 0xffffffffffffffff
    out_offset: 0x8000
  - name: l1
    processors: 0xffffffffffffffff
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    activate: None
    output_processors: 0x000000000000ffff
    out_offset: 0x0000
""" + extra
    weights = (Weights("l0", (64, 1, 3, 3), True, 8, 0),
               Weights("l1", (16, 64, 3, 3), True, 8, 0))
    if extra:
        weights += (Weights("l2", (outputs, 16, 3, 3), False, bits, 0),)
    return Config(36, "MAX78002", sidecar, (1, 12, 10), weights, ("--fifo",))


def test_calcx4_kernels_in_the_extended_memory_sit_at_the_mask_start(tmp_path: Path
                                                                     ) -> None:
    """Each quarter of a calcx4 layer's kernels in the extended memory starts at the
    word the mask start register names (4096 + (start - 4096) / 4, quarters 256 words
    apart), inside the 5120 words of processor 0. The converter used to copy the
    vendor's writer (start / 4 added past word 4096: words 5360.., past the memory's
    end; the vendor tool itself stops there with an IndexError): the project FAILed."""
    _passes(_calcx4_first(0, 8), tmp_path)
    text = (tmp_path / "ours" / "weights.h").read_text()
    # processor 0's kernel window is 0x51400000..: every run there ends by word 5120
    runs = [int(a, 16) for a in re.findall(r"(0x514[0-1][0-9a-f]{4}), \d+", text)]
    assert runs and max(runs) < 0x51400000 + 4 * 5120, [hex(r) for r in runs]


def test_calcx4_quarters_short_of_whole_columns_are_refused(tmp_path: Path) -> None:
    """Four output channels of 2-bit weights under calcx4: 2 bits a tap per kernel
    memory instance, so all four channels' kernels would share instance 0 (random 67
    of the MAX78002, layer 3): refused, naming the layer and what would fit; 16
    channels of 2-bit weights (8 bits per instance) convert and PASS."""
    def third(outputs: int) -> str:
        return f"""  - name: l2
    processors: 0x000000000000ffff
    operation: conv2d
    kernel_size: 3x3
    pad: 1
    calcx4: true
    activate: ReLU
    output_processors: 0x{(1 << outputs) - 1:016x}
    out_offset: 0x4000
"""
    _refused(_calcx4_first(4, 2, third(4)), tmp_path / "four", "map.kernel-memory",
             "l2: calcx4 with 2-bit weights, 4 output channels",
             "give it 16 output channels")
    _passes(_calcx4_first(16, 2, third(16)), tmp_path / "sixteen")

"""The generated C: deterministic, warning-free for the Arm target with the SDK's flags,
scratch offsets that never overlap a live tensor; and the cycle model's counts."""
from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest

from onnx2ai8x.cpu import cgen, cycles, host, reference
from onnx2ai8x.cpu import ops as K

from .cases import GENERATORS

# The SDK's compile flags for MAX78000/MAX78002 projects (msdk
# Libraries/CMSIS/Device/Maxim/GCC/gcc.mk: MCPU, MFLOAT_ABI, MFPU, the default
# optimization and warning flags), plus the issue's -Wextra -std=c99 -pedantic.
ARM_FLAGS = ["-mthumb", "-mcpu=cortex-m4", "-mfloat-abi=softfp", "-mfpu=fpv4-sp-d16",
             "-Os", "-ffunction-sections", "-fdata-sections", "-fsingle-precision-constant",
             "-Wall", "-Wno-format", "-Wdouble-promotion", "-Wstrict-prototypes",
             "-fno-isolate-erroneous-paths-dereference", "-Wextra", "-std=c99", "-pedantic",
             "-DTARGET=MAX78000", "-c"]


def _every_kind() -> list[K.Segment]:
    rng = np.random.default_rng(28)
    return [K.segment(f"s_{kind}", GENERATORS[kind](rng, kind)[0]) for kind in GENERATORS]


def test_render_is_deterministic():
    first = cgen.render(_every_kind())
    second = cgen.render(_every_kind())
    assert first == second
    assert set(first) == {"cpu_layers.c", "cpu_layers.h"}
    assert "malloc" not in first["cpu_layers.c"]


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                    reason="arm-none-eabi-gcc is not installed")
def test_arm_compile_has_no_warnings(tmp_path):
    for name, text in cgen.render(_every_kind()).items():
        (tmp_path / name).write_text(text)
    res = subprocess.run(["arm-none-eabi-gcc", *ARM_FLAGS, "cpu_layers.c", "-o", "cpu.o"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stderr == "", res.stderr  # zero warnings


def _skip_segment(rng) -> tuple[K.Segment, dict]:
    """A residual block: the stem's output stays alive across two layers."""
    x = rng.integers(-128, 128, (2, 4, 6, 6)).astype(np.int8)
    w = rng.integers(-128, 128, (4, 4, 3, 3))
    c1 = K.conv("c1", "x", "a", (4, 6, 6), w, None, *K.requant_params(1 / 2000),
                pads=(1, 1, 1, 1))
    c2 = K.conv("c2", "a", "b", (4, 6, 6), w, None, *K.requant_params(1 / 3000),
                pads=(1, 1, 1, 1))
    lut = K.lut("l", "b", "c", (4, 6, 6), K.lut_table(K.leaky_relu(0.1), 1, 1))
    add = K.add("sum", "a", "c", "d", (4, 6, 6), (1 << 30, 1 << 29), 31)
    pool = K.avgpool("gap", "d", "e", (4, 6, 6), (6, 6), *K.avgpool_requant(36))
    return K.segment("residual", [c1, c2, lut, add, pool]), {"x": x}


def test_scratch_never_overlaps_a_live_tensor():
    rng = np.random.default_rng(5)
    segs = [_skip_segment(rng)[0]] + [K.segment(f"c{i}", GENERATORS["chain"](rng, f"c{i}")[0])
                                      for i in range(5)]
    for seg in segs:
        offsets = cgen._plan_scratch(seg)
        size = {op.output: math.prod(op.out_shape) * (4 if op.kind == K.ARGMAX else 1)
                for op in seg.ops}
        last = {t: i for i, op in enumerate(seg.ops) for t in op.inputs}
        born = {op.output: i for i, op in enumerate(seg.ops)}
        inner = list(offsets)
        for a in inner:
            assert offsets[a] % cgen.ALIGN == 0
            for b in inner:
                if a >= b:
                    continue
                alive_together = born[a] <= last.get(b, born[b]) and \
                    born[b] <= last.get(a, born[a])
                apart = offsets[a] + size[a] <= offsets[b] or offsets[b] + size[b] <= offsets[a]
                assert apart or not alive_together, (seg.name, a, b)
        assert cgen.scratch_bytes([seg]) >= max((offsets[t] + size[t] for t in inner),
                                                default=0)


def test_residual_segment_runs_bit_exact():
    seg, feeds = _skip_segment(np.random.default_rng(7))
    got = host.run_segments([(seg, feeds)])[0]["e"]
    want = np.stack([reference.run_segment(seg.ops, {"x": s})["e"] for s in feeds["x"]])
    assert np.array_equal(got, want)


def test_cycle_model_counts():
    w = np.ones((16, 8, 3, 3), dtype=np.int8)
    conv = K.conv("c", "x", "y", (8, 10, 10), w, None, 1, 0, pads=(1, 1, 1, 1))
    macs, est = cycles.estimate(conv)
    assert macs == 16 * 10 * 10 * 8 * 9  # every output, every tap
    rows = 1600 * 8 * 3  # outputs x input channels x kernel rows
    assert est == macs * cycles.CONV_CYCLES_PER_MAC + rows * cycles.CONV_CYCLES_PER_ROW + \
        1600 * (cycles.REQUANT_CYCLES + cycles.WINDOW_CYCLES_PER_OUTPUT) + cycles.CALL_CYCLES
    dw = K.conv("d", "x", "y", (8, 10, 10), np.ones((8, 1, 5, 5)), None, 1, 0, group=8)
    assert cycles.estimate(dw)[0] == 8 * 6 * 6 * 25
    dense = K.dense("f", "x", "y", (16, 32, 32), np.ones((10, 16384)), None, 1, 0)
    assert cycles.estimate(dense)[0] == 163840
    for kind in GENERATORS:
        for op in GENERATORS[kind](np.random.default_rng(1), kind)[0]:
            m, c = cycles.estimate(op)
            assert c > 0 and m >= 0
            assert (m > 0) == (op.kind in (K.CONV, K.DENSE))


def test_c_runs_clean_under_the_sanitizers():
    """Every kind (random parameters and the extreme samples) under UBSan and ASan: no
    signed overflow, no access outside a buffer, no misaligned pointer."""
    probe = subprocess.run(["gcc", "-fsanitize=undefined,address", "-x", "c", "-", "-o",
                            "/dev/null"], input="int main(void){return 0;}",
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("the host gcc has no sanitizer runtime")
    rng = np.random.default_rng(99)
    cases = []
    for kind in sorted(GENERATORS):
        for i in range(3):
            ops, feeds = GENERATORS[kind](rng, f"{kind}{i}")
            cases.append((K.segment(f"{kind}_{i}", ops), feeds))
    got = host.run_segments(cases, sanitize=True)
    for (seg, feeds), out in zip(cases, got, strict=True):
        first = {t: v[0] for t, v in feeds.items()}
        want = reference.run_segment(seg.ops, first)
        for t in seg.outputs:
            assert np.array_equal(out[t][0], want[t]), seg.name


def test_the_fit_check_counts_the_arm_layers_constants():
    """The project's flash estimate (emit/footprint.py) reads cpu_layers.c as written:
    its constant arrays and window records as weights, its scratch arena as SRAM."""
    from onnx2ai8x.devices import MAX78000
    from onnx2ai8x.emit.footprint import estimate

    w = np.ones((16, 3, 5, 5), dtype=np.int8)
    conv = K.conv("c", "x", "y", (3, 8, 8), w, None, [1] * 16, [0] * 16)
    dense = K.dense("d", "y", "z", conv.out_shape, np.ones((10, 16 * 4 * 4)), None, 1, 0)
    soft = K.softmax("s", "z", "p", (10,), 0.1)
    files = {k: v.encode() for k, v in cgen.render([K.segment("f", [conv, dense, soft])])
             .items()}
    fp = estimate(files, MAX78000)
    # weights + int32 bias + int32 multipliers + shifts + window geometry (15 fields),
    # per layer, and the softmax table
    want = (16 * 75 + 16 * 4 + 16 * 4 + 16 + 60) + (10 * 256 + 10 * 4 + 4 + 1) + 256 * 4
    assert fp.weights == want
    assert (fp.known_answer, fp.other_flash) == (0, 0)
    # y (256 bytes) and z (10, rounded up to 12) coexist in the scratch arena
    assert fp.sram == MAX78000.firmware_sram_bytes + 16 * 4 * 4 + 12

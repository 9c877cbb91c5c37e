"""Cortex-M4 cycle estimate of each CPU op: `estimate(op) -> (macs, cycles)`.

The model: cycles = work items x cycles per item + outputs x cycles per output, with the
per-item costs counted from the inner loops arm-none-eabi-gcc makes of the generated
kernels (cpu_layers.c at the SDK's -Os, -mcpu=cortex-m4) using the instruction timings
of the Arm Cortex-M4 Technical Reference Manual (ARM DDI 0439B, section 3.3 "Instruction
set summary"): LDR/LDRSB 2 cycles (1 when pipelined behind another load), STR 1, ALU
and MUL/MLA/SMLABB/SMULL 1, a taken branch 1 + P with P = 2 (the manual gives 1..3).
Zero wait states are assumed (code runs from the instruction cache); interrupts and
the accelerator's own time are not included.

Per item (counted from the -Os disassembly):
- convolution: 9 cycles per MAC in `cpu_layers_window`'s inner loop (LDRSB + pipelined
  LDRSB 3, CMP 1, SMLABB 1, ADD 1, taken BNE 3), plus 18 per kernel row (row pointers:
  LDRD x2, MUL/MLA x4, ADDs, the loop test) and 60 per output (the call with its
  register save/restore, and the window clipping `cpu_taps`), besides the
  requantization below.
- fully connected: 8 cycles per MAC (LDRSB + pipelined LDRSB 3, CMP 1, MLA 1, BNE 3).
- pooling: 12 cycles per window tap; lookup tables 11 per value; element-wise add/mul
  14 per value plus the requantization; copies (concat, reshape) 7 per byte, transpose
  12 per value; ArgMax 9 per value.
- requantization (`cpu_requant`): 25 cycles per output (call, 64-bit product, rounding,
  floor shift and clamp).
- softmax: 3 passes of ~9 cycles plus one 32-bit UDIV (2 to 12 cycles: 12 assumed) per
  value.

These are estimates for planning (the report's CPU share); they are not measured on a
board. MACs count every tap of every window, padded ones included (the usual convention).
"""
from __future__ import annotations

import math

from . import ops as K
from .ops import CpuOp

CONV_CYCLES_PER_MAC = 9
CONV_CYCLES_PER_ROW = 18
WINDOW_CYCLES_PER_OUTPUT = 60
DENSE_CYCLES_PER_MAC = 8
POOL_CYCLES_PER_TAP = 12
LUT_CYCLES_PER_VALUE = 11
ELTWISE_CYCLES_PER_VALUE = 14
COPY_CYCLES_PER_BYTE = 7
TRANSPOSE_CYCLES_PER_VALUE = 12
ARGMAX_CYCLES_PER_VALUE = 9
REQUANT_CYCLES = 25
SOFTMAX_CYCLES_PER_VALUE = 3 * 9 + 12
CALL_CYCLES = 20  # entering a kernel: argument set-up, prologue, epilogue

MODEL = ("Cortex-M4 estimate: conv 9 cycles/MAC + 18 per kernel row, dense 8 cycles/MAC, "
         "25 cycles per requantized output (instruction timings of the Arm Cortex-M4 TRM, "
         "ARM DDI 0439B section 3.3, applied to the -Os inner loops of the generated C)")


def macs(op: CpuOp) -> int:
    """Multiply-accumulates of a conv or dense op (0 for every other kind)."""
    if op.kind == K.CONV:
        return math.prod(op.out_shape) * (op.in_shapes[0][0] // op.group) * \
            math.prod(op.kernel)
    if op.kind == K.DENSE:
        return int(op.weights.size)
    return 0


def estimate(op: CpuOp) -> tuple[int, int]:
    """(MACs, estimated Cortex-M4 cycles) of one op; see the module docstring."""
    n_out = math.prod(op.out_shape)
    n_in = sum(math.prod(s) for s in op.in_shapes)
    kind = op.kind
    m = macs(op)
    if kind == K.CONV:
        rows = n_out * (op.in_shapes[0][0] // op.group) * (op.kernel[0] if
                                                            len(op.kernel) == 2 else 1)
        cycles = m * CONV_CYCLES_PER_MAC + rows * CONV_CYCLES_PER_ROW + \
            n_out * (REQUANT_CYCLES + WINDOW_CYCLES_PER_OUTPUT)
    elif kind == K.DENSE:
        cycles = m * DENSE_CYCLES_PER_MAC + n_out * REQUANT_CYCLES
    elif kind == K.MAXPOOL:
        cycles = n_out * math.prod(op.kernel) * POOL_CYCLES_PER_TAP
    elif kind == K.AVGPOOL:
        cycles = n_out * (math.prod(op.kernel) * POOL_CYCLES_PER_TAP + REQUANT_CYCLES)
    elif kind in (K.ADD, K.MUL):
        cycles = n_out * (ELTWISE_CYCLES_PER_VALUE + REQUANT_CYCLES)
    elif kind == K.LUT:
        cycles = n_out * LUT_CYCLES_PER_VALUE
    elif kind == K.SOFTMAX:
        cycles = n_out * SOFTMAX_CYCLES_PER_VALUE
    elif kind == K.ARGMAX:
        cycles = n_in * ARGMAX_CYCLES_PER_VALUE
    elif kind == K.TRANSPOSE:
        cycles = n_out * TRANSPOSE_CYCLES_PER_VALUE
    else:  # concat, reshape: byte copies
        cycles = n_out * COPY_CYCLES_PER_BYTE
    return m, cycles + CALL_CYCLES

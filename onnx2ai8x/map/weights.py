"""Kernel and bias memory of a placement, allocated once.

The mapper (automatic, or a resolved sidecar) decides processors and data offsets; the
kernel and bias allocators (map/kernels.py, map/bias.py, the vendor's exact layouts)
then fix where every weight and bias byte lives. The memory check allocates it once
(map/memory_check.checked) and the lowered network it hands on (map/lowered.HwNetwork)
carries it, so the cycle estimate, the report and the C project all read the same
allocation instead of each recomputing it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Ai8xError, Diagnostic
from ..placement import Placement
from .bias import BiasAllocation, allocate_bias
from .kernels import KernelAllocation, allocate_kernels


@dataclass(frozen=True, eq=False)
class WeightMemory:
    """The kernel and bias allocation of one placement."""

    kernels: KernelAllocation
    bias: BiasAllocation


def allocate_weights(placement: Placement) -> WeightMemory:
    """The placement's kernel and bias allocation (an Ai8xError naming the layer when
    its kernels or bias do not fit)."""
    return WeightMemory(kernels=allocate_kernels(placement), bias=allocate_bias(placement))


def try_allocate(placement: Placement) -> tuple[WeightMemory | None, list[Diagnostic]]:
    """`allocate_weights`, with a failure returned as diagnostics (kernel and bias
    memory separately) and no allocation."""
    out: list[Diagnostic] = []
    kernels = bias = None
    try:
        kernels = allocate_kernels(placement)
    except Ai8xError as err:
        out += [Diagnostic("map.kernel-memory", d.where, d.message, d.hint)
                for d in err.diagnostics]
    try:
        bias = allocate_bias(placement)
    except Ai8xError as err:
        out += [Diagnostic("map.bias-memory", d.where, d.message, d.hint)
                for d in err.diagnostics]
    if kernels is None or bias is None:
        return None, out
    return WeightMemory(kernels, bias), []

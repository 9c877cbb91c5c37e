"""Kernel and bias memory of a placement, allocated once and carried by the Placement.

The mapper (automatic, or a resolved sidecar) decides processors and data offsets; the
kernel and bias allocators (map/kernels.py, map/bias.py, the vendor's exact layouts)
then fix where every weight and bias byte lives. Their result travels with the
Placement, so the memory check, the cycle estimate, the report and the C project all
read the same allocation instead of each recomputing it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import Ai8xError, Diagnostic
from ..network import Network
from ..placement import Placement
from .bias import BiasAllocation, allocate_bias
from .kernels import KernelAllocation, allocate_kernels


@dataclass(frozen=True, eq=False)
class WeightMemory:
    """The kernel and bias allocation of one network on one set of layer placements."""

    network: Network
    layers: tuple  # the LayerPlacements it was computed for (identity: see `of`)
    kernels: KernelAllocation
    bias: BiasAllocation


def allocate_weights(network: Network, placement: Placement) -> Placement:
    """The placement with its kernel and bias allocation attached (an Ai8xError naming
    the layer when its kernels or bias do not fit)."""
    memory = WeightMemory(network=network, layers=placement.layers,
                          kernels=allocate_kernels(network, placement),
                          bias=allocate_bias(network, placement))
    return replace(placement, weights=memory)


def attached(network: Network, placement: Placement) -> WeightMemory | None:
    """The allocation the placement carries, if it was made for this network and these
    layer placements (a placement edited with dataclasses.replace carries none)."""
    memory = placement.weights
    if isinstance(memory, WeightMemory) and memory.network is network \
            and memory.layers is placement.layers:
        return memory
    return None


def weights_of(network: Network, placement: Placement) -> WeightMemory:
    """The placement's allocation; allocated here for a placement that carries none
    (one built by hand, e.g. in tests)."""
    memory = attached(network, placement)
    if memory is None:
        memory = allocate_weights(network, placement).weights
    return memory


def try_allocate(network: Network, placement: Placement
                 ) -> tuple[Placement, list[Diagnostic]]:
    """`allocate_weights`, with a failure returned as diagnostics (kernel and bias
    memory separately) and the placement unchanged."""
    if attached(network, placement) is not None:
        return placement, []
    out: list[Diagnostic] = []
    kernels = bias = None
    try:
        kernels = allocate_kernels(network, placement)
    except Ai8xError as err:
        out += [Diagnostic("map.kernel-memory", d.where, d.message, d.hint)
                for d in err.diagnostics]
    try:
        bias = allocate_bias(network, placement)
    except Ai8xError as err:
        out += [Diagnostic("map.bias-memory", d.where, d.message, d.hint)
                for d in err.diagnostics]
    if kernels is None or bias is None:
        return placement, out
    return replace(placement, weights=WeightMemory(network, placement.layers, kernels, bias)), []

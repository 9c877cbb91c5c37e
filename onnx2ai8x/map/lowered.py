"""The lowered network: the one value the map stage hands to emit, report and latency.

`HwNetwork` carries the placed network, the hardware choices (options.decide_hardware),
the hardware view derived from both (map/hw.derive, computed here once) and the kernel
and bias memory allocated for the placement (map/weights.py). It is immutable: a stage
that wants another placement or other choices lowers again. Emit, the report, the cycle
estimate and the phase timing take this value and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..devices import Device
from ..network import Network
from ..options import HwChoices, default_choices
from ..placement import Placement
from .hw import HwView, derive
from .weights import Mapped, WeightMemory, allocate_weights


@dataclass(frozen=True, eq=False)
class HwNetwork:
    """A network lowered onto the hardware (see module docstring)."""

    view: HwView  # the hardware view; carries the placement, network and choices
    weights: WeightMemory  # kernel and bias memory of `view.placement`

    @property
    def placement(self) -> Placement:
        return self.view.placement

    @property
    def network(self) -> Network:
        return self.view.network

    @property
    def device(self) -> Device:
        return self.view.dev

    @property
    def choices(self) -> HwChoices:
        return self.view.choices


def lower(mapped: Mapped | Placement, choices: HwChoices | None = None) -> HwNetwork:
    """The lowered network of a mapping under the hardware choices (default: the
    default options' choices on the placement's device, with FIFO input when the first
    layer streams). A bare Placement (one built by hand, e.g. in tests) has its kernel
    and bias memory allocated here."""
    if isinstance(mapped, Placement):
        mapped = Mapped(mapped, allocate_weights(mapped))
    placement = mapped.placement
    if choices is None:
        first = placement.layers[0] if placement.layers else None
        choices = default_choices(placement.device,
                                  fifo=bool(first is not None and first.streaming))
    return HwNetwork(view=derive(placement, choices), weights=mapped.weights)

"""The lowered network: the one value the map stage hands to emit, report and latency.

Every placement the mapper examines is derived once into an `HwPlacement`: the hardware
view (map/hw.derive) under the conversion's hardware choices (options.decide_conversion)
and, computed once from it, each streaming layer's rollover; the memory checks
(map/memory_check.py) read that value. The placement the mapping settles on becomes
the `HwNetwork`: the same value with the kernel and bias memory allocated for it
(map/weights.py), so lowering derives nothing again. Both are immutable: a stage that
wants another placement or other choices lowers again (`lower`). Emit, the report, the
cycle estimate and the phase timing take the HwNetwork and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..devices import Device
from ..network import Network
from ..options import HwChoices, HwDecision, default_decision
from ..placement import Placement
from .hw import HwView, derive
from .streaming import rollovers
from .weights import WeightMemory, allocate_weights


@dataclass(frozen=True, eq=False)
class HwPlacement:
    """A placement as the hardware runs it (see module docstring)."""

    view: HwView  # the hardware view; carries the placement, network and choices
    # per layer the words of a streaming layer's circular input buffer (streaming.rollovers)
    rollover: tuple[int | None, ...]

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


@dataclass(frozen=True, eq=False)
class HwNetwork(HwPlacement):
    """A network lowered onto the hardware: the placement the mapping settled on, with
    its kernel and bias memory (see module docstring)."""

    weights: WeightMemory  # kernel and bias memory of `view.placement`

    @classmethod
    def of(cls, hp: HwPlacement, weights: WeightMemory) -> HwNetwork:
        """`hp` with the kernel and bias memory allocated for its placement."""
        return cls(view=hp.view, rollover=hp.rollover, weights=weights)


def examine(placement: Placement, choices: HwChoices | HwDecision) -> HwPlacement:
    """The placement's hardware view, derived (the one derivation of this placement),
    under `choices` or, given the conversion's decision, under the choices of a
    placement whose first layer streams or not."""
    if isinstance(choices, HwDecision):
        choices = choices.of(bool(placement.layers) and placement.layers[0].streaming)
    view = derive(placement, choices)
    return HwPlacement(view=view, rollover=rollovers(view))


def lower(placement: Placement, choices: HwChoices | HwDecision | None = None) -> HwNetwork:
    """A placement the mapper did not examine (one built by hand, e.g. in tests, or the
    quad fan-out of --fast-fifo-quad) lowered under `choices` (default: the default
    options' choices on the placement's device, with FIFO input when the first layer
    streams), its kernel and bias memory allocated here."""
    hp = examine(placement, choices or default_decision(placement.device))
    return HwNetwork.of(hp, allocate_weights(placement))

"""One named rule per hardware limit, a module per concern.

kernel (operator, kernel, padding, stride, dilation, groups, output padding), pooling,
shape (channels, dimensions, shape arithmetic, flattening), eltwise, connectivity,
numerics (activation, pass-through, output width/shift, weights, bias) and memory (the
network-wide rules: layer count, 1-bit flavour, weight, bias and data memory). `RULES`
lists them in that order, which is the order of the diagnostics.

Each rule is `(layer, network, device) -> Diagnostic | iterable of Diagnostic | None`.
Layer rules get every layer whose operator they declare (`applies_to`) in turn; network
rules (scope "network") get `layer=None` and look at the whole network. A rule's
docstring is the user-facing reason; its first line is what the README table shows. The
quoted seed sentences are from the vendor guide, sections "Limitations of MAX78000
Networks" and "Limitations of MAX78002 Networks" (seed 000), unless another section is
named.

`index` below is the layer's position in `network.layers` (execution order).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

from ...devices import Device
from ...errors import Diagnostic
from ...network import Network
from . import connectivity, eltwise, kernel, memory, numerics, pooling, shape
from .base import Result, Rule, RuleFn, as_list

__all__ = ["RULES", "Result", "Rule", "RuleFn", "check"]

RULES: tuple[Rule, ...] = (kernel.RULES + pooling.RULES + shape.RULES + eltwise.RULES
                           + connectivity.RULES + numerics.RULES + memory.RULES)


def check(network: Network, device: Device,
          rules: Iterable[Rule] = RULES) -> Iterator[Diagnostic]:
    """Every diagnostic of every rule, layer rules in layer order first."""
    rules = tuple(rules)
    for layer in network.layers:
        for rule in rules:
            if rule.scope == "layer" and rule.applies(layer):
                yield from as_list(rule.fn(layer, network, device))
    for rule in rules:
        if rule.scope == "network":
            yield from as_list(rule.fn(None, network, device))

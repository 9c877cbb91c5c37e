"""Legalize: check a Network against a device's limits, one named rule per limit.

`legalize(network, device)` returns the network ready for mapping (with the device
recorded) or raises `Ai8xError.many(...)` listing every violation, each naming the layer
(the ONNX node), the limit and a fix. The rules and their seed sentences are tabled in
`rules.RULES` and README.md next to this file.
"""
from __future__ import annotations

from dataclasses import replace

from ..devices import Device
from ..errors import Ai8xError, Diagnostic
from ..network import Network
from .rules import RULES, Rule, check

__all__ = ["RULES", "Rule", "check", "diagnose", "legalize"]


def diagnose(network: Network, device: Device) -> list[Diagnostic]:
    """Every limit the network violates on `device` (empty: it is legal)."""
    return list(check(network, device))


def legalize(network: Network, device: Device) -> Network:
    """The network, checked against `device`; raises Ai8xError listing every violation."""
    problems = diagnose(network, device)
    if problems:
        raise Ai8xError.many(problems)
    if network.device != device.name:
        network = replace(network, device=device.name)
    return network

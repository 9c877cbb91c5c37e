"""The rule type and the helpers every rule module shares."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ...devices import Device
from ...errors import Diagnostic
from ...network import Layer, Network, Op

Result = Diagnostic | Iterable[Diagnostic] | None
RuleFn = Callable[[Layer | None, Network, Device], Result]


@dataclass(frozen=True)
class Rule:
    """A named check; `scope` is "layer" (called per layer) or "network" (once).

    `applies_to` is the set of operators a layer rule checks; None: every layer, also
    one whose operator code is no operator (such a layer gets only these rules).
    """

    name: str
    fn: RuleFn
    scope: str = "layer"
    applies_to: frozenset[Op] | None = None

    def applies(self, layer: Layer) -> bool:
        return self.applies_to is None or layer.operator in self.applies_to

    @property
    def reason(self) -> str:
        return (self.fn.__doc__ or "").strip().splitlines()[0]

    @property
    def code(self) -> str:
        return f"limit.{self.name}"


def only(*ops: Op) -> frozenset[Op]:
    return frozenset(ops)


def diag(rule: str, where: str, message: str, hint: str) -> Diagnostic:
    return Diagnostic(f"limit.{rule}", where, message, hint)


def layer_index(layer: Layer, network: Network) -> int:
    for i, lay in enumerate(network.layers):
        if lay is layer:
            return i
    return next(i for i, lay in enumerate(network.layers) if lay.name == layer.name)


def op_word(layer: Layer) -> str:
    return layer.operator.word if isinstance(layer.operator, Op) else str(layer.operator)


def dims(pair: tuple[int, int], one_d: bool) -> str:
    return f"{pair[0]}" if one_d else f"{pair[0]}x{pair[1]}"


def as_list(result: Result) -> list[Diagnostic]:
    if result is None:
        return []
    if isinstance(result, Diagnostic):
        return [result]
    return list(result)

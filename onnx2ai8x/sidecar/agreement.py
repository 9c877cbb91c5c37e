"""Where a full sidecar contradicts the model it places (warnings, not errors).

With `--sidecar`, the sidecar fixes where each layer runs, and the ONNX model says what
it computes: `resolve_placement` places the model's layers, so a computation key of the
sidecar that disagrees with the model is not used. The vendor's tool has no model and
computes what the sidecar says, so such a disagreement means the project's known answer
is not the one the vendor's tool writes for the same sidecar. The vendor's own
ai85-autoencoder.yaml has one: `activate: ReLU` on a layer whose model layer is a plain
Linear. Each contradiction is one warning naming the layer, both values, and that the
model is followed.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import MAX_MESSAGE, MAX_WHERE, clip
from ..network import ACTIVATION_NAMES, OPERATOR_NAMES, Network
from .model import Sidecar


@dataclass(frozen=True)
class SidecarWarning:
    """One contradiction between the sidecar and the model (bounded in length)."""

    code: str
    where: str
    message: str
    hint: str

    def render(self) -> str:
        return (f"warning[{self.code}] {clip(self.where, MAX_WHERE)}: "
                f"{clip(self.message, MAX_MESSAGE)}\n  hint: {clip(self.hint, MAX_MESSAGE)}")


def _activation_text(activation: int | None) -> str:
    name = ACTIVATION_NAMES.get(activation)
    return "no activation" if name is None else name


def model_contradictions(sidecar: Sidecar, network: Network) -> tuple[SidecarWarning, ...]:
    """Layers whose sidecar entry states another activation than the model's layer.

    The sidecar's entries are the model's hardware layers in order (resolve_placement
    requires one per layer). An entry without `activate` states no activation, as the
    vendor's tool reads it.
    """
    found = []
    for index, (entry, layer) in enumerate(zip(sidecar.layers, network.layers,
                                               strict=False)):
        if entry.activation == layer.activation:
            continue
        said = (f"`activate: {ACTIVATION_NAMES[entry.activation]}`"
                if entry.activation is not None else "no activation")
        found.append(SidecarWarning(
            "sidecar.contradicts-model", sidecar.where(index, "activate"),
            f"the sidecar gives layer {index} {said}, but the model's layer "
            f"`{layer.name}` ({OPERATOR_NAMES.get(layer.operator, '?')}) applies "
            f"{_activation_text(layer.activation)}; onnx2ai8x follows the model (the "
            f"vendor's tool, which reads only the sidecar, would apply "
            f"{_activation_text(entry.activation)})",
            "make them agree: change `activate` in the sidecar (or the model's "
            "activation) so both describe the network you trained"))
    return tuple(found)

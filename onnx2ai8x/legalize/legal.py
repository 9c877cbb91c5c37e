"""The rewrites (legalize/rewrite.py), then the device's limits: the order every path
takes (the one front end, onnx2ai8x.frontend, and the quantizer's own check)."""
from __future__ import annotations

import dataclasses

from ..devices import Device
from ..errors import Ai8xError
from ..network import Network
from . import legalize
from .rewrite import inserted_layers, rewrite


def legal_network(network: Network, device: Device,
                  names: dict[str, tuple[str, ...]] | None = None
                  ) -> tuple[Network, tuple[str, ...]]:
    """The rewrites (legalize/rewrite.py), then the device's limits, in this order on
    every path; the inserted layers' notes. `names`: layer name -> the source model's
    nodes it was made from, named in the diagnostics (a quantized float model)."""
    rewritten = rewrite(network, device)
    notes = inserted_layers(network, rewritten)
    try:
        return legalize(rewritten, device), notes
    except Ai8xError as exc:
        if not names:
            raise
        named = Ai8xError.many([dataclasses.replace(d, where=_named(d.where, names))
                                for d in exc.diagnostics])
        named.exit_code = exc.exit_code
        raise named from None


def _named(where: str, names: dict[str, tuple[str, ...]]) -> str:
    nodes = names.get(where)
    return f"{where} (node {', '.join(nodes)})" if nodes else where


__all__ = ["legal_network"]

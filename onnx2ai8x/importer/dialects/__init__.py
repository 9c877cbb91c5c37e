"""Exporter dialects: each source's idioms rewritten into the one form the float walker reads.

Real tools write the same network in different words: the vendor training repository's
export writes a clamp as two `Clip` nodes and its `-8` mode adds `Floor`/`Round`/`Div`;
tf2onnx writes channels-last graphs with `Transpose`/`Reshape` around them; onnxruntime's
quantizer and Brevitas write `QuantizeLinear`/`DequantizeLinear` pairs, Brevitas' QONNX
form writes `Quant` nodes. The walker in `float_onnx` should not learn every dialect
(issue 24, "How to shape it"). Instead each source has one module here with one function

    recognize(model: onnx.ModelProto) -> Recognition | None

that returns None when the model is not in its dialect, and otherwise a new model in the
canonical form together with what it rewrote. Every rewrite must be exact (the rewritten
model computes the same values as the source on every input the source accepts) or the
recognizer must refuse with an `Ai8xError` that names the node, the exporter's form and
what to export instead. Recognizers never edit the model they are given.

The canonical form is what `float_onnx._Walker` reads: standard float ONNX, channels-
first, one `Clip` per clamp, no integer-rounding nodes on activations.

`canonicalize` runs the recognizers in `_recognizers()` order on the simplified model
(batch 1, shapes inferred, constant subgraphs folded by onnxsim where the model needed
it); each sees the previous one's result, so a dialect may build on another's canonical
form. Adding an exporter is adding one module and one line to `_recognizers()`.
"""
from __future__ import annotations

from collections.abc import Callable

from .base import Canonical, Recognition

Recognizer = Callable[[object], "Recognition | None"]


def _recognizers(options: dict) -> tuple[Recognizer, ...]:
    """The recognizers in the order they run (imported here, not at module level, so a
    model in no dialect pays for none of them). `options` are the user's choices for
    facts a dialect's file does not carry (DialectOptions)."""
    from functools import partial

    from . import axes, movement, qdq, qonnx, tf2onnx, vendor_export

    # QONNX before QDQ (it writes Brevitas' QCDQ form, which the QDQ dialect reads); the
    # quantized dialects before tf2onnx's channels-last rules, which read float graphs;
    # data movement and relabels last, on whatever form the exporters' rules left (any
    # exporter's)
    return (partial(vendor_export.recognize, shift_quantile=options.get("shift_quantile")),
            qonnx.recognize, qdq.recognize, tf2onnx.recognize, movement.recognize,
            axes.recognize)


def handled_ops() -> frozenset[str]:
    """Op types the recognizers rewrite away (the front end need not simplify a graph
    for them; onnxsim would fold a quantized weight into float and lose its grid)."""
    from . import qdq, qonnx

    return qdq.OPS | qonnx.OPS


def folds_itself(model) -> bool:
    """Whether a recognizer takes `model` before any constant folding: its dialect's
    constant arithmetic carries information folding would lose (the vendor export's
    QAT weight quantization) and the recognizer evaluates it itself, so the reader
    skips onnxsim (which also costs seconds to import)."""
    from . import vendor_export

    return vendor_export.claims(model)


def canonicalize(model, options: dict | None = None) -> Canonical:
    """Run every recognizer on `model` (an onnx.ModelProto, not modified); `options`:
    e.g. {"shift_quantile": 0.995} (the vendor QAT policy's, which its export loses)."""
    recognitions: list[Recognition] = []
    for recognize in _recognizers(options or {}):
        found = recognize(model)
        if found is not None:
            recognitions.append(found)
            model = found.model
    return Canonical(model=model, recognitions=tuple(recognitions))


def explained(exc, canonical: Canonical):
    """`exc` (an Ai8xError from the walk) saying which exporter's form the model is in,
    when a recognizer named it (fact "exporter"): the user then knows whose idiom the
    node is and where to change it (issue 24: "say which form")."""
    from dataclasses import replace

    from ...errors import Ai8xError

    source = canonical.fact("exporter")
    if not source:
        return exc
    diags = tuple(replace(d, message=f"{d.message} (in {source})")
                  for d in exc.diagnostics)
    return Ai8xError.many(list(diags)) if len(diags) > 1 else Ai8xError(
        diags[0].code, diags[0].where, diags[0].message, diags[0].hint,
        exit_code=exc.exit_code)


__all__ = ["Canonical", "Recognition", "canonicalize", "explained", "folds_itself"]

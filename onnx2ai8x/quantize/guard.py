"""The silent-loss guard: a quantized model that no longer computes what its source did
is refused, not converted (issue 24, "never silently wrong").

The quantizer's report already compares every layer of the quantized model (the
bit-exact reference) with the source model on onnxruntime, on the calibration samples:
per-layer SQNR, and at the first output top-1 agreement and SQNR (`ptq._summary`). This
pass reads those figures: below the limits the conversion stops with the per-layer
table and the first layer where the SQNR collapses, unless the user accepts the loss
(then it is a warning). Without samples there is nothing to compare and no verdict.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import EXIT_INVALID, Ai8xError, Diagnostic


@dataclass(frozen=True)
class LossLimits:
    """Below either figure, the quantized model is taken for a wrong one."""

    # Top-1 agreement of the quantized and the source model's first output (classifiers:
    # outputs of more than one value), on the samples whose top-1 the source model
    # decides by more than twice the output's RMS quantization error. 90 %: a
    # well-quantized 8-bit classifier agrees on nearly every such sample; one that
    # disagrees on one in ten has lost what it learnt.
    min_agreement: float = 0.90
    # Signal-to-quantization-noise ratio of the first output, dB. 10 dB: the error is a
    # third of the signal's amplitude; a working 8-bit model is usually 20 dB or more.
    min_sqnr_db: float = 10.0


DEFAULT_LIMITS = LossLimits()
HELP = (f"Convert even when the quantized model departs from the source model on the "
        f"calibration samples: top-1 agreement below {100 * DEFAULT_LIMITS.min_agreement:.0f}"
        f" % (on the samples the source decides beyond the output's quantization noise) or "
        f"output SQNR below {DEFAULT_LIMITS.min_sqnr_db:.0f} dB. Without it such a "
        f"conversion fails (exit 1) with the per-layer table; with it, a warning.")


class QuantizationLoss(Ai8xError):
    """The guard's error: it prints the per-layer table before the diagnostic (the table
    is too long for a diagnostic's message)."""

    def __init__(self, diagnostic: Diagnostic, table: str) -> None:
        self.table = table
        super().__init__(diagnostic.code, diagnostic.where, diagnostic.message,
                         diagnostic.hint, exit_code=EXIT_INVALID)

    def render(self, front: str = "cli") -> str:
        return f"{self.table}\n{super().render(front)}"


def _fmt(db: float) -> str:
    return "inf" if math.isinf(db) and db > 0 else f"{db:.1f}"


def failures(summary: dict, limits: LossLimits = DEFAULT_LIMITS) -> list[str]:
    """Each limit the quantized model misses, in words (empty: it passes or there were
    no samples to compare on)."""
    out = []
    # Over the samples the source model decides beyond the output's quantization noise
    # (ptq._decided_agreement): a near-tie may flip under any 8-bit quantization.
    agree = summary.get("top1_agreement_decided")
    if agree is not None and agree < limits.min_agreement:
        out.append(f"top-1 agreement with the source model {100 * agree:.1f} % on the "
                   f"{summary.get('decided_samples')} samples it decides clearly (at least "
                   f"{100 * limits.min_agreement:.0f} %)")
    sqnr = summary.get("model_sqnr_db")
    if sqnr is not None and sqnr < limits.min_sqnr_db:
        out.append(f"output SQNR {_fmt(sqnr)} dB (at least {limits.min_sqnr_db:.0f} dB)")
    return out


def collapse(layers, limits: LossLimits = DEFAULT_LIMITS):
    """The layer report where the SQNR collapses: the first layer below the output's
    SQNR limit, else the layer of the lowest SQNR (None without per-layer figures)."""
    rows = [r for r in layers if r.sqnr_db is not None]
    for r in rows:
        if r.sqnr_db < limits.min_sqnr_db:
            return r
    return min(rows, key=lambda r: r.sqnr_db, default=None)


def check_loss(result, *, accept: bool, limits: LossLimits = DEFAULT_LIMITS,
               where: str = "model") -> tuple[str, ...]:
    """Nothing when `result` (a ptq.QuantResult) keeps the source model's answers; with
    `accept`, a warning saying what was lost; else raises QuantizationLoss."""
    missed = failures(result.summary, limits)
    if not missed:
        return ()
    layer = collapse(result.layers, limits)
    at = "" if layer is None else (
        f"; the SQNR collapses first at layer {layer.index} `{layer.name}` "
        f"({_fmt(layer.sqnr_db)} dB, node {', '.join(layer.nodes) or '-'})")
    samples = result.summary.get("calibration_samples", 0)
    message = (f"the quantized model departs from the source model on {samples} samples: "
               f"{'; '.join(missed)}{at}")
    if accept:
        return (f"warning[quantize.loss] {where}: {message} (accepted with --accept-loss)",)
    finer = "--calibration-method max or percentile, calibration samples that cover the inputs"
    if layer is not None and 0 < layer.weight_bits < 8:
        finer = f"8-bit weights for it with --weight-bits, {finer}"
    hint = (f"quantize that layer more finely ({finer}), retrain it with smaller range "
            "differences between its channels (one int8 scale serves all channels of a "
            "tensor), or pass --accept-loss to convert anyway")
    raise QuantizationLoss(Diagnostic("quantize.loss", where, message, hint),
                           result.table())


__all__ = ["DEFAULT_LIMITS", "HELP", "LossLimits", "QuantizationLoss", "check_loss",
           "collapse", "failures"]

"""Activation ranges from calibration data (max, percentile, MSE).

Each method turns the float values a tensor takes on the calibration set into the range
R that maps to the int8 code 127 (scale R / 127). Values beyond R saturate, as the
hardware's output clamp does (seed 000, "Data Format": outputs are clipped to 8 bits).
"""
from __future__ import annotations

import numpy as np

METHODS = ("mse", "max", "percentile")
DEFAULT_METHOD = "mse"
DEFAULT_PERCENTILE = 99.99
# Values looked at per tensor for percentile / MSE (a fixed, seeded subsample beyond it).
_SAMPLE = 65_536
_CANDIDATES = 48


def _magnitudes(values: np.ndarray) -> np.ndarray:
    v = np.abs(np.asarray(values, np.float64).ravel())
    if v.size > _SAMPLE:
        rng = np.random.default_rng(0x13)
        v = v[rng.choice(v.size, _SAMPLE, replace=False)]
    return v


def _quant_error(v: np.ndarray, r: float) -> float:
    s = r / 127.0
    q = np.clip(np.floor(v / s + 0.5), -128, 127) * s
    return float(np.mean((v - q) ** 2))


def tensor_range(values: np.ndarray, method: str = DEFAULT_METHOD,
                 percentile: float = DEFAULT_PERCENTILE) -> float:
    """The calibrated range of a tensor's values (> 0)."""
    if values.size == 0:
        return 1.0
    peak = float(np.max(np.abs(values)))
    if peak == 0.0 or not np.isfinite(peak):
        return 1.0
    if method == "max":
        return peak
    v = _magnitudes(values)
    if method == "percentile":
        return max(float(np.percentile(v, percentile)), peak * 1e-3)
    # MSE: the clipping range that minimises the mean squared quantization error of the
    # tensor's values (clipping a few outliers buys resolution for all other values).
    signed = np.asarray(values).ravel()
    if signed.size > _SAMPLE:
        rng = np.random.default_rng(0x13)
        signed = signed[rng.choice(signed.size, _SAMPLE, replace=False)]
    signed = signed.astype(np.float64)
    best, best_err = peak, _quant_error(signed, peak)
    for frac in np.linspace(0.2, 1.0, _CANDIDATES)[:-1]:
        r = peak * float(frac)
        err = _quant_error(signed, r)
        if err < best_err:
            best, best_err = r, err
    return best


__all__ = ["DEFAULT_METHOD", "DEFAULT_PERCENTILE", "METHODS", "tensor_range"]

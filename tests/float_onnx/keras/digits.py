"""The digits the Keras fixtures are trained and judged on (numpy only: the tests read
the saved split without tensorflow or scikit-learn).

8x8 grayscale digits in [0, 1] (scikit-learn's digits / 16), in three layouts a Keras
user writes: (8, 8, 1) images, (8, 8, 3) colour images and (8, 8) sequences of rows (and the
(1, 8, 8) images of a model exported with `--inputs-as-nchw`).
The colour variant is not a copy of one channel three times: channel 1 is the digit
dimmed and channel 2 its negative, so each channel has its own range and the input
has a non-zero background.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SPLIT = HERE / "held_out.npz"
SEED = 0
HELD_OUT = 360
CALIBRATION = 200


def layout(x: np.ndarray, kind: str) -> np.ndarray:
    """(N, 8, 8) digits in [0, 1] as the model of `kind` takes them."""
    x = np.asarray(x, np.float32)
    if kind == "gray":
        return x[..., np.newaxis]
    if kind == "rgb":
        return np.stack([x, 0.6 * x, 1.0 - x], axis=-1).astype(np.float32)
    if kind == "rows":
        return x
    if kind == "gray_nchw":
        return x[:, np.newaxis]
    raise ValueError(kind)


def held_out(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The held-out digits (never trained on, never calibrated on) and their labels."""
    data = np.load(SPLIT)
    return layout(data["x"], kind), data["y"]

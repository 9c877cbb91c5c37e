"""The digits as the torch fixtures take them (numpy only)."""
from __future__ import annotations

import numpy as np


def torch_layout(x: np.ndarray, kind: str) -> np.ndarray:
    """(N, 8, 8) digits in [0, 1] in a torch model's layout: `gray_nchw` images
    (N, 1, 8, 8), `rows_ncl` each image's rows as 8 features x 8 steps (N, 8, 8)."""
    x = np.asarray(x, np.float32)
    if kind == "gray_nchw":
        return x[:, np.newaxis]
    if kind == "rows_ncl":
        return np.ascontiguousarray(x.transpose(0, 2, 1))
    raise ValueError(kind)

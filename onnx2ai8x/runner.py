"""`onnx2ai8x run`: reference inference on an .npy sample."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import EXIT_USAGE, Ai8xError


def load_sample(path: Path) -> np.ndarray:
    """Load an .npy sample: integers in [-128, 127] as the accelerator sees them."""
    try:
        sample = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise Ai8xError("usage.bad-input", str(path), f"not a readable .npy array ({exc})",
                        "save the sample with numpy.save", exit_code=EXIT_USAGE) from None
    if sample.dtype.kind not in "iuf":
        raise Ai8xError("usage.bad-input", str(path),
                        f"the sample has dtype {sample.dtype}, not numbers",
                        "store integers in [-128, 127]", exit_code=EXIT_USAGE)
    if sample.dtype.kind == "f" and not np.all(np.isfinite(sample)):
        raise Ai8xError("usage.bad-input", str(path), "the sample holds NaN or infinity",
                        "store integers in [-128, 127]", exit_code=EXIT_USAGE)
    if sample.dtype.kind == "f" and not np.all(sample == np.round(sample)):
        raise Ai8xError("usage.bad-input", str(path), "the sample holds non-integer values",
                        "quantize the input as the accelerator sees it: round(x * 128) "
                        "clipped to [-128, 127]", exit_code=EXIT_USAGE)
    if sample.size and (sample.min() < -128 or sample.max() > 127):
        raise Ai8xError("usage.bad-input", str(path),
                        f"values range over [{sample.min()}, {sample.max()}], outside the "
                        "8-bit range [-128, 127]",
                        "clip or rescale the sample to [-128, 127]", exit_code=EXIT_USAGE)
    return sample.astype(np.int64)


def run_file(model: Path, input_path: Path) -> tuple[list[str], list[np.ndarray]]:
    """Run `model` on the sample in `input_path`; return output names and arrays."""

    sample = _float_input(model, input_path)
    if sample is None:
        sample = load_sample(input_path)
    session = _session(model)
    inp = session.get_inputs()[0]
    x = fit_to_input(sample, len(inp.shape), str(input_path))
    outputs = session.run(None, {inp.name: x})
    return [o.name for o in session.get_outputs()], list(outputs)


def _float_input(model: Path, input_path: Path) -> np.ndarray | None:
    """Float samples for a model quantized from float ONNX, mapped to int8 exactly as
    the quantizer did (its input mapping is in the model's metadata); None otherwise.
    Integer arrays are taken as the int8 the accelerator reads."""
    try:
        raw = np.load(input_path, allow_pickle=False)
    except (OSError, ValueError):
        return None  # load_sample reports it
    if raw.dtype.kind != "f":
        return None
    from .quantize.mapping import model_mapping

    try:
        mapping = model_mapping(model)
    except Exception:  # noqa: BLE001 - an unreadable model is reported by _session
        return None
    if mapping is None:
        return None
    if not np.all(np.isfinite(raw)):
        raise Ai8xError("usage.bad-input", str(input_path), "the sample holds NaN or "
                        "infinity", "store finite float samples", exit_code=EXIT_USAGE)
    x = raw if raw.ndim == len(mapping.perm) else raw[np.newaxis]
    if x.ndim != len(mapping.perm):
        raise Ai8xError("usage.bad-input", str(input_path),
                        f"the sample has shape {tuple(raw.shape)}; the float model takes "
                        f"{len(mapping.perm) - 1}-D samples (plus a batch dimension)",
                        "store samples in the float model's input shape",
                        exit_code=EXIT_USAGE)
    return mapping.quantize(x).astype(np.int64)


def _session(model: Path):
    import custom_ops

    try:
        return custom_ops.session(model)
    except Ai8xError:
        raise
    except Exception as exc:  # onnx / onnxruntime refuse the file
        raise Ai8xError("model.unreadable", str(model),
                        f"onnxruntime cannot load the model ({str(exc).splitlines()[0]})",
                        "export it with ai8x_torch.export_onnx or onnx2ai8x import-izer"
                        ) from None


def fit_to_input(sample: np.ndarray, rank: int, where: str) -> np.ndarray:
    """Shape a sample for a model input of `rank` dimensions (batch first), as int8.

    Accepts (C,H,W) / (C,L) samples, the vendor's (C,L,1) form of 1-D samples, and
    batched arrays.
    """
    x = sample
    if rank == 3 and x.ndim in (3, 4) and x.shape[-1] == 1:
        x = x[..., 0]  # the vendor holds 1-D samples as (C, L, 1)
    if x.ndim == rank - 1:
        x = x[np.newaxis]
    if x.ndim != rank:
        raise Ai8xError("usage.bad-input", where,
                        f"the sample has shape {tuple(sample.shape)} but the model takes "
                        f"{rank - 1}-D samples (plus a batch dimension)",
                        "store the sample as (C, H, W) for 2-D or (C, L) for 1-D models",
                        exit_code=EXIT_USAGE)
    return np.ascontiguousarray(x.astype(np.int8))

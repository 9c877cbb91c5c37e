"""`onnx2ai8x run`: reference inference on an .npy sample."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import EXIT_USAGE, Ai8xError
from .samples import checked_header, load_sample, npy_errors


def check_sample_shape(path: Path, input_shape: tuple, *, one: bool = False) -> None:
    """Refuse a sample whose declared shape does not fit the model's input (`input_shape`
    with the batch dimension; symbolic dimensions match anything) from its header, before
    its values are read: a hostile 48 MB sample was read, checked and converted to int64
    before its shape was compared (15 s under load). `one`: a single sample (the
    known-answer test), not a batch."""
    shape, _ = checked_header(Path(path))
    fitted = fitted_shape(shape, len(input_shape))
    if fitted is None:
        raise _rank_error(shape, len(input_shape), str(path))
    if one and fitted[0] != 1:
        raise Ai8xError("usage.bad-input", str(path),
                        f"the sample holds a batch of {fitted[0]}; the known-answer test "
                        "takes one sample", "save a single sample", exit_code=EXIT_USAGE)
    want = tuple(input_shape[1:])
    if all(isinstance(d, int) for d in want) and fitted[1:] != want:
        raise Ai8xError("usage.bad-input", str(path),
                        f"the sample has shape {fitted[1:]}, the model takes {want}",
                        "pass a sample of the model's input shape", exit_code=EXIT_USAGE)


def run_file(model: Path, input_path: Path) -> tuple[list[str], list[np.ndarray]]:
    """Run `model` on the sample in `input_path`; return output names and arrays."""

    # before anything allocates what the header says
    _, dtype = checked_header(Path(input_path))
    sample = _float_input(model, input_path) if dtype.kind in "fiu" else None
    if sample is None:
        # (a float sample mapped by the float model's input mapping has that model's
        # layout, checked there; an unreadable model is reported by _session below)
        declared = _declared_input_shape(model)
        if declared is not None:
            check_sample_shape(input_path, declared)
        sample = load_sample(input_path)
    return run_session(_session(model), sample, str(input_path), str(model))


def run_session(session, sample: np.ndarray, where: str, model_where: str
                ) -> tuple[list[str], list[np.ndarray]]:
    """Run an onnxruntime `session` of an ai8x-ONNX model on `sample` (`where`: the
    sample's name in messages, `model_where`: the model's): the output names and arrays.
    A model that is not ai8x-ONNX, a sample of another shape and anything onnxruntime
    refuses are Ai8xErrors, whether the sample came from a file or an array."""
    inputs = session.get_inputs()
    if len(inputs) != 1 or inputs[0].type != "tensor(int8)":
        kinds = ", ".join(f"{i.name}: {i.type}" for i in inputs) or "none"
        if any("float" in i.type for i in inputs):
            raise Ai8xError("model.float", model_where,
                            f"a float model (inputs: {kinds}); run computes ai8x-ONNX, "
                            "whose one input is int8", "quantize it first (onnx2ai8x "
                            "quantize MODEL --calibration x.npy -o q.onnx, then run "
                            "q.onnx), or run the float model with onnxruntime itself")
        raise Ai8xError("model.input", model_where,
                        f"the model's inputs are ({kinds}); ai8x-ONNX takes one int8 "
                        "input", "export the model with ai8x_torch.export_onnx or "
                        "onnx2ai8x import-izer")
    inp = inputs[0]
    x = fit_to_input(sample, len(inp.shape), where)
    want = tuple(inp.shape[1:])
    if all(isinstance(d, int) for d in want) and tuple(x.shape[1:]) != want:
        raise Ai8xError("usage.bad-input", where,
                        f"the sample has shape {tuple(x.shape[1:])}, the model takes "
                        f"{want}", "pass a sample of the model's input shape",
                        exit_code=EXIT_USAGE)
    try:
        outputs = session.run(None, {inp.name: x})
    except Exception as exc:  # noqa: BLE001 - onnxruntime's errors for a model it loaded
        raise Ai8xError("model.run", model_where,
                        f"onnxruntime cannot run the model on this sample "
                        f"({str(exc).splitlines()[0][:300]})",
                        "check the model with `onnx2ai8x check` and the sample's shape"
                        ) from None
    return [o.name for o in session.get_outputs()], list(outputs)


def _declared_input_shape(model: Path) -> tuple | None:
    """The model's one graph input shape as the file declares it (symbolic dimensions
    as their names), or None when the file does not say (checked later by onnxruntime)."""
    from . import onnxpb

    try:
        graph = onnxpb.load(Path(model)).graph
        weights = {t.name for t in graph.initializer}
        inputs = [i for i in graph.input if i.name not in weights]
        if len(inputs) != 1:
            return None
        dims = inputs[0].type.tensor_type.shape.dim
        return tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or "?"
                     for d in dims) or None
    except Exception:  # noqa: BLE001 - an unreadable model is reported by _session
        return None


def _codes_source(mapping) -> bool:
    """The source model's input units are the accelerator's codes (an integer-input
    quantized model, importer/dialects/integer_io.py): its integer samples, in its own
    layout, reach the accelerator through the mapping's layout change unchanged."""
    return mapping.scale == 1.0 and not any(mapping.offset)


def _float_input(model: Path, input_path: Path) -> np.ndarray | None:
    """Float samples for a model quantized from float ONNX, mapped to int8 exactly as
    the quantizer did (its input mapping is in the model's metadata); None otherwise.
    Integer arrays are taken as the int8 the accelerator reads."""
    from .quantize.mapping import model_mapping

    try:
        mapping = model_mapping(model)
    except Ai8xError as err:
        if err.code == "model.metadata":
            raise  # a damaged input mapping: said, not ignored
        return None  # an unreadable model is reported by _session
    except Exception:  # noqa: BLE001 - an unreadable model is reported by _session
        return None
    if mapping is None:
        return None  # the values are read once, by load_sample
    _, dtype = checked_header(Path(input_path))
    if dtype.kind != "f" and not (_codes_source(mapping) and dtype.kind in "iu"):
        return None  # int8 codes for the accelerator: read once, by load_sample
    try:
        raw = np.load(input_path, allow_pickle=False)
    except npy_errors():
        return None  # load_sample reports it
    if raw.dtype.kind != "f" and not (_codes_source(mapping) and raw.dtype.kind in "iu"):
        return None
    if raw.dtype.kind == "f" and not np.all(np.isfinite(raw)):
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
    fitted = fitted_shape(sample.shape, rank)
    if fitted is None:
        raise _rank_error(sample.shape, rank, where)
    return np.ascontiguousarray(sample.reshape(fitted).astype(np.int8))


def fitted_shape(shape: tuple[int, ...], rank: int) -> tuple[int, ...] | None:
    """The shape `fit_to_input` gives a sample of `shape` for a model input of `rank`
    dimensions (batch first), or None when it does not fit."""
    s = tuple(int(d) for d in shape)
    if rank == 3 and len(s) in (3, 4) and s[-1] == 1:
        s = s[:-1]  # the vendor holds 1-D samples as (C, L, 1)
    if len(s) == rank - 1:
        s = (1, *s)
    return s if len(s) == rank else None


def _rank_error(shape: tuple, rank: int, where: str) -> Ai8xError:
    return Ai8xError("usage.bad-input", where,
                     f"the sample has shape {tuple(shape)} but the model takes "
                     f"{rank - 1}-D samples (plus a batch dimension)",
                     "store the sample as (C, H, W) for 2-D or (C, L) for 1-D models",
                     exit_code=EXIT_USAGE)

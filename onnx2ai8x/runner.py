"""`onnx2ai8x run`: reference inference on an .npy sample."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import EXIT_USAGE, Ai8xError

# A sample is one input of a network that fits a MAX7800x: at most 1,024 channels of
# 2,048 x 2,048 (the MAX78002's row limit); 2**26 values is far above any of them and far
# below what would exhaust memory.
MAX_SAMPLE_VALUES = 1 << 26


def _bad_sample(path: Path, message: str, hint: str = "save the sample with numpy.save "
                "as an .npy file of integers in [-128, 127]") -> Ai8xError:
    return Ai8xError("usage.bad-input", str(path), message, hint, exit_code=EXIT_USAGE)


def _checked_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    """Read the .npy header and check what it declares against the file before numpy
    allocates anything (a header may declare 10**12 values in a 100-byte file); the
    declared shape and dtype."""
    from numpy.lib import format as npy

    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            magic = fh.read(6)
            if magic[:2] == b"PK":
                raise _bad_sample(path, "this is an .npz archive; a sample is one array",
                                  "save the sample alone with numpy.save(path, array) "
                                  "as .npy")
            if magic != b"\x93NUMPY":
                raise _bad_sample(path, "not an .npy file" + (" (it is empty)" if size == 0
                                                             else ""))
            fh.seek(0)
            version = npy.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = npy.read_array_header_1_0(fh)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = npy.read_array_header_2_0(fh)
            else:
                raise _bad_sample(path, f"unknown .npy format version {version}")
            offset = fh.tell()
    except Ai8xError:
        raise
    except OSError as exc:
        raise _bad_sample(path, f"cannot read the sample ({exc.strerror})",
                          "check the path and its permissions") from None
    except (ValueError, TypeError, SyntaxError) as exc:
        raise _bad_sample(path, f"the .npy header is damaged ({str(exc)[:200]})") from None
    if dtype.hasobject or dtype.kind not in "iufb":
        raise _bad_sample(path, f"the sample has dtype {dtype}, not numbers")
    count = 1
    for dim in shape:
        count *= dim
    if count > MAX_SAMPLE_VALUES:
        raise _bad_sample(path, f"the header declares shape {shape} ({count} values), more "
                          f"than the {MAX_SAMPLE_VALUES} any network input can hold",
                          "pass the sample of one network input")
    if size - offset != count * dtype.itemsize:
        raise _bad_sample(path, f"the header declares shape {shape} of {dtype} "
                          f"({count * dtype.itemsize} bytes), the file holds "
                          f"{size - offset} bytes of data", "the file is damaged or "
                          "truncated; save the sample again with numpy.save")
    return tuple(shape), dtype


def check_sample_shape(path: Path, input_shape: tuple, *, one: bool = False) -> None:
    """Refuse a sample whose declared shape does not fit the model's input (`input_shape`
    with the batch dimension; symbolic dimensions match anything) from its header, before
    its values are read: a hostile 48 MB sample was read, checked and converted to int64
    before its shape was compared (15 s under load). `one`: a single sample (the
    known-answer test), not a batch."""
    shape, _ = _checked_header(Path(path))
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


def load_sample(path: Path) -> np.ndarray:
    """Load an .npy sample: integers in [-128, 127] as the accelerator sees them."""
    path = Path(path)
    _checked_header(path)
    try:
        sample = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise Ai8xError("usage.bad-input", str(path), f"not a readable .npy array ({exc})",
                        "save the sample with numpy.save", exit_code=EXIT_USAGE) from None
    if sample.dtype.kind == "b":
        raise _bad_sample(path, "the sample holds booleans, not numbers")
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

    # before anything allocates what the header says
    _, dtype = _checked_header(Path(input_path))
    sample = _float_input(model, input_path) if dtype.kind == "f" else None
    if sample is None:
        # (a float sample mapped by the float model's input mapping has that model's
        # layout, checked there; an unreadable model is reported by _session below)
        declared = _declared_input_shape(model)
        if declared is not None:
            check_sample_shape(input_path, declared)
        sample = load_sample(input_path)
    session = _session(model)
    inputs = session.get_inputs()
    if len(inputs) != 1 or inputs[0].type != "tensor(int8)":
        kinds = ", ".join(f"{i.name}: {i.type}" for i in inputs) or "none"
        raise Ai8xError("model.input", str(model),
                        f"the model's inputs are ({kinds}); ai8x-ONNX takes one int8 "
                        "input", "export the model with ai8x_torch.export_onnx or "
                        "onnx2ai8x import-izer")
    inp = inputs[0]
    x = fit_to_input(sample, len(inp.shape), str(input_path))
    want = tuple(inp.shape[1:])
    if all(isinstance(d, int) for d in want) and tuple(x.shape[1:]) != want:
        raise Ai8xError("usage.bad-input", str(input_path),
                        f"the sample has shape {tuple(x.shape[1:])}, the model takes "
                        f"{want}", "pass a sample of the model's input shape",
                        exit_code=EXIT_USAGE)
    try:
        outputs = session.run(None, {inp.name: x})
    except Exception as exc:  # noqa: BLE001 - onnxruntime's errors for a model it loaded
        raise Ai8xError("model.run", str(model),
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


def _float_input(model: Path, input_path: Path) -> np.ndarray | None:
    """Float samples for a model quantized from float ONNX, mapped to int8 exactly as
    the quantizer did (its input mapping is in the model's metadata); None otherwise.
    Integer arrays are taken as the int8 the accelerator reads."""
    from .quantize.mapping import model_mapping

    try:
        mapping = model_mapping(model)
    except Exception:  # noqa: BLE001 - an unreadable model is reported by _session
        return None
    if mapping is None:
        return None  # the values are read once, by load_sample
    try:
        raw = np.load(input_path, allow_pickle=False)
    except (OSError, ValueError):
        return None  # load_sample reports it
    if raw.dtype.kind != "f":
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

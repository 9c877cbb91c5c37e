"""The .npy samples the user gives (a known-answer input, `run`'s and `import-izer`'s
sample): their header checked against the file before numpy allocates anything, and
their values checked as the accelerator's 8-bit input. A module of its own at the bottom
of the layers: the importer (import-izer's input shape), the driver and the runner read
samples.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import EXIT_USAGE, Ai8xError

# A sample is one input of a network that fits a MAX7800x: at most 1,024 channels of
# 2,048 x 2,048 (the MAX78002's row limit); 2**26 values is far above any of them and far
# below what would exhaust memory.
MAX_SAMPLE_VALUES = 1 << 26


def bad_sample(path: Path | str, message: str, hint: str = "save the sample with numpy.save "
                "as an .npy file of integers in [-128, 127]") -> Ai8xError:
    return Ai8xError("usage.bad-input", str(path), message, hint, exit_code=EXIT_USAGE)


def npy_errors() -> tuple[type[BaseException], ...]:
    """What numpy's .npy reader raises for a damaged file: besides ValueError, a header
    it cannot parse as a Python literal raises SyntaxError, and one whose legacy filter
    cannot tokenize it (a stray byte in the padding) tokenize.TokenError (issue 35's
    fuzz campaign: an internal error from a sample with 0xa0 in its header)."""
    from tokenize import TokenError

    return (OSError, ValueError, TypeError, SyntaxError, TokenError, EOFError)


def checked_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    """Read the .npy header and check what it declares against the file before numpy
    allocates anything (a header may declare 10**12 values in a 100-byte file); the
    declared shape and dtype."""
    from numpy.lib import format as npy

    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            magic = fh.read(6)
            if magic[:2] == b"PK":
                raise bad_sample(path, "this is an .npz archive; a sample is one array",
                                  "save the sample alone with numpy.save(path, array) "
                                  "as .npy")
            if magic != b"\x93NUMPY":
                raise bad_sample(path, "not an .npy file" + (" (it is empty)" if size == 0
                                                             else ""))
            fh.seek(0)
            version = npy.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = npy.read_array_header_1_0(fh)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = npy.read_array_header_2_0(fh)
            else:
                raise bad_sample(path, f"unknown .npy format version {version}")
            offset = fh.tell()
    except Ai8xError:
        raise
    except OSError as exc:
        raise bad_sample(path, f"cannot read the sample ({exc.strerror})",
                          "check the path and its permissions") from None
    except npy_errors() as exc:
        raise bad_sample(path, f"the .npy header is damaged ({str(exc)[:200]})") from None
    if dtype.hasobject or dtype.kind not in "iufb":
        raise bad_sample(path, f"the sample has dtype {dtype}, not numbers")
    count = 1
    for dim in shape:
        count *= dim
    if count > MAX_SAMPLE_VALUES:
        raise bad_sample(path, f"the header declares shape {shape} ({count} values), more "
                          f"than the {MAX_SAMPLE_VALUES} any network input can hold",
                          "pass the sample of one network input")
    if size - offset != count * dtype.itemsize:
        raise bad_sample(path, f"the header declares shape {shape} of {dtype} "
                          f"({count * dtype.itemsize} bytes), the file holds "
                          f"{size - offset} bytes of data", "the file is damaged or "
                          "truncated; save the sample again with numpy.save")
    return tuple(shape), dtype


def load_sample(path: Path) -> np.ndarray:
    """Load an .npy sample: integers in [-128, 127] as the accelerator sees them."""
    path = Path(path)
    checked_header(path)
    try:
        sample = np.load(path, allow_pickle=False)
    except npy_errors() as exc:
        raise Ai8xError("usage.bad-input", str(path), f"not a readable .npy array ({exc})",
                        "save the sample with numpy.save", exit_code=EXIT_USAGE) from None
    return checked_values(sample, str(path))


def checked_values(sample: np.ndarray, where: str) -> np.ndarray:
    """`sample` as int64 when it holds the accelerator's input: integers in [-128, 127]
    (from a file or given in memory)."""
    sample = np.asarray(sample)
    if sample.dtype.kind == "b":
        raise bad_sample(where, "the sample holds booleans, not numbers")
    if sample.dtype.kind not in "iuf":
        raise Ai8xError("usage.bad-input", where,
                        f"the sample has dtype {sample.dtype}, not numbers",
                        "store integers in [-128, 127]", exit_code=EXIT_USAGE)
    if sample.dtype.kind == "f" and not np.all(np.isfinite(sample)):
        raise Ai8xError("usage.bad-input", where, "the sample holds NaN or infinity",
                        "store integers in [-128, 127]", exit_code=EXIT_USAGE)
    if sample.dtype.kind == "f" and not np.all(sample == np.round(sample)):
        raise Ai8xError("usage.bad-input", where, "the sample holds non-integer values",
                        "quantize the input as the accelerator sees it: round(x * 128) "
                        "clipped to [-128, 127]", exit_code=EXIT_USAGE)
    if sample.size and (sample.min() < -128 or sample.max() > 127):
        raise Ai8xError("usage.bad-input", where,
                        f"values range over [{sample.min()}, {sample.max()}], outside the "
                        "8-bit range [-128, 127]",
                        "clip or rescale the sample to [-128, 127]", exit_code=EXIT_USAGE)
    return sample.astype(np.int64)

"""What a file given as the model is, when it is not an ONNX model: the inputs users
confuse with one (issue 35) are named, with the command that takes them."""
from __future__ import annotations

from pathlib import Path

from .errors import EXIT_USAGE, Ai8xError

# First bytes of the files users pass as the model by mistake.
_ZIP = b"PK\x03\x04"  # torch.save's format since PyTorch 1.6 (a zip archive)
_PICKLE = tuple(bytes([0x80, proto]) for proto in range(2, 6))  # older torch.save
_NPY = b"\x93NUMPY"
_PROJECT_FILES = ("cnn.c", "main.c")


def confused_model(path: Path) -> Ai8xError | None:
    """The error for a model path that names something other than an ONNX file: a
    directory (a generated project, or any folder), an empty file, a PyTorch checkpoint,
    a numpy array; None when it may be a model (the reader judges the rest)."""
    if path.is_dir():
        if all((path / name).is_file() for name in _PROJECT_FILES):
            return Ai8xError("usage.model-kind", str(path),
                             "a directory (a generated C project), not a model file",
                             f"to check the project: onnx2ai8x verify {path}; to convert, "
                             "pass the .onnx model file", exit_code=EXIT_USAGE)
        return Ai8xError("usage.model-kind", str(path), "a directory, not a model file",
                         "pass the .onnx model file", exit_code=EXIT_USAGE)
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError:
        return None  # the caller reports what cannot be opened
    if not head:
        return Ai8xError("usage.model-kind", str(path), "the model file is empty (0 bytes)",
                         "pass the .onnx file the export wrote (it may have been cut short)",
                         exit_code=EXIT_USAGE)
    if head.startswith(_ZIP) or head.startswith(_PICKLE):
        return Ai8xError("usage.model-kind", str(path),
                         "a PyTorch checkpoint (torch.save), not an ONNX model",
                         "export the network to ONNX (ai8x_torch.export_onnx), or import a "
                         "vendor checkpoint with its network YAML: onnx2ai8x import-izer "
                         "--config-file net.yaml --checkpoint-file CHECKPOINT --sample "
                         "sample.npy --device MAX78000 -o net.onnx", exit_code=EXIT_USAGE)
    if head.startswith(_NPY):
        return Ai8xError("usage.model-kind", str(path),
                         "a numpy array (.npy), not an ONNX model",
                         "pass the model first; a sample goes to --sample-input, "
                         "calibration data to --calibration", exit_code=EXIT_USAGE)
    return None

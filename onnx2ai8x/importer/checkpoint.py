"""Read a quantized checkpoint in the vendor's format, without running foreign code.

A vendor checkpoint (`.pth.tar`) is a pickled dict with `arch`, `epoch` and `state_dict`
(golden README, "Files in a case"). The `state_dict` holds, per weight layer and in layer
order, `<layer>.<op>.weight`, an optional `<layer>.<op>.bias`, `<layer>.weight_bits` and
`<layer>.output_shift`; layers without weights have no entries.

Unpickling an untrusted file can execute code, so this module only ever calls
`torch.load(..., weights_only=True)`. Trained checkpoints also pickle the class of their
optimizer (`torch.optim.adam.Adam`, ...); exactly those classes are allow-listed.

This is the one place on the import path that touches torch, and it imports torch inside
the function so that importing this module stays cheap and torch-free.
"""
from __future__ import annotations

import importlib
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import EXIT_USAGE, Ai8xError

# The optimizer classes trained checkpoints pickle (module inside torch.optim, class name).
# Classes are listed explicitly: an allow-list must never grow from what a file asks for.
_OPTIMIZER_CLASSES = (
    ("sgd", "SGD"), ("adam", "Adam"), ("adamw", "AdamW"), ("adamax", "Adamax"),
    ("adagrad", "Adagrad"), ("adadelta", "Adadelta"), ("rmsprop", "RMSprop"),
    ("rprop", "Rprop"), ("asgd", "ASGD"), ("nadam", "NAdam"), ("radam", "RAdam"),
    ("lbfgs", "LBFGS"), ("sparse_adam", "SparseAdam"),
)

# Data-parallel training saves every key with this prefix; the layer name is what follows.
_PARALLEL_PREFIX = "module."

# A pickle global the weights-only unpickler refused, as torch names it in its message.
_REFUSED_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


@dataclass(frozen=True, eq=False)
class CheckpointLayer:
    """One weight layer of a vendor checkpoint, values exactly as stored.

    Bias convention (vendor `izer/checkpoint.py` and `izer/simulate.py`):

    * ``bias`` is the stored value: the layer's integer bias multiplied by
      ``2 ** (weight_bits - 1)``. For 8-bit weights that is ``bias_hw * 128``.
    * ``bias_hw`` is the 8-bit value written into the accelerator's bias memory:
      ``floor(bias / 2 ** (weight_bits - 1))`` (floor, so a checkpoint that is not exactly
      quantized still gives the vendor's value). It is in [-128, 127] for valid files.
    * The value the hardware adds to the 32-bit accumulator is ``bias_hw * 128``, whatever
      the weight width (the vendor simulator multiplies by its BIAS_DIV of 128). For
      weights narrower than 8 bits this differs from ``bias``; the implicit
      ``8 - weight_bits`` output shift compensates for the narrower weights.
    """

    name: str  # layer name, e.g. "conv1" (a data-parallel "module." prefix removed)
    key: str  # state_dict key of the weight, e.g. "module.conv1.op.weight"
    op: str | None  # the middle key level ("op" for ai8x modules), None for "<layer>.weight"
    weight: np.ndarray  # int64, PyTorch layout as stored (see `weight_layout` below)
    bias: np.ndarray | None  # int64, as stored (integer bias * 2**(weight_bits - 1))
    bias_hw: np.ndarray | None  # int64, the 8-bit value in bias memory
    weight_bits: int  # as stored; 8 when absent or stored as 0 (the vendor's default)
    output_shift: int  # as stored, 0 when absent; the implicit 8 - weight_bits NOT included
    has_output_shift: bool  # whether the checkpoint stores an output_shift for the layer

    @property
    def accumulator_bias(self) -> np.ndarray | None:
        """The value the hardware adds to the accumulator per output channel."""
        return None if self.bias_hw is None else self.bias_hw * 128

    @property
    def weight_layout(self) -> str:
        """How to read `weight.shape`; transposed convolutions are told apart by the sidecar.

        2-D: Conv2d (out, in/groups, kh, kw) or ConvTranspose2d (in, out/groups, kh, kw);
        1-D: Conv1d (out, in/groups, k); linear: (out, in).
        """
        return {2: "linear", 3: "conv1d", 4: "conv2d"}.get(self.weight.ndim, "unknown")

    @property
    def all_zero(self) -> bool:
        return not np.any(self.weight)

    @property
    def binary(self) -> bool:
        """All weights are -1 or +1 (the MAX78002's binary-weight candidates)."""
        return bool(self.weight.size) and bool(np.all(np.abs(self.weight) == 1))


@dataclass(frozen=True, eq=False)
class Checkpoint:
    """A loaded checkpoint: its architecture name, epoch and weight layers in order."""

    path: str
    arch: str | None
    epoch: int | None
    layers: tuple[CheckpointLayer, ...]


def _optimizer_classes() -> list[type]:
    classes = []
    for module, cls in _OPTIMIZER_CLASSES:
        # `torch.optim.sgd` is a submodule, not an attribute of torch.optim: import it.
        try:
            mod = importlib.import_module(f"torch.optim.{module}")
        except ImportError:
            continue
        found = getattr(mod, cls, None)
        if isinstance(found, type):
            classes.append(found)
    return classes


def _torch_load(path: Path) -> object:
    try:
        import torch
    except ImportError as exc:
        raise Ai8xError("usage.torch-missing", str(path),
                        f"reading a checkpoint needs PyTorch ({exc})",
                        "pip install 'onnx2ai8x[torch]'", exit_code=EXIT_USAGE) from None
    with torch.serialization.safe_globals(_optimizer_classes()):
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            text = str(exc)
            refused = _REFUSED_GLOBAL.search(text)
            if refused:
                raise Ai8xError(
                    "checkpoint.unsafe", str(path),
                    f"the checkpoint pickles `{refused.group(1)}`, which is not allowed "
                    "(only tensors, plain containers and torch.optim optimizer classes are "
                    "loaded, because unpickling other objects can run arbitrary code)",
                    "save the checkpoint with only tensors in it, e.g. "
                    "torch.save({'arch': ..., 'epoch': ..., 'state_dict': "
                    "model.state_dict()}, path)") from None
            raise Ai8xError("checkpoint.unreadable", str(path),
                            f"not a PyTorch checkpoint ({_first_line(text)})",
                            "pass the quantized .pth.tar written by the vendor's "
                            "quantize.py or by ai8x_torch") from None
        except Exception as exc:  # noqa: BLE001 - torch raises many kinds for a bad file
            raise Ai8xError("checkpoint.unreadable", str(path),
                            f"not a PyTorch checkpoint ({type(exc).__name__}: "
                            f"{_first_line(str(exc))})",
                            "pass the quantized .pth.tar written by the vendor's "
                            "quantize.py or by ai8x_torch") from None


def load_checkpoint_file(path: str | Path) -> object:
    """The unpickled checkpoint, loaded with the allow-list above (tensors, containers and
    torch.optim optimizer classes only); an Ai8xError for a file that is unsafe or not a
    checkpoint."""
    return _torch_load(Path(path))


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or ["no details"])[0][:200]


def _tensor_problem(value: object) -> str | None:
    """Why a tensor cannot hold quantized weights, or None: it must be a dense tensor of
    real numbers with its values in memory (torch.load maps storage to the CPU, but a
    `meta` tensor has no values, and sparse, quantized, complex or boolean tensors are no
    quantized checkpoint's)."""
    device = getattr(getattr(value, "device", None), "type", "cpu")
    if device == "meta":
        return "is a `meta` tensor: it has a shape but no values"
    if getattr(value, "is_sparse", False) or str(getattr(value, "layout", "torch.strided")) \
            != "torch.strided":
        return "is a sparse tensor"
    if getattr(value, "is_quantized", False):
        return "is a torch quantized tensor (the vendor format stores integers as floats)"
    dtype = getattr(value, "dtype", None)
    if dtype is not None and (dtype.is_complex or str(dtype) == "torch.bool"):
        return f"holds {str(dtype).removeprefix('torch.')} values, not real numbers"
    return None


def _numpy(value: object, key: str = "", where: str = "") -> np.ndarray | None:
    """A tensor (or number) as a float64 numpy array; None if it is something else.
    A tensor of a kind no checkpoint holds (see _tensor_problem) is an Ai8xError."""
    if hasattr(value, "detach"):
        problem = _tensor_problem(value)
        if problem is not None:
            raise Ai8xError("checkpoint.invalid", where, f"`{key}` {problem}",
                            "save the quantized state_dict with plain CPU tensors")
        try:
            return np.asarray(value.detach().cpu().double().numpy())
        except (TypeError, RuntimeError, NotImplementedError):
            return None
    if isinstance(value, int | float | np.ndarray):
        return np.asarray(value, dtype=np.float64)
    return None


def _scalar(state: dict, key: str, where: str) -> int | None:
    if key not in state:
        return None
    arr = _numpy(state[key], key, where)
    if arr is None or arr.size != 1 or not np.isfinite(arr).all() or arr.flat[0] != \
            np.floor(arr.flat[0]):
        raise Ai8xError("checkpoint.invalid", where,
                        f"`{key}` must hold one integer, got {state[key]!r:.80}",
                        "re-run quantization on the checkpoint")
    return int(arr.flat[0])


def _integers(arr: np.ndarray, key: str, where: str) -> np.ndarray:
    if not np.isfinite(arr).all() or np.any(arr != np.floor(arr)):
        raise Ai8xError("checkpoint.not-quantized", where,
                        f"`{key}` holds non-integer values: the checkpoint is not quantized",
                        "quantize it first (vendor: quantize.py; this project: "
                        "ai8x_torch's quantize step) and pass the quantized .pth.tar")
    return arr.astype(np.int64)


def read_checkpoint(path: str | Path) -> Checkpoint:
    """Load `path` and return its weight layers in layer order.

    Layer order is the `state_dict` key order, as the vendor tool takes it. Keys are split
    at their last two dots into ``<layer>.<op>.<parameter>`` (two levels give
    ``<layer>.<parameter>``); every ``weight`` parameter starts a layer. A data-parallel
    "module." prefix is removed; when a file holds the same layer both with and without
    the prefix (some vendor checkpoints do), the first occurrence is kept, which is the
    one the vendor tool uses.
    """
    path = Path(path)
    where = str(path)
    data, state = _checkpoint_dict(path, where)
    arch = data.get("arch")
    epoch = data.get("epoch")

    layers: list[CheckpointLayer] = []
    seen: set[str] = set()
    for key in state:
        if not isinstance(key, str):
            continue
        levels = key.rsplit(".", 2)
        if len(levels) == 3:
            prefix, op, parameter = levels
        elif len(levels) == 2:
            prefix, op, parameter = levels[0], None, levels[1]
        else:
            continue
        if parameter != "weight":
            continue
        name = prefix[len(_PARALLEL_PREFIX):] if prefix.startswith(_PARALLEL_PREFIX) \
            else prefix
        if name in seen:
            continue
        seen.add(name)
        layers.append(_layer(state, key, prefix, op, name,
                             f"{where}: layer {len(layers)} `{name}`"))
    return Checkpoint(path=where, arch=arch if isinstance(arch, str) else None,
                      epoch=int(epoch) if isinstance(epoch, int | float) else None,
                      layers=tuple(layers))


def _checkpoint_dict(path: Path, where: str) -> tuple[dict, dict]:
    """The file's checkpoint dict and its `state_dict`."""
    if not path.is_file():
        raise Ai8xError("usage.missing-file", where, "checkpoint file not found",
                        "check the --checkpoint-file path", exit_code=EXIT_USAGE)
    data = _torch_load(path)
    if not isinstance(data, dict):
        raise Ai8xError("checkpoint.invalid", where,
                        f"the file holds a {type(data).__name__}, not a checkpoint dict",
                        "a vendor checkpoint is a dict with `arch`, `epoch` and `state_dict`")
    state = data.get("state_dict")
    if not isinstance(state, dict):
        raise Ai8xError("checkpoint.invalid", where,
                        "the checkpoint has no `state_dict` dict"
                        + (f" (keys: {', '.join(map(str, list(data)[:8]))})" if data else ""),
                        "a vendor checkpoint is a dict with `arch`, `epoch` and `state_dict`; "
                        "if this is a bare state_dict, wrap it: "
                        "{'arch': name, 'epoch': 0, 'state_dict': sd}")
    return data, state


def _layer(state: dict, key: str, prefix: str, op: str | None, name: str,
           lwhere: str) -> CheckpointLayer:
    """The weight layer whose weight is `state[key]`, with its bits, shift and bias."""
    weight = _weight(state, key, op, lwhere)
    weight_bits = _scalar(state, f"{prefix}.weight_bits", lwhere)
    # Absent or 0 means 8 bits (vendor izer/checkpoint.py treats both as 8).
    if not weight_bits:
        weight_bits = 8
    if not 1 <= weight_bits <= 8:
        raise Ai8xError("checkpoint.invalid", lwhere,
                        f"`{prefix}.weight_bits` is {weight_bits}; the accelerator "
                        "supports 1, 2, 4 or 8-bit weights",
                        "re-quantize the layer with a supported weight width")
    stored_shift = _scalar(state, f"{prefix}.output_shift", lwhere)
    bias_key = f"{prefix}.bias" if op is None else f"{prefix}.{op}.bias"
    bias = bias_hw = None
    if bias_key in state:
        bias_f = _numpy(state[bias_key], bias_key, lwhere)
        if bias_f is None or bias_f.ndim != 1 or not np.isfinite(bias_f).all():
            raise Ai8xError("checkpoint.invalid", lwhere,
                            f"`{bias_key}` must be a 1-D tensor of numbers",
                            "re-save the checkpoint")
        # A quantized bias holds integers (the vendor's quantize.py rounds it); a
        # fraction would be floored below without a word (issue 15).
        _integers(bias_f, bias_key, lwhere)
        bias = np.floor(bias_f).astype(np.int64)
        # floor division as the vendor does it, so imperfectly quantized files agree
        bias_hw = np.floor(bias_f / 2 ** (weight_bits - 1)).astype(np.int64)
    return CheckpointLayer(
        name=name, key=key, op=op, weight=weight, bias=bias, bias_hw=bias_hw,
        weight_bits=weight_bits, output_shift=stored_shift or 0,
        has_output_shift=stored_shift is not None)


def _weight(state: dict, key: str, op: str | None, lwhere: str) -> np.ndarray:
    """`state[key]` as integer weights of a layer the accelerator runs (2-D to 4-D)."""
    weight_f = _numpy(state[key], key, lwhere)
    if weight_f is None:
        raise Ai8xError("checkpoint.invalid", lwhere,
                        f"`{key}` is not a tensor", "re-save the checkpoint")
    if weight_f.ndim == 1:
        # A 1-D weight is a BatchNorm scale the training flow should have folded.
        raise Ai8xError("checkpoint.unfolded-batchnorm" if op == "bn"
                        else "checkpoint.invalid", lwhere,
                        f"`{key}` is 1-dimensional {weight_f.shape}; the accelerator "
                        "needs 2-D (linear), 3-D (conv1d) or 4-D (conv2d) weights",
                        "fold BatchNorm into the preceding convolution before quantizing "
                        "(vendor: batchnormfuser.py)")
    if weight_f.ndim not in (2, 3, 4):
        raise Ai8xError("checkpoint.invalid", lwhere,
                        f"`{key}` has {weight_f.ndim} dimensions {weight_f.shape}; "
                        "expected 2 (linear), 3 (conv1d) or 4 (conv2d)",
                        "export only layers the accelerator runs")
    if weight_f.size == 0:
        # every later step (weight width, kernel shape, packing) reads the values
        raise Ai8xError("checkpoint.invalid", lwhere,
                        f"`{key}` holds no values (shape {weight_f.shape})",
                        "re-save the checkpoint; a layer needs at least one weight")
    return _integers(weight_f, key, lwhere)


def load_checkpoint(path: str | Path) -> list[CheckpointLayer]:
    """The weight layers of the checkpoint at `path`, in layer order."""
    return list(read_checkpoint(path).layers)

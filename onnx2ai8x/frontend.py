"""The one front end: read -> rewrite -> legalize (issue 24, "one front end, one phase
order").

Every command that takes a model (`convert`, `convert --calibration`, `quantize`,
`check`, `verify --model`) gets its Network here, so a rewrite that makes a model legal
on one path does so on all: the device's limits are checked on the rewritten network,
never before the rewrites (legalize/rewrite.py: an element-wise add fused with a
convolution whose bias comes from a folded BatchNorm becomes a pass-through layer on
the MAX78002 before `limit.eltwise-multipass` could refuse it).

A standard float model is read by the float front end and quantized first
(`onnx2ai8x.quantize`); its quantized ai8x-ONNX then takes the same path as any other
ai8x-ONNX model, and diagnostics name the float model's nodes. After legalization the
silent-loss guard (`quantize.guard`) compares the quantized model with its source.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from .devices import Device
from .errors import Ai8xError
from .legalize.legal import legal_network
from .network import Network


@dataclass(frozen=True)
class QuantizeRequest:
    """How a float model is quantized (the command line's float options)."""

    calibration: Path | None = None
    labels: Path | None = None
    method: str | None = None
    percentile: float | None = None
    weight_bits: Path | None = None
    accept_loss: bool = False  # the guard warns instead of refusing
    # the vendor QAT policy's shift_quantile, which its ONNX export does not record
    shift_quantile: float | None = None
    # the known-answer sample in the source model's own input units (an exact recovery
    # is checked on it; else on the first calibration sample or a fixed one)
    sample: Path | None = None
    # the final operators the accelerator does not compute that something else applies
    # (quantize.check_tail): all with --cpu-tail, a Softmax with --softmax
    tail_applied: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class FrontEnd:
    """A model read, rewritten and checked against one device."""

    model: object | None  # onnxpb.ModelProto: the ai8x-ONNX the network was read from
    read: Network  # as the model describes it
    network: Network  # rewritten and legal for the device (the device recorded)
    notes: tuple[str, ...]  # one line per layer the rewrites inserted
    avg_pool_rounding: str | None  # the model's ai8x.PoolRound mode, if any
    quant: object | None = None  # quantize.ptq.QuantResult for a float model
    warnings: tuple[str, ...] = ()  # e.g. a loss accepted with --accept-loss


def _noop(_: str) -> None:
    return None


def front_end(model, device: Device, *, quantize: QuantizeRequest | None = None,
              onnx_checker: bool = False, step=_noop) -> FrontEnd:
    """`model` read, rewritten and legalized for `device`. `model` is a path, the bytes
    of an ONNX file, a ModelProto (onnx's or onnx2ai8x.onnxpb's) or a Network; nothing
    is written. With `quantize`, `model` is a standard float model that is quantized
    first (and checked by the silent-loss guard); a float model given without it is
    recovered exactly when it is an export of integers, else refused with a request
    for calibration data. A Network has no ONNX model (`FrontEnd.model` is None: the
    driver builds one when it writes a project)."""
    step("read")
    if isinstance(model, Network):
        step("legalize")
        network, notes = legal_network(model, device)
        return FrontEnd(model=None, read=model, network=network, notes=notes,
                        avg_pool_rounding=None)
    proto, quant = _source(model, device, quantize, onnx_checker)
    names = None if quant is None else {r.name: r.nodes for r in quant.layers}
    read = _read(proto, model)
    step("legalize")
    network, notes = legal_network(read.network, device, names)
    warnings: tuple[str, ...] = ()
    if quant is not None:
        from .quantize.guard import check_loss

        accept = quantize is not None and quantize.accept_loss
        warnings = (*quant.warnings, *check_loss(quant, accept=accept,
                                                 where=where_of(model)))
    return FrontEnd(model=proto, read=read.network, network=network, notes=notes,
                    avg_pool_rounding=read.avg_pool_rounding, quant=quant,
                    warnings=warnings)


def is_path(model) -> bool:
    return isinstance(model, (str, Path))


def where_of(model) -> str:
    """How messages name `model`: its path, or "model" for one in memory."""
    return str(model) if is_path(model) else "model"


def target_device(device: str | Device | None, model) -> Device:
    """The device a conversion targets: the one the user names, else the one the model
    names (`ai8x.device` in its metadata, as the ai8x exports, import-izer and the
    quantizer write it). Never a default: the two parts differ in their limits, so a
    model that does not say is refused with the names to choose from."""
    from .devices import DEVICES, get_device
    from .errors import EXIT_USAGE

    if device is not None:
        return get_device(device)
    named = _named_device(model)
    if named is None:
        raise Ai8xError("usage.device", where_of(model),
                        "no target device: the model does not name one (ai8x.device)",
                        f"pass --device ({' or '.join(d.name for d in DEVICES)})",
                        exit_code=EXIT_USAGE)
    try:
        return get_device(named)
    except Ai8xError:
        raise Ai8xError("usage.device", where_of(model),
                        f"the model names the device {named[:40]!r} (ai8x.device), which is "
                        "not one onnx2ai8x targets",
                        f"pass --device ({' or '.join(d.name for d in DEVICES)})",
                        exit_code=EXIT_USAGE) from None


def _named_device(model) -> str | None:
    """`ai8x.device` of a model (a path, bytes, a ModelProto or a Network); None when it
    names none (an unreadable model is reported as such)."""
    if isinstance(model, Network):
        return model.device
    if is_path(model):
        # the metadata alone: the front end decodes the model once, later
        from . import onnxpb

        try:
            named = dict(reversed(onnxpb.read_metadata(model))).get("ai8x.device")
        except (onnxpb.DecodeError, OSError, ValueError):
            named = None  # not well-formed: load_onnx says why
        if named is not None:
            return named
    proto = load_onnx(model)
    for prop in getattr(proto, "metadata_props", ()):
        if prop.key == "ai8x.device":
            return prop.value
    return None


def _source(model, device: Device, quantize: QuantizeRequest | None, onnx_checker: bool):
    """The ai8x-ONNX model to read, and the quantization result when `model` is a float
    model (quantized here)."""
    from . import onnxpb
    from .quantize import is_float_model, quantize_file

    if quantize is None or quantize.calibration is None:
        proto = load_onnx(model, onnx_checker=onnx_checker)
        if not is_float_model(proto):
            return proto, None
        # a standard float model: taken exactly when it holds the accelerator's integers
        # (the vendor's export), else the quantizer asks for calibration data
        quantize = quantize or QuantizeRequest()
    sample = None
    if quantize.sample is not None:
        from .quantize import load_array

        sample = load_array(quantize.sample, "sample input")
    source = Path(model) if is_path(model) else load_onnx(model)
    quant = quantize_file(source, quantize.calibration, method=quantize.method,
                          percentile=quantize.percentile, weight_bits=quantize.weight_bits,
                          labels=quantize.labels, device=device, check=False,
                          shift_quantile=quantize.shift_quantile, sample=sample,
                          tail_applied=quantize.tail_applied)
    return onnxpb.from_onnx(quant.model), quant


def load_onnx(path, *, onnx_checker: bool = False):
    """The model file (or the bytes of one, or a ModelProto) as onnx2ai8x.onnxpb
    messages.

    The convert path does not import onnx (0.15 s of start-up, issue 5): the reader
    checks the graph structure and everything it reads. `onnx_checker` (the `check`
    command) also runs onnx's full checker.
    """
    from . import onnxpb

    try:
        if is_path(path):
            model = onnxpb.load(path)
        elif isinstance(path, bytes | bytearray | memoryview):
            model = onnxpb.decode(bytes(path))
        else:
            model = onnxpb.from_onnx(path)
    except (onnxpb.DecodeError, OSError) as exc:
        raise Ai8xError("model.unreadable", where_of(path),
                        f"not a readable ONNX file ({str(exc).splitlines()[0][:200]})",
                        "export the model with ai8x_torch.export_onnx or onnx2ai8x "
                        "import-izer") from None
    if onnx_checker:
        import onnx

        from custom_ops import onnx_support

        onnx_support()
        try:
            onnx.checker.check_model(onnxpb.to_onnx(model))
        except Exception as exc:  # noqa: BLE001
            raise Ai8xError("model.invalid", where_of(path),
                            f"the ONNX checker rejects the model: "
                            f"{str(exc).splitlines()[0][:300]}",
                            "re-export the model; hand-edited files must stay valid ONNX"
                            ) from None
    return model


def _read(proto, model):
    from .importer.onnx_reader import read_model_full

    try:
        return read_model_full(proto)
    except Ai8xError as exc:  # name the file: the reader knows only nodes and tensors
        if not is_path(model):
            raise
        named = Ai8xError.many([dataclasses.replace(d, where=f"{model}: {d.where}")
                                for d in exc.diagnostics])
        named.exit_code = exc.exit_code
        raise named from None


__all__ = ["FrontEnd", "QuantizeRequest", "front_end", "is_path", "legal_network", "load_onnx",
           "where_of"]

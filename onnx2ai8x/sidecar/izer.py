"""import-izer: a vendor project (sidecar YAML + quantized checkpoint) as ai8x-ONNX.

The sidecar is resolved against the checkpoint exactly as the vendor tool does it
(`onnx2ai8x.sidecar.resolve`), and the resulting Network is written by the one ONNX
builder (`custom_ops.builder`, docs/design.md section 1). Each layer's main node is named
after the sidecar's `name` (or `layer<N>`) and carries the sidecar entry as JSON in its
`ai8x.sidecar` metadata, so `convert` can reproduce the vendor's mapping later.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from ..devices import Device
from ..errors import EXIT_USAGE, Ai8xError
from ..importer.checkpoint import Checkpoint, read_checkpoint
from ..importer.onnx_reader import SKIPPED_KEY
from ..network import Network
from . import Sidecar, parse_file
from .resolve import Resolved, resolve, to_network


def _input_shape(sample: Path | str | Sequence[int] | None, sidecar: Sidecar,
                 checkpoint: Checkpoint) -> tuple[int, ...]:
    if isinstance(sample, str | Path):
        from ..samples import load_sample

        data = load_sample(Path(sample))
        if data.ndim == 2:  # (C, L) 1-D data is held as (C, L, 1)
            data = data[:, :, None]
        if data.ndim != 3:
            raise Ai8xError("usage.bad-input", str(sample),
                            f"the sample has shape {data.shape}; expected (C, H, W), or "
                            "(C, L) / (C, L, 1) for 1-D data",
                            "save the sample without a batch dimension", exit_code=EXIT_USAGE)
        return tuple(data.shape)
    if sample is not None:
        return tuple(int(x) for x in sample)
    # Without a sample the dimensions must come from the sidecar's first layer.
    first = sidecar.layers[0]
    if first.in_dim is None:
        raise Ai8xError("usage.bad-input", sidecar.where(first, "in_dim"),
                        "the input dimensions are unknown: the checkpoint holds no data "
                        "sizes and the first layer has no `in_dim`",
                        "pass --sample <input.npy> (the vendor's sample_<dataset>.npy), or "
                        "give the first layer `in_dim`", exit_code=EXIT_USAGE)
    channels = first.in_channels
    if channels is None and first.operator.has_weights and checkpoint.layers:
        w = checkpoint.layers[0].weight
        channels = w.shape[0] if first.operator.transposed \
            else w.shape[1] * first.conv_groups
        channels *= first.operands
    if channels is None:
        raise Ai8xError("usage.bad-input", sidecar.where(first, "in_channels"),
                        "the input channel count is unknown", "pass --sample <input.npy>",
                        exit_code=EXIT_USAGE)
    return (channels, *first.in_dim)


def resolve_project(config_file: Path | str, checkpoint_file: Path | str, device: Device,
                    input_shape: Path | str | Sequence[int] | None = None) -> Resolved:
    """Parse, load and resolve a vendor project (no ONNX yet)."""
    sidecar = parse_file(config_file)
    checkpoint = read_checkpoint(checkpoint_file)
    shape = _input_shape(input_shape, sidecar, checkpoint)
    return resolve(sidecar, checkpoint.layers, device, shape, checkpoint.arch)


def layer_metadata(resolved: Resolved) -> dict[str, dict[str, str]]:
    """Per main node: the layer's sidecar entry (`ai8x.sidecar`) as canonical JSON."""
    meta = {}
    for lay in resolved.layers:
        mapping = json.loads(lay.sidecar_json)
        # Masks as hex text: JSON readers lose 64-bit integers to floats.
        for key in ("processors", "output_processors"):
            if isinstance(mapping.get(key), int):
                mapping[key] = f"0x{mapping[key]:016x}"
        meta[lay.name] = {"ai8x.sidecar": json.dumps(mapping, sort_keys=True)}
    return meta


def reference_network(resolved: Resolved) -> tuple[Network, tuple[int, ...]]:
    """The Network the imported model computes (its `outputs` the model's output
    layers) and the layers the stated order skips.

    Without `simulated_sequence` that is the sidecar's network, its outputs the
    sidecar's output layers (`output: true`, else the final layer). A sidecar that
    states `simulated_sequence` (seed 004: the order the known answer assumes a MAX78002
    snoop unit takes at run time) makes the model compute what the vendor's known
    answer holds: a layer reached by a jump reads the layer it was reached from, the
    outputs are the stated path's output layers and the layer where it stops, and the
    layers the path never reaches stay in the model (the accelerator holds them) with
    their results unread.
    """
    from ..network import rewire_along
    from ..placement import sequence_walk

    network = to_network(resolved)
    if all(lay.simulated_sequence is None for lay in resolved.layers):
        return network, ()
    path = sequence_walk(resolved.layers, resolved.first_layer_used)
    outputs = tuple(ll for ll in path if resolved.layers[ll].output_layer or ll == path[-1])
    skipped = tuple(ll for ll in range(resolved.first_layer_used, len(resolved.layers))
                    if ll not in path)
    return dataclasses.replace(rewire_along(network, path), outputs=outputs), skipped


def build_onnx(resolved: Resolved, doc: str = ""):
    """The ai8x-ONNX model of a resolved vendor project: the reference_network, each
    layer's sidecar entry as its metadata, a skipped layer marked so (SKIPPED_KEY)."""
    try:
        from custom_ops.builder import build_model
    except ImportError as exc:
        raise Ai8xError("internal.builder-missing", "custom_ops.builder",
                        f"the ai8x-ONNX builder is not available ({exc})",
                        "reinstall onnx2ai8x") from None
    network, skipped = reference_network(resolved)
    meta = layer_metadata(resolved)
    for ll in skipped:
        meta[resolved.layers[ll].name][SKIPPED_KEY] = (
            "the sidecar's simulated_sequence skips this layer; a snoop unit may run it")
    return build_model(network, layer_metadata=meta, doc=doc,
                       outputs=list(network.outputs or ()))


def import_project(config_file: Path | str, checkpoint_file: Path | str, device: Device,
                   input_shape: Path | str | Sequence[int] | None = None):
    """The ai8x-ONNX model (onnx.ModelProto) of a vendor project.

    `input_shape` is a sample .npy path (int64 (C, H, W), or (C, L, 1) for 1-D data, as
    the vendor tool reads it), an explicit shape, or None when the first layer's `in_dim`
    gives it.
    """
    resolved = resolve_project(config_file, checkpoint_file, device, input_shape)
    doc = (f"Imported by onnx2ai8x import-izer from {Path(config_file).name} and "
           f"{Path(checkpoint_file).name} for {resolved.device}.")
    return build_onnx(resolved, doc=doc)


__all__ = ["build_onnx", "import_project", "layer_metadata",
           "reference_network", "resolve_project"]

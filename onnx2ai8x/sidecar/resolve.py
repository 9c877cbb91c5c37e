"""Resolve a sidecar against layer shapes: the vendor tool's per-layer configuration.

Inputs are the parsed sidecar, the weight layers (from a checkpoint, or derived from an
ONNX Network), the device and the input shape. The result (`Resolved`) holds every field
of golden `case.json` `layers`, computed the way the vendor tool computes them
(izer/izer.py and izer/checkpoint.py) so a sidecar means the same here as there; from it
come the `Network` (what to compute) and the `Placement` (where it runs).

Same code path for both front ends:
* import-izer: `network_from_sidecar(sidecar, checkpoint_layers, device, input_shape)`;
* converter `--sidecar`: `resolve_placement(sidecar, network, device)`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from ..devices import Device
from ..errors import Ai8xError
from ..importer.checkpoint import CheckpointLayer
from ..map.hw import multipass, popcount
from ..network import (
    ACTIVATION_NAMES,
    ELTWISE_NAMES,
    ELTWISE_NONE,
    DataBuffer,
    Layer,
    Network,
    Op,
)
from ..placement import BufferPlacement, LayerPlacement, Placement
from .model import DATA_BUFFER, INPUT, Sidecar, SidecarLayer

Pair = tuple[int, int]


@dataclass(frozen=True, eq=False)
class ResolvedLayer:
    """One layer as the vendor tool resolves it (field names as in golden case.json)."""

    name: str
    operator: int
    input_channels: int
    output_channels: int
    input_dim: Pair | None
    pooled_dim: Pair | None
    output_dim: Pair
    kernel_size: Pair
    padding: Pair
    stride: Pair
    dilation: Pair
    conv_groups: int
    pool: Pair
    pool_stride: Pair
    pool_dilation: Pair
    pool_average: bool
    pool_first: bool
    eltwise: int
    operands: int
    activation: int | None
    output_shift: int | None  # final shift incl. the implicit 8 - |weight bits|
    quantization: int  # 1/2/4/8, -1 binary, 0 for layers without weights
    output_width: int
    flatten: bool
    in_sequences: tuple[int, ...] | None
    next_sequence: int
    prev_sequence: int
    processor_map: int
    output_processor_map: int | None
    in_offset: int | None
    out_offset: int
    write_gap: int
    streaming: bool
    big_data: bool
    bypass: bool
    output_layer: bool
    output_padding: Pair
    input_skip: int
    input_channel_skip: int
    input_crop: Pair
    read_ahead: bool
    buffer_shift: int | None
    buffer_insert: int | None
    bias_group_map: tuple[int, ...] | None
    simulated_sequence: int | None
    snoop_sequence: int | None = None
    calcx4: bool = False
    tcalc: bool | None = None
    weights: np.ndarray | None = field(default=None, repr=False)
    bias_hw: np.ndarray | None = field(default=None, repr=False)
    sidecar_json: str = "{}"

    @property
    def operator_name(self) -> str:
        return Op(self.operator).word

    @property
    def eltwise_name(self) -> str:
        return ELTWISE_NAMES[self.eltwise]

    @property
    def activation_name(self) -> str | None:
        return ACTIVATION_NAMES[self.activation]


@dataclass(frozen=True, eq=False)
class Resolved:
    """The resolved configuration of a whole network."""

    device: Device
    input_shape: tuple[int, int, int]  # (C, H, W); 1-D data as (C, L, 1)
    layers: tuple[ResolvedLayer, ...]
    final_layer: int
    first_layer_used: int
    sidecar: Sidecar

    def case_layers(self) -> dict:
        """The configuration in golden case.json `layers` form (lists per field)."""
        out: dict = {}
        skip = {"name", "weights", "bias_hw", "sidecar_json", "snoop_sequence", "calcx4",
                "tcalc"}
        for f in fields(ResolvedLayer):
            if f.name in skip:
                continue
            out[f.name] = [_jsonable(getattr(lay, f.name)) for lay in self.layers]
        out["final_layer"] = self.final_layer
        out["first_layer_used"] = self.first_layer_used
        out["layers"] = len(self.layers)
        out["operator_name"] = [lay.operator_name for lay in self.layers]
        out["eltwise_name"] = [lay.eltwise_name for lay in self.layers]
        out["activation_name"] = [lay.activation_name for lay in self.layers]
        return out


def _jsonable(value: object) -> object:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def _fail(sidecar: Sidecar, lay: SidecarLayer | None, key: str | None, code: str,
          message: str, hint: str = "") -> Ai8xError:
    return Ai8xError(code, sidecar.where(lay, key), message, hint)


def normalize_input_shape(input_shape: Sequence[int]) -> tuple[int, int, int]:
    shape = tuple(int(x) for x in input_shape)
    if len(shape) == 2:  # (C, L) 1-D data is held as (C, L, 1)
        shape = (*shape, 1)
    if len(shape) != 3 or min(shape) < 1:
        raise Ai8xError("usage.bad-input", "input shape",
                        f"the input shape {tuple(input_shape)} is not (C, H, W) or (C, L)",
                        "pass a sample .npy shaped (C, H, W), or (C, L, 1) for 1-D data")
    return shape  # type: ignore[return-value]


def _assign_weights(sidecar: Sidecar, weights: Sequence[CheckpointLayer],
                    lim: Device):
    """Give each weight layer of the sidecar its checkpoint layer (vendor order rules).

    Weight layers are taken in order for the sidecar layers that compute (not passthrough,
    element-wise-only, bypassed or sharing weights via `weight_source`). The vendor tool
    ignores checkpoint layers left over at the end; here they are an error, because a
    sidecar that misses a layer in the middle would otherwise shift every later layer's
    weights onto its neighbour without a word (issue 15).
    """
    n = len(sidecar.layers)
    assigned: list[CheckpointLayer | None] = [None] * n
    quant: list[int | None] = [lay.quantization for lay in sidecar.layers]
    shift: list[int | None] = [lay.output_shift for lay in sidecar.layers]
    in_ch = [0] * n
    out_ch = [0] * n
    needs = [i for i, lay in enumerate(sidecar.layers)
             if lay.operator.has_weights and not lay.bypass and lay.weight_source is None]
    _check_weight_count(sidecar, weights, needs)
    for i, ck in zip(needs, weights, strict=False):
        lay = sidecar.layers[i]
        q = _weight_bits(sidecar, lay, ck, quant[i], lim)
        quant[i] = q
        _check_kernel_shape(sidecar, lay, ck)
        in_ch[i], out_ch[i] = _weight_channels(sidecar, lay, ck)
        if shift[i] is None:
            shift[i] = ck.output_shift
        # Narrow weights get an implicit extra shift (seed 004, `output_shift` table).
        shift[i] = shift[i] + 8 - abs(q)
        assigned[i] = ck
    for i, lay in enumerate(sidecar.layers):
        src = lay.weight_source
        if src is None or lay.operator.passthrough or lay.bypass:
            continue
        if not 0 <= src < n or assigned[src] is None or sidecar.layers[src].weight_source \
                is not None:
            raise _fail(sidecar, lay, "weight_source", "sidecar.reference",
                        f"`weight_source` {src} is not a layer with its own weights",
                        "name a layer listed earlier that has weights")
        assigned[i] = assigned[src]
        in_ch[i], out_ch[i] = in_ch[src], out_ch[src]
        shift[i] = shift[src]
    return assigned, quant, shift, in_ch, out_ch


def _check_weight_count(sidecar: Sidecar, weights: Sequence[CheckpointLayer],
                        needs: list[int]) -> None:
    """As many checkpoint weight layers as sidecar layers that need weights."""
    if len(weights) < len(needs):
        lay = sidecar.layers[needs[len(weights)]]
        raise _fail(sidecar, lay, None, "sidecar.layer-count",
                    f"the sidecar has {len(needs)} layers with weights, but the checkpoint "
                    f"has only {len(weights)} weight layers; nothing is left for this layer",
                    "check that the sidecar describes the checkpoint's model (one entry per "
                    "Conv/Linear module, passthrough and element-wise layers have none)")
    if len(weights) > len(needs):
        extra = ", ".join(f"`{ck.name}`" for ck in weights[len(needs):][:8])
        raise Ai8xError("sidecar.layer-count", sidecar.source,
                        f"the checkpoint has {len(weights)} weight layers but the sidecar "
                        f"gives only {len(needs)} layers with weights; left over: {extra}",
                        "add an entry for every Conv/Linear module of the model to the "
                        "sidecar, in the model's order")


def _weight_bits(sidecar: Sidecar, lay, ck: CheckpointLayer, q: int | None,
                 lim: Device) -> int:
    """The layer's weight bits (-1: binary): the sidecar's `quantization`, checked
    against the weights, else what the weights need."""
    w = ck.weight
    where_ck = f"checkpoint layer `{ck.name}`"
    if not w.size:  # nothing to take a width (or a range for the messages) from
        raise _fail(sidecar, lay, None, "sidecar.weights",
                    f"{where_ck} has no weights (shape {tuple(w.shape)})",
                    "export the layer with its weights")
    absw = np.abs(w)
    if q is not None:
        if q == -1:
            if not (w.size and absw.min() == absw.max() == 1):
                raise _fail(sidecar, lay, "quantization", "sidecar.quantization",
                            f"`quantization: binary` needs weights of -1/+1, but "
                            f"{where_ck} holds values in [{w.min()}, {w.max()}]",
                            "remove `quantization` or re-train with binary weights")
        elif w.size and (w.min() < -(2 ** (q - 1)) or w.max() >= 2 ** (q - 1)):
            raise _fail(sidecar, lay, "quantization", "sidecar.quantization",
                        f"`quantization: {q}` holds [{-(2 ** (q - 1))}, {2 ** (q - 1) - 1}]"
                        f", but {where_ck} has weights in [{w.min()}, {w.max()}]",
                        f"remove `quantization` (the checkpoint says {ck.weight_bits} "
                        "bits) or re-quantize")
        return q
    if lim.binary_weights and w.size and absw.min() == absw.max() == 1:
        return -1  # weights of only -1/+1 use binary mode where the device has it
    if not np.any(w):
        return 1  # all-zero weights need one bit
    return ck.weight_bits or 8


def _check_kernel_shape(sidecar: Sidecar, lay, ck: CheckpointLayer) -> None:
    """The sidecar's kernel size matches the checkpoint weights' shape."""
    w = ck.weight
    kernel = lay.kernel_size
    if w.ndim == 2 and kernel != (1, 1):
        bad = "1x1"
    elif w.ndim == 3 and kernel != (w.shape[2], 1):
        bad = f"{w.shape[2]}"
    elif w.ndim == 4 and kernel != (w.shape[2], w.shape[3]):
        bad = f"{w.shape[2]}x{w.shape[3]}"
    else:
        return
    given = f"{kernel[0]}x{kernel[1]}"
    raise _fail(sidecar, lay, "kernel_size", "sidecar.kernel-mismatch",
                f"the sidecar's kernel is {given}, but checkpoint layer `{ck.name}` has "
                f"{w.ndim}-D weights {tuple(w.shape)} (kernel {bad})",
                f"set `kernel_size: {bad}` and check the `operation`"
                if w.ndim > 2 else "use `op: linear` (MLP) for this layer")


def _weight_channels(sidecar: Sidecar, lay, ck: CheckpointLayer) -> tuple[int, int]:
    """(input, output) channels the layer's weights give."""
    w = ck.weight
    groups = lay.conv_groups
    if lay.operator.transposed:
        if w.ndim != 4:
            raise _fail(sidecar, lay, "operation", "sidecar.checkpoint-mismatch",
                        f"ConvTranspose2d needs 4-D weights, checkpoint layer `{ck.name}` "
                        f"has {tuple(w.shape)}", "check the layer's `operation`")
        return w.shape[0], w.shape[1] * groups  # stored (in, out/groups, kh, kw)
    return w.shape[1] * groups, w.shape[0]


@dataclass(eq=False)
class _Walk:
    """The working state of one `resolve` call: per layer, what the phases have worked
    out so far (the vendor tool's two walks over the sequence links). Lives only inside
    `resolve`."""

    sidecar: Sidecar
    lim: Device
    shape: tuple[int, int, int]
    assigned: list
    quant: list
    shift: list
    in_ch: list[int]
    out_ch: list[int]
    weight_in: list[int]  # input channels the weights expect (linear: in_features)
    arriving: list[int]  # channels the data flow delivers to each layer
    next_seq: list[int]
    prev_seq: list[int]
    out_map: list[int | None]
    output_layer: list[bool]
    in_dim: list[Pair | None]
    auto_dim: list[Pair | None]
    pooled: list[Pair | None]
    out_dim: list[Pair]
    in_off: list[int | None]
    pools: list[Pair]
    visited: list[int] = field(default_factory=list)
    final_layer: int | None = None
    count: int = 0

    @property
    def layers(self) -> list[SidecarLayer]:
        return self.sidecar.layers

    @property
    def n(self) -> int:
        return len(self.sidecar.layers)


def resolve(sidecar: Sidecar, weights: Sequence[CheckpointLayer], device: Device,
            input_shape: Sequence[int], checkpoint_arch: str | None = None) -> Resolved:
    """The vendor tool's resolved configuration for `sidecar` with these weights."""
    shape = normalize_input_shape(input_shape)
    layers = sidecar.layers
    n = len(layers)
    if checkpoint_arch and sidecar.arch.lower() != checkpoint_arch.lower():
        raise _fail(sidecar, None, "arch", "sidecar.arch-mismatch",
                    f"the sidecar is for `{sidecar.arch}`, the checkpoint for "
                    f"`{checkpoint_arch}`", "pass the matching sidecar and checkpoint, or "
                    f"set `arch: {checkpoint_arch}`")
    if n > device.max_layers:
        raise _fail(sidecar, layers[device.max_layers], None, "sidecar.device",
                    f"{device.name} runs at most {device.max_layers} layers; the sidecar has {n}",
                    "merge layers or use a MAX78002")
    _check_layer_keys(sidecar, device)
    assigned, quant, shift, in_ch, out_ch = _assign_weights(sidecar, weights, device)
    w = _Walk(
        sidecar=sidecar, lim=device, shape=shape, assigned=assigned, quant=quant, shift=shift,
        in_ch=in_ch, out_ch=out_ch, weight_in=list(in_ch), arriving=[0] * n,
        next_seq=[lay.next_sequence if lay.next_sequence is not None else
                  (i + 1 if i < n - 1 else -1) for i, lay in enumerate(layers)],
        prev_seq=[-1] * n, out_map=[lay.output_processors for lay in layers],
        output_layer=[lay.output for lay in layers], in_dim=[None] * n,
        auto_dim=[None] * n, pooled=[None] * n, out_dim=[(0, 0)] * n,
        in_off=[lay.in_offset for lay in layers], pools=[lay.pool for lay in layers])
    _walk_sequence(w)
    _final_output(w)
    _walk_dimensions(w)
    _check_weights_match(w)
    _check_processors(w)
    _check_layer_values(w)
    return Resolved(device=device, input_shape=shape, layers=_resolved_layers(w),
                    final_layer=w.final_layer, first_layer_used=min(w.visited),
                    sidecar=sidecar)


def _check_layer_keys(sidecar: Sidecar, lim: Device) -> None:
    """Each layer's keys against the device and the layer count (before any walk)."""
    layers = sidecar.layers
    n = len(layers)
    for lay in layers:
        if not 0 <= lay.out_offset < lim.data_instance_bytes:
            raise _fail(sidecar, lay, "out_offset", "sidecar.value",
                        f"`out_offset` {lay.out_offset:#x} is outside data memory "
                        f"(0 to {lim.data_instance_bytes - 1:#x} on {lim.name})",
                        "use an offset inside the memory instance")
        if lay.in_offset is not None and not 0 <= lay.in_offset < lim.data_instance_bytes:
            raise _fail(sidecar, lay, "in_offset", "sidecar.value",
                        f"`in_offset` {lay.in_offset:#x} is outside data memory "
                        f"(0 to {lim.data_instance_bytes - 1:#x} on {lim.name})",
                        "use an offset inside the memory instance")
        if lay.quantization == -1 and not lim.binary_weights:
            raise _fail(sidecar, lay, "quantization", "sidecar.device",
                        f"binary weights are not supported on {lim.name}",
                        "use `quantization: 1` or target the MAX78002")
        if lay.conv_groups > 1 and not lim.depthwise:
            raise _fail(sidecar, lay, "groups", "sidecar.device",
                        f"grouped (depthwise) convolutions are not supported on {lim.name}",
                        "use `groups: 1` or target the MAX78002")
        for key, seq in (("next_sequence", lay.next_sequence),
                         ("weight_source", lay.weight_source),
                         ("simulated_sequence", lay.simulated_sequence)):
            if seq is not None and not -1 <= seq < n + 1:
                raise _fail(sidecar, lay, key, "sidecar.reference",
                            f"`{key}` is {seq}, but the layers are numbered 0 to {n - 1}",
                            "use a layer number, a layer `name`, or `stop`")
        for seq in lay.in_sequences or ():
            if seq not in (INPUT, DATA_BUFFER) and not 0 <= seq < n:
                raise _fail(sidecar, lay, "in_sequences", "sidecar.reference",
                            f"`in_sequences` refers to layer {seq}, but the layers are "
                            f"numbered 0 to {n - 1}", "use an existing layer, or -1/input")
            if seq == DATA_BUFFER and not sidecar.data_buffer:
                raise _fail(sidecar, lay, "in_sequences", "sidecar.reference",
                            "`in_sequences` names a data buffer that is not defined",
                            "add a global `data_buffer`")


def _walk_sequence(w: _Walk) -> None:
    """First walk along the sequence links (vendor izer.py): channels, links, processor
    maps; stops at the final layer."""
    sidecar, lim, layers, n, shape, in_ch = w.sidecar, w.lim, w.layers, w.n, w.shape, w.in_ch
    out_ch, next_seq, prev_seq, out_map = w.out_ch, w.next_seq, w.prev_seq, w.out_map
    visited, arriving = w.visited, w.arriving
    prev = -1
    ll = 0
    while ll < n:
        lay = layers[ll]
        if ll in visited:
            raise _fail(sidecar, lay, "next_sequence", "sidecar.sequence",
                        "the `next_sequence` links run in a circle",
                        "end the chain with `next_sequence: stop`")
        seqs = lay.in_sequences
        if seqs is not None:
            chans = []
            for e in seqs:
                if e == INPUT:
                    chans.append(shape[0])
                elif e == DATA_BUFFER:
                    chans.append(sidecar.data_buffer[0].channels)
                elif e not in visited:
                    raise _fail(sidecar, lay, "in_sequences", "sidecar.sequence",
                                f"`in_sequences` uses layer {e}, which has not run yet",
                                "only earlier layers' outputs (or -1/input) can be inputs")
                else:
                    chans.append(out_ch[e])
            # The vendor tool requires equal channel counts for concatenation too.
            if any(c != chans[0] for c in chans):
                what = "element-wise" if lay.eltwise != ELTWISE_NONE else "concatenated"
                raise _fail(sidecar, lay, "in_sequences", "sidecar.channels",
                            f"the {what} inputs have different channel counts "
                            f"({', '.join(map(str, chans))})",
                            "all inputs listed in `in_sequences` need the same channel count")
            if lay.eltwise == ELTWISE_NONE:
                in_ch[ll] = sum(chans)  # concatenation on the channel axis
            else:
                in_ch[ll] = chans[0]
            arriving[ll] = in_ch[ll]
        else:
            arriving[ll] = shape[0] // lay.operands if prev == -1 else out_ch[prev]
        if in_ch[ll] <= 0:
            in_ch[ll] = shape[0] // lay.operands if ll == 0 else out_ch[prev]
        if lay.in_channels is not None:
            in_ch[ll] = lay.in_channels
        if out_ch[ll] <= 0:
            out_ch[ll] = in_ch[ll]
        if lay.out_channels is not None:
            out_ch[ll] = lay.out_channels
        if out_map[ll] is None and next_seq[ll] != -1 and next_seq[ll] < n:
            out_map[ll] = layers[next_seq[ll]].processors
        prev_seq[ll] = prev
        prev = ll
        visited.append(ll)
        if next_seq[ll] not in (-1, ll + 1) and not lim.link_layer:
            raise _fail(sidecar, lay, "next_sequence", "sidecar.device",
                        f"{lim.name} runs layers in order; `next_sequence` cannot jump",
                        "remove `next_sequence` or target the MAX78002")
        if next_seq[ll] > n:
            next_seq[ll] = -1
        if next_seq[ll] == -1:
            w.final_layer = ll
            break
        ll = next_seq[ll]


def _final_output(w: _Walk) -> None:
    """The final layer's output map and which layers are outputs."""
    sidecar, out_ch, out_map, output_layer = w.sidecar, w.out_ch, w.out_map, w.output_layer
    w.count = max(w.visited) + 1
    if w.final_layer is None:
        w.final_layer = max(w.visited)
    final_layer = w.final_layer
    if sidecar.output_map is not None:
        out_map[final_layer] = sidecar.output_map
    elif out_map[final_layer] is None:
        # default: packed output starting at processor 0
        _, per_pass = multipass(out_ch[final_layer])
        out_map[final_layer] = 2 ** per_pass - 1
    if not any(output_layer[:w.count]):
        output_layer[final_layer] = True


def _walk_dimensions(w: _Walk) -> None:
    """Second walk (vendor izer.py): input, pooled and output dimensions per layer."""
    layers, shape, quant, next_seq, in_dim = w.layers, w.shape, w.quant, w.next_seq, w.in_dim
    auto_dim, in_off = w.auto_dim, w.in_off
    for i, q in enumerate(quant):
        if q is None:
            lay = layers[i]
            quant[i] = 8 if not lay.bypass and lay.operator.has_weights else 0
    auto_dim[0] = (shape[1], shape[2])
    in_dim[0] = layers[0].in_dim or auto_dim[0]
    if in_off[0] is None:
        in_off[0] = 0
    ll = 0
    while ll < w.count:
        _input_dim(w, ll)
        _output_dim(w, ll)
        ll = next_seq[ll]
        if ll == -1:
            break


def _input_dim(w: _Walk, ll: int) -> None:
    """Layer `ll`'s input offset and dimensions (from its inputs, or `in_dim`)."""
    sidecar, layers, prev_seq, in_dim = w.sidecar, w.layers, w.prev_seq, w.in_dim
    auto_dim, out_dim, in_off = w.auto_dim, w.out_dim, w.in_off
    lay = layers[ll]
    if ll != 0:
        p = prev_seq[ll]
        if in_off[ll] is None:
            in_off[ll] = layers[p].out_offset
        if lay.streaming and not layers[p].streaming:
            raise _fail(sidecar, lay, "streaming", "sidecar.streaming",
                        f"this layer streams but the layer before it ({p}) does not",
                        "set `streaming: true` on every layer up to this one")
        if lay.big_data:
            raise _fail(sidecar, lay, "data_format", "sidecar.value",
                        "`data_format: CHW` is only possible for the first layer",
                        "remove `data_format` here")
    if in_dim[ll] is None:
        pixels = 0
        seqs = lay.in_sequences
        if seqs is not None:
            def dim_of(e: int) -> Pair:
                if e == INPUT:
                    return auto_dim[0]  # type: ignore[return-value]
                if e == DATA_BUFFER:
                    return sidecar.data_buffer[0].dim
                return out_dim[e]
            first = dim_of(seqs[0])
            for e in seqs:
                d = dim_of(e)
                if d != first and lay.in_dim is None:
                    raise _fail(sidecar, lay, "in_sequences", "sidecar.dimension",
                                f"the inputs have different dimensions ({first[0]}x"
                                f"{first[1]} and {d[0]}x{d[1]})",
                                "concatenate equal-sized data, or give `in_dim`")
                pixels += d[0] * d[1]
            if lay.buffer_shift and tuple(seqs) == (DATA_BUFFER,):
                # a shift layer reads the positions after the first `buffer_shift`
                # (seed 000, Rolling Buffers: `in_dim: 14` of a 15-position buffer)
                pixels -= (lay.buffer_shift or 0) * first[1]
            auto_dim[ll] = first
        else:
            auto_dim[ll] = out_dim[prev_seq[ll]]
        if lay.in_dim is None:
            in_dim[ll] = auto_dim[ll]
        else:
            conf = lay.in_dim
            count_px = (conf[0] + lay.in_crop[0] + lay.in_crop[1]) * conf[1]
            if pixels > 0 and count_px != pixels:
                raise _fail(sidecar, lay, "in_dim", "sidecar.dimension",
                            f"`in_dim` {conf[0]}x{conf[1]} (plus `in_crop`) has {count_px} "
                            f"pixels, the inputs have {pixels}",
                            "make `in_dim` hold the same number of pixels")
            in_dim[ll] = conf


def pools_in_two_d(op: Op, in_dim: tuple[int, int]) -> bool:
    """Whether a layer pools (and strides) in both dimensions: a 1-D convolution never
    does, and neither does a layer without weights on 1-D data (input width 1), whose
    pool the vendor's tool reads as POOLx1 whatever the sidecar's second number is
    (izer.py, pooled_size)."""
    return not op.one_d and (op.has_weights or in_dim[1] != 1)


def _output_dim(w: _Walk, ll: int) -> None:
    """Layer `ll`'s pooled and output dimensions, with the geometry checks."""
    sidecar, lim, layers, in_ch, in_dim = w.sidecar, w.lim, w.layers, w.in_ch, w.in_dim
    pooled, out_dim, pools = w.pooled, w.out_dim, w.pools
    lay = layers[ll]
    idim = in_dim[ll]
    assert idim is not None
    op = lay.operator
    ps, pd = lay.pool_stride, lay.pool_dilation
    pool = pools[ll]
    two_d = pools_in_two_d(op, idim)
    if two_d:
        if ps[0] != ps[1]:
            raise _fail(sidecar, lay, "pool_stride", "sidecar.value",
                        f"{op.word} needs a square pool stride, not "
                        f"{ps[0]}x{ps[1]}", "give one number for `pool_stride`")
        pdim = ((idim[0] + ps[0] - pool[0] - pd[0] + 1) // ps[0],
                (idim[1] + ps[1] - pool[1] - pd[1] + 1) // ps[1])
    else:
        pool = (pool[0], 1)
        pools[ll] = pool
        pdim = ((idim[0] + ps[0] - pool[0] - pd[0] + 1) // ps[0], 1)
    pooled[ll] = pdim
    if min(pdim) <= 0:
        raise _fail(sidecar, lay, "max_pool" if not lay.pool_average else "avg_pool",
                    "sidecar.dimension",
                    f"pooling {pool[0]}x{pool[1]} (stride {ps[0]}) leaves nothing of the "
                    f"{idim[0]}x{idim[1]} input", "use a smaller pool or stride")
    k, pad, st, dil = lay.kernel_size, lay.padding, lay.stride, lay.dilation
    if two_d:
        if st[0] != st[1]:
            raise _fail(sidecar, lay, "stride", "sidecar.value",
                        "the stride must be the same in both dimensions")
        if not op.transposed and st[0] != 1:
            raise _fail(sidecar, lay, "stride", "sidecar.value",
                        f"{op.word} supports stride 1 only (got {st[0]})",
                        "downsample with `pool_stride` (pooling 1x1 with a stride)")
        if op.transposed:
            odim = tuple((pdim[a] - 1) * st[a] - 2 * pad[a] + dil[a] * (k[a] - 1)
                         + lay.output_padding[a] + 1 for a in (0, 1))
        else:
            odim = tuple((pdim[a] - dil[a] * (k[a] - 1) - 1 + 2 * pad[a]) // st[a] + 1
                         for a in (0, 1))
        if lay.flatten:
            if op.passthrough or pool != (1, 1):
                raise _fail(sidecar, lay, "flatten", "sidecar.value",
                            "`flatten` cannot be combined with pooling or a passthrough "
                            "layer", "pool in the layer before, or remove `flatten`")
            px = pdim[0] * pdim[1]
            if px > lim.flatten_pixels_max:
                raise _fail(sidecar, lay, "flatten", "sidecar.dimension",
                            f"`flatten` takes at most {lim.flatten_pixels_max} pixels, the "
                            f"input is {pdim[0]}x{pdim[1]} = {px}",
                            "pool further before flattening")
            odim = (1, 1)
            in_ch[ll] //= px
            if in_ch[ll] <= 0:
                raise _fail(sidecar, lay, "flatten", "sidecar.channels",
                            "flattening leaves no input channels", "check `in_channels`")
    else:
        if st[0] != 1:
            raise _fail(sidecar, lay, "stride", "sidecar.value",
                        f"1-D layers support stride 1 only (got {st[0]})",
                        "downsample with `pool_stride`")
        odim = ((pdim[0] - dil[0] * (k[0] - 1) - 1 + 2 * pad[0]) // st[0] + 1, 1)
    if pad[0] >= 3:
        raise _fail(sidecar, lay, "pad", "sidecar.value",
                    f"`pad` {pad[0]} is not supported (0, 1 or 2)", "use `pad` 0 to 2")
    if op.passthrough and (pad[0] > 0 or pad[1] > 0):
        raise _fail(sidecar, lay, "pad", "sidecar.value",
                    "padding needs a convolution; this layer has none", "set `pad: 0`")
    if pad[0] >= k[0] or pad[1] >= k[1]:
        raise _fail(sidecar, lay, "pad", "sidecar.value",
                    f"`pad` {pad[0]} must be smaller than the kernel ({k[0]}x{k[1]})",
                    "use a smaller `pad` (1x1 kernels take `pad: 0`)")
    for what, d in (("input", idim), ("output", odim)):
        if max(d) > lim.max_dim:
            raise _fail(sidecar, lay, "in_dim", "sidecar.dimension",
                        f"the {what} {d[0]}x{d[1]} exceeds {lim.max_dim} rows/columns "
                        f"on {lim.name}", "reduce the data size or use streaming")
    if min(odim) <= 0:
        raise _fail(sidecar, lay, "kernel_size", "sidecar.dimension",
                    f"the output of the {pdim[0]}x{pdim[1]} data is empty "
                    f"(kernel {k[0]}x{k[1]}, pad {pad[0]})",
                    "use a smaller kernel or more padding")
    out_dim[ll] = odim  # type: ignore[assignment]
    if lay.activation is not None and op.passthrough:
        raise _fail(sidecar, lay, "activate", "sidecar.value",
                    "a passthrough layer cannot have an activation",
                    "remove `activate`, or give the layer a convolution")
    if lay.buffer_shift is not None and op.has_weights:
        raise _fail(sidecar, lay, "buffer_shift", "sidecar.value",
                    "`buffer_shift` works in passthrough layers only",
                    "set `operation: passthrough`")


def _check_weights_match(w: _Walk) -> None:
    sidecar, layers, assigned, visited = w.sidecar, w.layers, w.assigned, w.visited
    pooled, arriving, weight_in = w.pooled, w.arriving, w.weight_in
    # Sidecar and checkpoint must agree on the data flowing into each weight layer (the
    # vendor tool does not check this and computes garbage when they disagree).
    for ll in visited:
        lay = layers[ll]
        if assigned[ll] is None or lay.in_channels is not None:
            continue
        pdim = pooled[ll] or (1, 1)
        expect = arriving[ll] * (pdim[0] * pdim[1] if lay.flatten else 1)
        if weight_in[ll] != expect:
            src = "in_sequences" if lay.in_sequences is not None else None
            came = f"{arriving[ll]} channels" + (f" x {pdim[0]}x{pdim[1]} pixels (flatten)"
                                                  if lay.flatten else "")
            raise _fail(sidecar, lay, src, "sidecar.channels",
                        f"the checkpoint layer `{assigned[ll].name}` expects {weight_in[ll]} "
                        f"inputs, but {came} arrive here",
                        "check the layer order, `in_sequences` and `flatten` against the "
                        "model, or set `in_channels`")


def _check_processors(w: _Walk) -> None:
    sidecar, layers, in_ch, visited = w.sidecar, w.layers, w.in_ch, w.visited
    # --- checks the vendor tool makes when it lays out the network ---
    # Input maps first: an output map defaults to the next layer's input map, so a wrong
    # `processors` is reported where it was written.
    for ll in visited:
        lay = layers[ll]
        passes, per_pass = multipass(in_ch[ll])
        if popcount(lay.processors) != per_pass:
            raise _fail(sidecar, lay, "processors", "sidecar.processors",
                        f"{in_ch[ll]} input channels need {per_pass} processors per pass "
                        f"({passes} pass{'es' if passes > 1 else ''}), but `processors` "
                        f"{lay.processors:#018x} enables {popcount(lay.processors)}",
                        f"enable exactly {per_pass} processors")


def _check_layer_values(w: _Walk) -> None:
    """Output shift, output map and groups of every layer run."""
    sidecar, layers, in_ch, out_ch, quant = w.sidecar, w.layers, w.in_ch, w.out_ch, w.quant
    shift, next_seq, out_map, visited = w.shift, w.next_seq, w.out_map, w.visited
    for ll in range(w.count):
        if ll not in visited:
            continue
        lay = layers[ll]
        q = quant[ll]
        if lay.operator.has_weights and not lay.bypass:
            s = shift[ll]
            if s is not None and not -15 <= s <= 15:
                implicit = 8 - abs(q)
                raise _fail(sidecar, lay, "output_shift", "sidecar.value",
                            f"{abs(q)}-bit weights allow `output_shift` {-15 - implicit} to "
                            f"{15 - implicit}; this layer's is {s - implicit}",
                            "choose a shift in that range (the implicit shift is "
                            f"{implicit})")
        elif lay.operator == Op.NONE and shift[ll]:
            raise _fail(sidecar, lay, "output_shift", "sidecar.value",
                        "a passthrough layer cannot shift its output",
                        "remove `output_shift`")
        omap = out_map[ll]
        passes, per_pass = multipass(out_ch[ll])
        if omap is not None and popcount(omap) != per_pass:
            key = "output_processors" if lay.output_processors is not None else "processors"
            target = layers[ll] if lay.output_processors is not None or \
                next_seq[ll] in (-1,) else layers[next_seq[ll]]
            raise _fail(sidecar, target, key, "sidecar.processors",
                        f"layer {ll} writes {out_ch[ll]} output channels, which need "
                        f"{per_pass} processors per pass, but its output map "
                        f"{omap:#018x} enables {popcount(omap)}",
                        f"enable exactly {per_pass} output processors")
        if lay.operator == Op.NONE and omap is not None and lay.processors:
            _check_packed_passthrough(sidecar, lay, lay.processors, omap)
        if lay.conv_groups > 1 and (lay.conv_groups != in_ch[ll]
                                    or lay.conv_groups != out_ch[ll]):
            raise _fail(sidecar, lay, "groups", "sidecar.value",
                        f"`groups` {lay.conv_groups} must equal the input channels "
                        f"({in_ch[ll]}) and output channels ({out_ch[ll]}) (depthwise only)",
                        f"use `groups: {in_ch[ll]}` or `groups: 1`")


def _check_packed_passthrough(sidecar: Sidecar, lay, processors: int, omap: int) -> None:
    """A layer without a convolution (pass-through, pooling-only, element-wise) writes
    its quadrant's enabled processors in turn, packed: in each quadrant its output
    processors are as many contiguous processors as it has input processors there (the
    vendor tool refuses any other map; a project written for one would not give its
    known answer)."""
    for g in range(4):
        n = popcount(processors >> 16 * g & 0xFFFF)
        out = omap >> 16 * g & 0xFFFF
        if out:
            out //= out & -out
        if out != (1 << n) - 1:
            raise _fail(sidecar, lay, "output_processors", "sidecar.processors",
                        f"a layer without a convolution writes each quadrant's input "
                        f"processors packed, but quadrant {g} has {n} input processor"
                        f"{'s' if n != 1 else ''} ({processors:#018x}) and output map "
                        f"{omap:#018x}",
                        f"give quadrant {g} {n} contiguous output processors")


def _resolved_layers(w: _Walk) -> tuple[ResolvedLayer, ...]:
    """One ResolvedLayer per layer up to the last one run; names must stay unique."""
    sidecar, layers, in_ch, out_ch, quant = w.sidecar, w.layers, w.in_ch, w.out_ch, w.quant
    shift, assigned, next_seq, prev_seq = w.shift, w.assigned, w.next_seq, w.prev_seq
    out_map, in_dim, pooled, out_dim, in_off = w.out_map, w.in_dim, w.pooled, w.out_dim, w.in_off
    pools, output_layer, count = w.pools, w.output_layer, w.count
    resolved = []
    for i in range(count):
        lay = layers[i]
        ck = assigned[i]
        resolved.append(ResolvedLayer(
            name=lay.name or f"layer{i}", operator=lay.operator, input_channels=in_ch[i],
            output_channels=out_ch[i], input_dim=in_dim[i], pooled_dim=pooled[i],
            output_dim=out_dim[i], kernel_size=lay.kernel_size, padding=lay.padding,
            stride=lay.stride, dilation=lay.dilation, conv_groups=lay.conv_groups,
            pool=pools[i], pool_stride=lay.pool_stride, pool_dilation=lay.pool_dilation,
            pool_average=lay.pool_average, pool_first=lay.pool_first, eltwise=lay.eltwise,
            operands=lay.operands, activation=lay.activation, output_shift=shift[i],
            quantization=quant[i], output_width=lay.output_width, flatten=lay.flatten,
            in_sequences=lay.in_sequences, next_sequence=next_seq[i],
            prev_sequence=prev_seq[i], processor_map=lay.processors,
            output_processor_map=out_map[i], in_offset=in_off[i], out_offset=lay.out_offset,
            write_gap=lay.write_gap, streaming=lay.streaming, big_data=lay.big_data,
            bypass=lay.bypass, output_layer=output_layer[i],
            output_padding=lay.output_padding, input_skip=lay.read_gap,
            input_channel_skip=lay.in_channel_skip, input_crop=lay.in_crop,
            read_ahead=lay.readahead, buffer_shift=lay.buffer_shift,
            buffer_insert=lay.buffer_insert, bias_group_map=lay.bias_group,
            simulated_sequence=lay.simulated_sequence, snoop_sequence=lay.snoop_sequence,
            calcx4=lay.calcx4, tcalc=lay.tcalc,
            weights=None if ck is None else ck.weight,
            bias_hw=None if ck is None else ck.bias_hw, sidecar_json=lay.raw))
    names = [lay.name for lay in resolved]
    for i, lay in enumerate(resolved):
        if names.index(lay.name) != i:
            raise _fail(sidecar, layers[i], "name", "sidecar.duplicate",
                        f"the layer name `{lay.name}` is also the default name of another "
                        "layer (unnamed layers are called layer<N>)",
                        "choose a name that is not layer<N>")
    return tuple(resolved)


def to_network(resolved: Resolved) -> Network:
    """The Network (what to compute) of a resolved configuration."""
    out = []
    for i, lay in enumerate(resolved.layers):
        seqs = lay.in_sequences
        if seqs is None and lay.prev_sequence != i - 1:
            # a MAX78002 `next_sequence` jump: the input is the layer that ran before
            seqs = (lay.prev_sequence,)
        out.append(Layer(
            name=lay.name, operator=lay.operator, input_channels=lay.input_channels,
            output_channels=lay.output_channels, input_dim=lay.input_dim or (0, 0),
            pooled_dim=lay.pooled_dim or (0, 0), output_dim=lay.output_dim,
            kernel_size=lay.kernel_size, padding=lay.padding, stride=lay.stride,
            dilation=lay.dilation, conv_groups=lay.conv_groups, pool=lay.pool,
            pool_stride=lay.pool_stride, pool_dilation=lay.pool_dilation,
            pool_average=lay.pool_average, pool_first=lay.pool_first, eltwise=lay.eltwise,
            operands=lay.operands, activation=lay.activation,
            output_shift=lay.output_shift or 0, quantization=lay.quantization,
            output_width=lay.output_width, flatten=lay.flatten,
            output_padding=lay.output_padding, in_sequences=seqs,
            buffer_shift=lay.buffer_shift or 0, buffer_insert=lay.buffer_insert or 0,
            weights=lay.weights,
            bias=None if lay.bias_hw is None else lay.bias_hw * 128,
            bias_hw=lay.bias_hw))
    c, h, w = resolved.input_shape
    first = resolved.layers[resolved.first_layer_used]
    one_d = w == 1 and first.operator.one_d
    outputs = tuple(i for i, lay in enumerate(resolved.layers) if lay.output_layer)
    buffers = resolved.sidecar.data_buffer
    data_buffer = None
    if buffers:
        # the vendor keeps one buffer (izer reads data_buffer[0]); its `dim` is the
        # positions (x a second dimension for 2-D data)
        b = buffers[0]
        data_buffer = DataBuffer(b.name, b.channels, b.dim[0] * b.dim[1])
    return Network(layers=tuple(out), input_shape=(c, h) if one_d else (c, h, w),
                   device=resolved.device.name, name=resolved.sidecar.arch,
                   outputs=outputs or None, data_buffer=data_buffer)


def to_placement(resolved: Resolved, network: Network | None = None) -> Placement:
    """The Placement (where it runs) of a resolved configuration."""
    network = network or to_network(resolved)
    out = []
    for lay in resolved.layers:
        extra: list[tuple[str, object]] = []
        if lay.snoop_sequence is not None:
            extra.append(("snoop_sequence", lay.snoop_sequence))
        if lay.calcx4:
            extra.append(("calcx4", True))
        if lay.tcalc is not None:
            extra.append(("tcalc", lay.tcalc))
        out.append(LayerPlacement(
            processor_map=lay.processor_map,
            output_processor_map=lay.output_processor_map or 0,
            in_offset=lay.in_offset or 0, out_offset=lay.out_offset,
            write_gap=lay.write_gap, streaming=lay.streaming, big_data=lay.big_data,
            bypass=lay.bypass, output_layer=lay.output_layer,
            next_sequence=lay.next_sequence, prev_sequence=lay.prev_sequence,
            in_sequences=lay.in_sequences, input_skip=lay.input_skip,
            input_channel_skip=lay.input_channel_skip, input_crop=lay.input_crop,
            read_ahead=lay.read_ahead, buffer_shift=lay.buffer_shift,
            buffer_insert=lay.buffer_insert, bias_group_map=lay.bias_group_map,
            simulated_sequence=lay.simulated_sequence, extra=tuple(extra)))
    buffers = resolved.sidecar.data_buffer
    data_buffer = None
    if buffers:
        # one buffer, as the vendor keeps it (izer reads data_buffer[0])
        data_buffer = BufferPlacement(processors=buffers[0].processors,
                                      offset=buffers[0].offset)
    return Placement(network=network, device=resolved.device, layers=tuple(out),
                     final_layer=resolved.final_layer,
                     first_layer_used=resolved.first_layer_used, data_buffer=data_buffer)


def network_from_sidecar(sidecar: Sidecar, checkpoint_layers: Sequence[CheckpointLayer],
                         device: Device, input_shape: Sequence[int],
                         checkpoint_arch: str | None = None) -> Network:
    """The Network a sidecar and its checkpoint describe (import-izer path)."""
    return to_network(resolve(sidecar, checkpoint_layers, device, input_shape,
                              checkpoint_arch))


def weights_from_network(network: Network) -> list[CheckpointLayer]:
    """The weight layers of an ONNX-derived Network, in the checkpoint reader's form.

    Lets the converter's `--sidecar` path resolve a sidecar with the same code: the
    stored output shift is the final one minus the implicit `8 - |weight bits|`.
    """
    out = []
    for lay in network.layers:
        if lay.weights is None:
            continue
        q = lay.quantization
        bits = abs(q) if q else 8
        bias_hw = lay.bias_hw
        if bias_hw is None and lay.bias is not None:
            bias_hw = np.floor_divide(np.asarray(lay.bias, dtype=np.int64), 128)
        out.append(CheckpointLayer(
            name=lay.name, key=f"{lay.name}.weight", op=None,
            weight=np.asarray(lay.weights, dtype=np.int64),
            bias=None if bias_hw is None else bias_hw * 2 ** (bits - 1), bias_hw=bias_hw,
            weight_bits=bits, output_shift=lay.output_shift - (8 - bits),
            has_output_shift=True))
    return out


def resolve_placement(sidecar: Sidecar, network: Network, device: Device) -> Placement:
    """Place an ONNX-derived Network as the sidecar says (converter `--sidecar` path)."""
    if len(sidecar.layers) != len(network.layers):
        # each sidecar entry places one hardware layer of the model; an entry past the
        # model's last layer has nothing to place (e.g. a pass-through layer the vendor's
        # sidecar adds that the model does not have)
        raise Ai8xError("sidecar.layers", f"layers[{len(network.layers)}]",
                        f"the sidecar describes {len(sidecar.layers)} layers, the model "
                        f"has {len(network.layers)} hardware layers",
                        "write one entry per hardware layer (`onnx2ai8x sidecar model.onnx` "
                        "writes a matching sidecar to start from)")
    resolved = resolve(sidecar, weights_from_network(network), device, network.input_shape)
    if len(resolved.layers) != len(network.layers):
        # `next_sequence: stop` (or -1) ends the run early, as the vendor's tool does; the
        # layers after it would not run, yet the model computes its output with them
        raise Ai8xError("sidecar.sequence", f"layers[{len(resolved.layers) - 1}]",
                        f"the sidecar's `next_sequence` ends the network after "
                        f"{len(resolved.layers)} of the model's {len(network.layers)} "
                        "hardware layers",
                        "remove the `next_sequence` that stops early; every layer of the "
                        "model must run")
    return to_placement(resolved, network)

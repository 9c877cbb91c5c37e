"""Rewrites that make a network placeable without changing what it computes.

Two element-wise patterns the model's graph allows but the accelerator cannot run as
one layer; each becomes the layer sequence the vendor's own sidecars use for them
(pass-through element-wise layers, seed 004 "Residual Connections"):

* An element-wise operation fused with a convolution that adds a bias (MAX78002; the
  vendor tool refuses it whatever the channel count), or a multi-pass fusion the
  MAX78000 cannot run (more than 2 operands x 2 passes): the element-wise operation
  (with the layer's pooling) moves into a pass-through layer of its own, which the
  convolution then reads (`rules.eltwise_multipass`; the vendor's effnet2 /
  MobileNet-v2 sidecars write every residual add as `operation: none, eltwise: add`).
* An element-wise operand that another layer also reads: element-wise operands are
  written interleaved (`write_gap`). On the MAX78002 a single-pass layer reads such data
  where it lies, skipping the other operands' words (`read_gap`, seed 000/004; the
  vendor's pascalvoc-fpndetector sidecar reads every 64-channel residual operand so,
  `facts.reads_gapped`); where some other reader cannot (the MAX78000, more than 64
  channels, a second element-wise layer or concatenation reading it), the element-wise
  layer reads a pass-through copy of it written right after the producer (the vendor's
  ResNet sidecars: "re-form data with gap"; its fpndetector's 128-channel
  "gapped version" layers).

The same holds for a concatenation of more than 64 channels (more than one input pass):
its parts are written interleaved too, one word per pixel each (seed 004 `write_gap`,
"... or to concatenate multiple inputs to form data with more than 64 channels"). A part
that another layer also reads (the large U-Net's encoder output, read by the bottleneck
and concatenated with the upsampled decoder data) is therefore copied by a pass-through
layer unless every other reader reads it with `read_gap` as above, placed where the
vendor's camvid-unet-large sidecar places it: right before the next part's producer (or
the concatenation), so the copy lives only as long as the interleaved group.

A pass-through layer computes nothing the fused layer did not: the element-wise result
is 8-bit in either form (seed 004), so the reference and the known answer are unchanged.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..devices import Device
from ..network import ACT_NONE, ELTWISE_NONE, Layer, Network, Op, unique_name
from .facts import in_passes, pools, reads_gapped

INPUT = -1
NEW = -1000  # the inserted layer, in insert_layer's arguments (-2 is the data buffer)


def _sources(network: Network, ll: int) -> tuple[int, ...]:
    lay = network.layers[ll]
    if lay.in_sequences is not None:
        return tuple(lay.in_sequences)
    return (ll - 1,) if ll > 0 else (INPUT,)


def _unique(network: Network, base: str) -> str:
    return unique_name(base, {lay.name for lay in network.layers})


def insert_layer(network: Network, at: int, layer: Layer,
                 reroute: dict[int, tuple[int, ...]]) -> Network:
    """`layer` inserted at index `at`. Its in_sequences and the sources in `reroute`
    (old layer index -> what it reads instead) are in the old numbering, NEW naming the
    inserted layer; every other layer keeps reading what it read."""

    def renumber(src: int) -> int:
        return at if src == NEW else src + 1 if src >= at else src

    old = list(network.layers)
    layers: list[Layer] = []
    for ll in range(len(old) + 1):
        if ll == at:
            seqs = tuple(renumber(s) for s in layer.in_sequences or ())
            layers.append(replace(layer, in_sequences=_implicit(seqs, len(layers))))
        if ll == len(old):
            break
        lay, index = old[ll], len(layers)
        seqs = tuple(renumber(s) for s in reroute.get(ll, _sources(network, ll)))
        keep = lay.in_sequences is not None
        layers.append(replace(lay, in_sequences=seqs if keep else _implicit(seqs, index)))
    outputs = None if network.outputs is None else tuple(renumber(o)
                                                         for o in network.outputs)
    return replace(network, layers=tuple(layers), outputs=outputs)


def _implicit(seqs: tuple[int, ...], index: int) -> tuple[int, ...] | None:
    return None if seqs == ((index - 1,) if index else (INPUT,)) else seqs


def _passthrough(lay: Layer, name: str, channels: int, dims: tuple[int, int],
                 pooled: tuple[int, int], in_sequences: tuple[int, ...], *,
                 eltwise: int = ELTWISE_NONE, operands: int = 1,
                 pool_fields: dict | None = None) -> Layer:
    """A pass-through layer (no weights, no shift, no activation)."""
    return Layer(name=name, operator=Op.NONE, input_channels=channels,
                 output_channels=channels, input_dim=dims, pooled_dim=pooled,
                 output_dim=pooled, eltwise=eltwise, operands=operands,
                 activation=ACT_NONE, quantization=0, in_sequences=in_sequences,
                 **(pool_fields or {}))


def _fusion_unsupported(lay: Layer, device: Device) -> bool:
    """The fused element-wise + convolution breaks `rules.eltwise_multipass`."""
    passes = in_passes(lay, device)
    if lay.operands <= 1 or lay.operator.passthrough:
        return False
    if not device.eltwise_multipass_conv_bias and lay.bias is not None \
            and bool(np.any(np.asarray(lay.bias) != 0)):
        return True  # whatever the passes, as the vendor tool checks it (rules/eltwise.py)
    return passes > 1 and device.eltwise_multipass_emulated and \
        lay.operands * passes != lay.operands + passes


def split_multipass_eltwise(network: Network, device: Device) -> Network:
    """Unfuse each element-wise operation the device cannot run fused with its
    convolution (see the module doc string)."""
    ll = 0
    while ll < len(network.layers):
        lay = network.layers[ll]
        if not _fusion_unsupported(lay, device):
            ll += 1
            continue
        pool_fields = {}
        if pools(lay):
            pool_fields = {"pool": lay.pool, "pool_stride": lay.pool_stride,
                           "pool_dilation": lay.pool_dilation,
                           "pool_average": lay.pool_average, "pool_first": lay.pool_first}
        add = _passthrough(lay, _unique(network, f"{lay.name}_eltwise"),
                           lay.input_channels, lay.input_dim, lay.pooled_dim,
                           _sources(network, ll), eltwise=lay.eltwise,
                           operands=lay.operands, pool_fields=pool_fields)
        conv = replace(lay, eltwise=ELTWISE_NONE, operands=1, input_dim=lay.pooled_dim,
                       pool=(1, 1), pool_stride=(1, 1), pool_dilation=(1, 1),
                       pool_average=False, pool_first=True, in_sequences=None)
        network = replace(network, layers=(*network.layers[:ll], conv,
                                           *network.layers[ll + 1:]))
        network = insert_layer(network, ll, add, {ll: (NEW,)})
        ll += 2
    return network


def copy_shared_operands(network: Network, device: Device) -> Network:
    """Give each element-wise layer a pass-through copy of an operand that another
    layer also reads and cannot read in place (see the module doc string)."""
    return _copy_shared_sources(
        network, device, lambda lay: lay.eltwise != ELTWISE_NONE,
        lambda srcs, shared, ll: shared + 1)


def _readers(network: Network) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for k in range(len(network.layers)):
        for s in _sources(network, k):
            out.setdefault(s, set()).add(k)
    return out


def copy_shared_concat_parts(network: Network, device: Device) -> Network:
    """Give each concatenation of more than one input pass a pass-through copy of a part
    that another layer also reads (see the module doc string)."""
    # the copy goes right before the first part written after `shared`, else before the
    # concatenation: the interleaved group starts with the copy
    return _copy_shared_sources(
        network, device,
        lambda lay: lay.eltwise == ELTWISE_NONE and in_passes(lay, device) >= 2,
        lambda srcs, shared, ll: min([s for s in srcs if s > shared] + [ll]))


def _copy_shared_sources(network: Network, device: Device, applies, insert_at) -> Network:
    """The one copy walk of both rewrites: for each layer of several sources that
    `applies` selects, the first source (not the network input) that another layer also
    reads, and not every such reader with `read_gap` (`facts.reads_gapped`), gets a
    pass-through copy inserted at `insert_at(sources, shared, layer)`, and the layer
    reads the copy instead."""
    ll = 0
    while ll < len(network.layers):
        lay = network.layers[ll]
        srcs = _sources(network, ll)
        if len(srcs) < 2 or not applies(lay):
            ll += 1
            continue
        readers = _readers(network)
        shared = next((s for s in srcs if s != INPUT and _needs_copy(
            network, device, s, readers.get(s, set()) - {ll})), None)
        if shared is None:
            ll += 1
            continue
        src = network.layers[shared]
        dims = src.output_dim
        copy = _passthrough(src, _unique(network, f"{src.name}_copy"),
                            src.output_channels, dims, dims, (shared,))
        network = insert_layer(network, insert_at(srcs, shared, ll), copy, {
            ll: tuple(NEW if s == shared else s for s in srcs)})
        ll += 1  # the layer moved one on; look at it again
    return network


def _needs_copy(network: Network, device: Device, src: int, others: set[int]) -> bool:
    """Layer `src`, written interleaved for a combining layer, is also read by `others`,
    and not every one of them can read it there (`facts.reads_gapped`)."""
    return bool(others) and not all(reads_gapped(network, k, src, device) for k in others)


def inserted_layers(before: Network, after: Network) -> tuple[str, ...]:
    """One line per layer a rewrite added (what it is for), for the conversion report."""
    names = {lay.name for lay in before.layers}
    out = []
    for ll, lay in enumerate(after.layers):
        if lay.name in names:
            continue
        srcs = [after.layers[s].name if s >= 0 else "the input"
                for s in _sources(after, ll)]
        users = [after.layers[k].name for k in sorted(_readers(after).get(ll, ()))]
        what = "element-wise pass-through" if lay.eltwise != ELTWISE_NONE \
            else "pass-through copy"
        out.append(f"inserted {what} layer `{lay.name}` reading "
                   f"{', '.join(f'`{s}`' for s in srcs)} for "
                   f"{', '.join(f'`{u}`' for u in users) or 'the output'}")
    return tuple(out)


def rewrite(network: Network, device: Device) -> Network:
    """Every rewrite, in order (unfusing may create the operand sharing the copies
    resolve)."""
    network = copy_shared_operands(split_multipass_eltwise(network, device), device)
    return copy_shared_concat_parts(network, device)

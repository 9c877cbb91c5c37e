"""Every golden case PyTorch can express, written with ai8x_torch, exports to the vendor's
layers and computes the vendor's known answer.

For each case, the vendor's resolved configuration (tests/golden/case_network.py) is
written as an ai8x_torch model — one module per layer named `layer<N>`, the case's
integer weights, stored biases and shifts put in as a `-q` checkpoint holds them
(golden README), `torch.cat` for concatenated in_sequences, an element-wise module for
each operand list, `view` before a flattening linear layer. That model is exported with
`export_onnx`; then

* the importer reads the file back as the case's layers, field for field, except where
  the export merges the vendor's stand-alone element-wise layer into the layer reading it
  (PyTorch writes both layouts with the same code; see `_merged`), and
* the onnxruntime reference on the case's sample equals `expected_output` to the bit.

Operands packed into one input are `x.split(c, dim=1)` parts. Configurations without an
ai8x_torch form are skipped with the reason (`Mul`, pooling before the element-wise
operation, a wide layer with an activation, ...). Binary weights are 1-bit layers of
-1/+1 on the MAX78002, as the vendor's checkpoints store them (weight_bits 1).
"""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from tests.conftest import GOLDEN, golden_params

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import ai8x_torch as ai8x  # noqa: E402
from onnx2ai8x.network import (  # noqa: E402
    ACTIVATION_NAMES,
    ELTWISE_ADD,
    ELTWISE_NONE,
    ELTWISE_OR,
    ELTWISE_SUB,
    ELTWISE_XOR,
    OP_CONV1D,
    OP_CONVTRANSPOSE2D,
    OP_LINEAR,
    OP_NONE,
    Layer,
    Network,
)

_ELTWISE_MODULES = {ELTWISE_ADD: ai8x.Add, ELTWISE_SUB: ai8x.Sub, ELTWISE_OR: ai8x.BitwiseOr,
                    ELTWISE_XOR: ai8x.BitwiseXor}


class _Unexpressible(Exception):
    """The layer has no ai8x_torch form; the message says why."""


def _sources(i: int, lay: Layer) -> tuple[int, ...]:
    return (i - 1,) if lay.in_sequences is None else tuple(lay.in_sequences)


def _module(lay: Layer, one_d: bool) -> nn.Module:
    """The ai8x_torch module for one resolved layer (facts: the layer's fields)."""
    if lay.output_width == 32 and lay.activation is not None:
        raise _Unexpressible("ai8x_torch refuses a wide output layer with an activation")
    act = ACTIVATION_NAMES[lay.activation]
    has_bias = lay.bias is not None
    pooled = lay.pool != (1, 1) or lay.pool_stride != (1, 1)
    pooling = None if not pooled else ("Avg" if lay.pool_average else "Max")
    if lay.pool_average and lay.pool_dilation != (1, 1):
        raise _Unexpressible("average pooling with dilation")
    if lay.operator == OP_LINEAR:
        if pooled:
            raise _Unexpressible("a linear layer with pooling")
        return ai8x.Linear(int(lay.weights.shape[1]), lay.output_channels,
                           bias=True if has_bias else None, activation=act,
                           wide=lay.output_width == 32)
    kernel = None if lay.operator == OP_NONE else lay.kernel_size[0]
    if one_d:
        if lay.operator not in (OP_NONE, OP_CONV1D):
            raise _Unexpressible("a 2-D operator on 1-D data")
        return ai8x.Conv1d(lay.input_channels, lay.output_channels, kernel, pooling=pooling,
                           pool_size=lay.pool[0], pool_stride=lay.pool_stride[0],
                           pool_dilation=lay.pool_dilation[0], stride=lay.stride[0],
                           padding=lay.padding[0], dilation=lay.dilation[0], bias=has_bias,
                           activation=act, wide=lay.output_width == 32,
                           groups=lay.conv_groups)
    if lay.operator == OP_CONV1D:
        raise _Unexpressible("a 1-D convolution on 2-D data")
    if lay.operator == OP_CONVTRANSPOSE2D and lay.output_padding != (1, 1):
        raise _Unexpressible("ai8x_torch's transposed convolution has output_padding 1")
    if kernel is not None and lay.kernel_size[0] != lay.kernel_size[1]:
        raise _Unexpressible("a non-square kernel")
    op = "ConvTranspose2d" if lay.operator == OP_CONVTRANSPOSE2D else "Conv2d"
    return ai8x.Conv2d(lay.input_channels, lay.output_channels, kernel, op=op,
                       pooling=pooling, pool_size=lay.pool, pool_stride=lay.pool_stride,
                       pool_dilation=lay.pool_dilation, stride=lay.stride,
                       padding=lay.padding, dilation=lay.dilation, bias=has_bias,
                       activation=act, wide=lay.output_width == 32, groups=lay.conv_groups)


def _load(module: nn.Module, lay: Layer) -> None:
    """The case's integers as a quantized checkpoint stores them (golden README)."""
    if lay.weights is None:
        return
    bits = 1 if lay.quantization == -1 else lay.quantization  # binary: stored as 1-bit
    module.op.weight.data = torch.from_numpy(np.asarray(lay.weights, dtype=np.float32))
    if lay.bias_hw is not None:
        module.op.bias.data = torch.from_numpy(
            (np.asarray(lay.bias_hw) * 2.0 ** (bits - 1)).astype(np.float32))
    module.weight_bits.data = torch.tensor([bits])
    module.bias_bits.data = torch.tensor([bits])
    module.quantize_activation.data = torch.tensor([True])
    module.adjust_output_shift.data = torch.tensor([False])
    # case.json holds the final shift; the checkpoint holds it without 8 - weight_bits
    module.output_shift.data = torch.tensor([float(lay.output_shift - (8 - bits))])


class CaseModel(nn.Module):
    """A golden case's layers as a PyTorch model (module `layer<N>` per layer)."""

    def __init__(self, net: Network, outputs: list[int]) -> None:
        super().__init__()
        # (layer, sources, element-wise module, view before, operands packed in the input)
        self.plan: list[tuple[str, tuple[int, ...], str | None, bool, int]] = []
        self.part_channels: list[int] = []  # channels of one packed operand
        self.outputs = outputs
        one_d = {-1: len(net.input_shape) == 2}
        for i, lay in enumerate(net.layers):
            srcs = _sources(i, lay)
            combine, packed = None, False
            if lay.eltwise != ELTWISE_NONE:
                if lay.eltwise not in _ELTWISE_MODULES:
                    raise _Unexpressible("element-wise multiplication has no ai8x_torch module")
                # operands packed in the (concatenated) input: its channels split
                # equally, in order
                packed = len(srcs) != lay.operands
                if lay.pool_first and lay.pool != (1, 1):
                    raise _Unexpressible("pooling of each operand before the element-wise "
                                         "operation")
                alone = lay.operator == OP_NONE and lay.pool == (1, 1) and \
                    lay.pool_stride == (1, 1)
                # a pass-through element-wise layer is the element-wise module itself
                combine = lay.name if alone else f"{lay.name}_combine"
                self.add_module(combine, _ELTWISE_MODULES[lay.eltwise]())
            data_1d = one_d[srcs[0]]
            if combine != lay.name:
                module = _module(lay, data_1d)
                _load(module, lay)
                self.add_module(lay.name, module)
            # PyTorch's Linear takes (N, features): a flattening view before it unless
            # its input already comes from a linear layer
            view = lay.operator == OP_LINEAR and (lay.flatten or any(
                s < 0 or net.layers[s].operator != OP_LINEAR for s in srcs))
            channels = sum(net.input_shape[0] if s < 0 else net.layers[s].output_channels
                           for s in srcs)
            if packed and channels != lay.operands * lay.input_channels:
                # e.g. ai85-suite-multilayer-eltwise: 8x20x20 read as two 8x20x10 operands
                raise _Unexpressible("operands packed along the pixels (in_dim)")
            self.plan.append((lay.name, srcs, combine, view,
                              lay.operands if packed else 0))
            self.part_channels.append(lay.input_channels)
            one_d[i] = data_1d and lay.operator != OP_LINEAR

    def forward(self, x):
        values = {-1: x}
        for i, (name, srcs, combine, flatten, packed) in enumerate(self.plan):
            ins = [values[s] for s in srcs]
            if packed:
                joined = ins[0] if len(ins) == 1 else torch.cat(ins, dim=1)
                parts = joined.split(self.part_channels[i], dim=1)
                ins = [parts[k] for k in range(packed)]
            if combine == name:
                values[i] = getattr(self, name)(*ins)
                continue
            if combine is not None:
                t = getattr(self, combine)(*ins)
            elif len(ins) > 1:
                t = torch.cat(ins, dim=1)
            else:
                t = ins[0]
            if flatten:
                t = t.view(t.size(0), -1)
            values[i] = getattr(self, name)(t)
        return tuple(values[o] for o in self.outputs)


def _merged(net: Network, outputs: list[int]) -> tuple[Network, list[int]]:
    """The case's layers as the export lays them out. A stand-alone element-wise layer
    (no operator, no pooling) that only the next layer reads, and that is not an output,
    joins that layer when it has an operator or pooling; the pooling then follows the
    element-wise operation (pool_first: false)."""
    layers = list(net.layers)
    readers: dict[int, list[int]] = {}
    for i, lay in enumerate(layers):
        for s in _sources(i, lay):
            readers.setdefault(s, []).append(i)
    keep = list(range(len(layers)))
    fused: dict[int, Layer] = {}
    for i, lay in enumerate(layers):
        nxt = layers[i + 1] if i + 1 < len(layers) else None
        if (lay.operator == OP_NONE and lay.eltwise != ELTWISE_NONE and lay.pool == (1, 1)
                and lay.pool_stride == (1, 1) and i not in outputs and nxt is not None
                and readers.get(i) == [i + 1] and _sources(i + 1, nxt) == (i,)
                and nxt.eltwise == ELTWISE_NONE and lay.output_width == 8
                and (nxt.operator != OP_NONE or nxt.pool != (1, 1))):
            fused[i + 1] = replace(nxt, eltwise=lay.eltwise, operands=lay.operands,
                                   input_channels=lay.input_channels,
                                   pool_first=nxt.pool == (1, 1) and nxt.pool_first,
                                   in_sequences=_sources(i, lay))
            keep.remove(i)
    index = {old: new for new, old in enumerate(keep)}
    index[-1] = -1
    out = []
    for new, old in enumerate(keep):
        lay = fused.get(old, layers[old])
        if lay.flatten and lay.input_dim == (1, 1):
            # Flattening (C, 1, 1) is no change; the export writes flatten: false there,
            # the vendor keeps the sidecar's `flatten: true` (ai85-suite-mlp-multilayer208)
            lay = replace(lay, flatten=False)
        seqs = tuple(index[s] for s in _sources(old, lay)) if old in fused or \
            lay.in_sequences is not None else (new - 1,)
        out.append(replace(lay, in_sequences=seqs))
    return replace(net, layers=tuple(out)), [index[o] for o in outputs]


def golden_case_model(name: str):
    """(case_dir, network, output indices, model, device, round_avg) for a golden case
    written as an ai8x_torch model; skips where the case has no PyTorch form."""
    from tests.golden.case_network import case_network, case_outputs

    case_dir = GOLDEN / name
    if not (case_dir / "case.json").is_file():
        pytest.skip("golden corpus ../shared/golden is absent")
    case = json.loads((case_dir / "case.json").read_text())
    device = 87 if case["device"] == "MAX78002" else 85
    round_avg = "--avg-pool-rounding" in case["vendor_args"]
    net = case_network(case_dir)
    outs = case_outputs(case_dir)
    with ai8x.using_device(device, round_avg=round_avg):
        try:
            model = CaseModel(net, outs).eval()
        except (_Unexpressible, ValueError) as exc:
            pytest.skip(f"no ai8x_torch form: {exc}")
    return case_dir, net, outs, model, device, round_avg


@pytest.mark.parametrize("name", golden_params())
def test_golden_case_written_in_pytorch_exports_to_the_vendor_layers(name, tmp_path):
    import custom_ops
    from onnx2ai8x.importer.onnx_reader import read_model
    from tests.ai8x_torch.test_export import layer_differences
    from tests.golden.case_network import (
        case_words,
        compare_words,
        expected_output,
        load_sample,
    )

    case_dir, net, outs, model, device, round_avg = golden_case_model(name)
    with ai8x.using_device(device, round_avg=round_avg):
        path = ai8x.export_onnx(model, torch.zeros(1, *net.input_shape),
                                tmp_path / f"{name}.onnx")
    want, want_outs = _merged(net, outs)
    back = read_model(path)
    assert layer_differences(want, back) == []

    sample = load_sample(case_dir, net)
    results = custom_ops.run(custom_ops.session(path), sample)
    assert len(results) == len(want_outs)
    words = case_words(case_dir, net, [np.asarray(r)[0] for r in results], outs)
    problems = compare_words(expected_output(case_dir), words)
    assert not problems, "\n".join(problems)

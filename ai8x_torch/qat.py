"""Training-flow helpers of the vendor's `ai8x` module: BatchNorm folding, QAT, quantization.

The order a training run uses (vendor train.py): floating-point epochs, then
`fuse_bn_layers` and `initiate_qat(model, policy)`, QAT epochs, then `quantize_model`
(the vendor's synthesis repository does this step on the checkpoint file with
`quantize.py`), then export or simulate.
"""
from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from .modules import QuantizationAwareModule, _bad


def _layers(model: nn.Module):
    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, QuantizationAwareModule)]


def fuse_bn_layers(model: nn.Module) -> None:
    """Fold every layer's BatchNorm into its weights and bias, and drop the BatchNorm.

    The hardware has no BatchNorm; the vendor's layers divide the BatchNorm output by 4
    during training, so the folded scale and shift carry that factor too.
    """
    for _, layer in _layers(model):
        bn = layer.bn
        if bn is None or layer.op is None:
            continue
        w = layer.op.weight.data
        inv_std = torch.rsqrt(bn.running_var + bn.eps)
        scale = bn.weight.detach() if bn.weight is not None else torch.ones_like(inv_std)
        shift = bn.bias.detach() if bn.bias is not None else torch.zeros_like(inv_std)
        scale = 0.25 * scale
        shift = 0.25 * shift
        factor = scale * inv_std
        layer.op.weight.data = w * _per_output_channel(layer.op, factor)
        bias = layer.op.bias.data if layer.op.bias is not None else torch.zeros_like(factor)
        new_bias = (bias - bn.running_mean) * factor + shift
        if layer.op.bias is None:
            layer.op.bias = nn.Parameter(new_bias)
        else:
            layer.op.bias.data = new_bias
        layer.bn = None


def _per_output_channel(op: nn.Module, factor: torch.Tensor) -> torch.Tensor:
    """`factor` (one value per output channel) shaped to multiply `op.weight`.

    Convolutions store (out, in/groups, ...): the output channel is dimension 0. A
    transposed convolution stores (in, out/groups, ...): weight [i, j] feeds output
    channel (i // (in/groups)) * (out/groups) + j — for a depthwise one, channel i.
    (The vendor scales dimension 0, right only for depthwise transposed layers.)
    """
    w = op.weight
    tail = [1] * (w.dim() - 2)
    if not isinstance(op, nn.ConvTranspose2d):
        return factor.reshape(-1, 1, *tail)
    cin, out_per_group = w.shape[0], w.shape[1]
    in_per_group = cin // op.groups
    i = torch.arange(cin, device=w.device).reshape(-1, 1)
    j = torch.arange(out_per_group, device=w.device).reshape(1, -1)
    return factor[(i // in_per_group) * out_per_group + j].reshape(cin, out_per_group, *tail)


def initiate_qat(model: nn.Module, qat_policy: Mapping, export: bool = False) -> None:
    """Switch every layer to quantization-aware training with the policy's weight bits.

    `qat_policy` is the vendor's policy (its `policies/qat_policy*.yaml`): `weight_bits`
    for all layers, optional `shift_quantile`, and `overrides: {layer name:
    {weight_bits: n}}`. Bias bits equal weight bits, as the vendor sets them.
    """
    if "weight_bits" not in qat_policy:
        raise _bad("qat_policy", "`weight_bits` is missing", "add weight_bits: 8")
    _check_policy_bits("qat_policy", qat_policy)
    overrides = qat_policy.get("overrides") or {}
    quantile = float(qat_policy.get("shift_quantile", 1.0))
    unknown = set(overrides) - {name for name, _ in _layers(model)}
    if unknown:
        raise _bad("qat_policy", f"overrides name no layer of the model: {sorted(unknown)}",
                   "use the module names of model.named_modules()")
    for name, layer in _layers(model):
        bits = int(overrides.get(name, {}).get("weight_bits", qat_policy["weight_bits"]))
        layer.init_module(bits, bits, True, quantile, export)


def parse_qat_yaml(path) -> dict:
    """Read a QAT policy file (the vendor's `policies/qat_policy*.yaml`): `start_epoch`
    and `weight_bits` are required; `shift_quantile` and `overrides` ({layer name:
    {weight_bits: n}}) optional. The vendor's `parse_qat_yaml.parse`, with errors that
    name the file and the key."""
    import yaml

    from onnx2ai8x.safeyaml import check_bounds

    where = str(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        check_bounds(text, where)  # no alias bombs or deep nesting (onnx2ai8x.safeyaml)
        policy = yaml.safe_load(text)
    except UnicodeDecodeError:
        raise _bad(where, "the QAT policy is not UTF-8 text", "save it as UTF-8") from None
    except OSError as exc:
        raise _bad(where, f"cannot read the QAT policy ({exc.strerror})",
                   "check the path") from None
    except yaml.YAMLError as exc:
        raise _bad(where, f"the QAT policy is not valid YAML ({exc})",
                   "fix the YAML syntax") from None
    if not isinstance(policy, dict):
        raise _bad(where, "the QAT policy is not a mapping",
                   "write `start_epoch: N` and `weight_bits: 8` lines")
    for key in ("start_epoch", "weight_bits"):
        if key not in policy:
            raise _bad(where, f"`{key}` is missing from the QAT policy",
                       f"add `{key}:` (e.g. start_epoch: 10, weight_bits: 8)")
    _check_policy_bits(where, policy)
    return policy


def _check_policy_bits(where: str, policy: Mapping) -> None:
    entries = [("weight_bits", policy.get("weight_bits"))]
    for name, spec in (policy.get("overrides") or {}).items():
        if not isinstance(spec, Mapping) or "weight_bits" not in spec:
            raise _bad(where, f"override `{name}` has no weight_bits",
                       f"write `{name}: {{weight_bits: 4}}`")
        entries.append((f"overrides.{name}.weight_bits", spec["weight_bits"]))
    for key, bits in entries:
        if bits not in (1, 2, 4, 8):
            raise _bad(where, f"`{key}` is {bits!r}", "weights are 1, 2, 4 or 8 bits "
                       "(seed 000, 'Weight Bits')")


def update_model(model: nn.Module) -> None:
    """Vendor API, called after loading a checkpoint; modes are read per forward pass here."""
    for _, layer in _layers(model):
        layer.set_functions()


def update_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer
                     ) -> torch.optim.Optimizer:
    """A new optimizer of the same kind over the model's parameters now (after
    `fuse_bn_layers` removed BatchNorm parameters).

    As the vendor's: hyper-parameters (learning rate, momentum, ...) of the old groups are
    kept. The per-parameter state (momentum buffers, Adam moments) moves with the
    parameter it belongs to — matched by identity, where the vendor matches by shape —
    and parameters new to the model start without state.
    """
    new = type(optimizer)(model.parameters(), **optimizer.defaults)
    old_groups = optimizer.param_groups
    for i, group in enumerate(new.param_groups):
        if i < len(old_groups):
            for key, value in old_groups[i].items():
                if key != "params":
                    group[key] = value
        for p in group["params"]:
            if p in optimizer.state:
                new.state[p] = optimizer.state[p]
    return new


def _max_bit_shift(params: torch.Tensor, bits: int, quantile: float) -> int:
    # The power of two that scales the layer's largest parameter (or the quantile) into
    # [-1, 1): floor(log2(1 / q)), clamped as the vendor's quantize.py does.
    # In float32 as the vendor computes it: 1 / q rounds in float32 before the log, which
    # decides the shift when q lies just above a power of two.
    q = torch.quantile(params.abs().to(torch.float32), quantile)
    shift = torch.floor(torch.log2(1.0 / q)).clamp(min=-7.0 - bits, max=23.0 - bits)
    return int(shift)


@torch.no_grad()
def quantize_model(model: nn.Module) -> nn.Module:
    """Turn a trained (QAT or floating-point) model into its quantized form, in place.

    What the vendor's `quantize.py` does to a checkpoint (facts from its source): per
    layer with weights, `bits` = the layer's weight bits (8 when not set);
    `s = floor(log2(1 / max|weights, bias|))` (the `shift_quantile` quantile instead of
    the maximum when below 1); weights become `clamp(floor(w * 2**s * 2**(bits-1) +
    0.5), -2**(bits-1), 2**(bits-1) - 1)`; the bias is quantized the same way and then
    stored times `2**(bits-8) * 128`; `output_shift = -s`; the layer is marked as
    quantized (`quantize_activation` 1, `adjust_output_shift` 0). The result runs in
    simulate mode and exports to ai8x-ONNX.
    """
    for name, layer in _layers(model):
        if layer.op is None:
            continue
        if layer.bn is not None:
            raise _bad(name, "the layer still has its BatchNorm",
                       "fold it first: ai8x_torch.fuse_bn_layers(model)")
        bits = int(layer.weight_bits.flatten()[0]) or 8
        w = layer.op.weight.detach().to(torch.float64)
        b = None if layer.op.bias is None else layer.op.bias.detach().to(torch.float64)
        params = layer.op.weight.detach().flatten()
        if layer.op.bias is not None:
            params = torch.cat((params, layer.op.bias.detach().flatten()))
        shift = _max_bit_shift(params, bits, float(layer.shift_quantile.flatten()[0]))
        factor = 2.0 ** shift
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        wq = torch.clamp(torch.floor(w * factor * 2 ** (bits - 1) + 0.5), lo, hi)
        layer.op.weight.data = wq.to(layer.op.weight.dtype)
        if b is not None:
            bq = torch.clamp(torch.floor(b * factor * 2 ** (bits - 1) + 0.5), lo, hi)
            layer.op.bias.data = (bq * 2.0 ** (bits - 8) * 128).to(layer.op.bias.dtype)
        layer.weight_bits.data = torch.tensor([bits], dtype=layer.weight_bits.dtype)
        layer.bias_bits.data = torch.tensor([bits], dtype=layer.bias_bits.dtype)
        layer.output_shift.data = torch.tensor([float(-shift)], dtype=torch.float32)
        layer.quantize_activation.data = torch.tensor([True])
        layer.adjust_output_shift.data = torch.tensor([False])
    return model


def checkpoint_state_dict(path) -> dict[str, torch.Tensor]:
    """A vendor (or ai8x_torch) checkpoint's `state_dict`, ready for `load_state_dict`.

    The file is unpickled safely (tensors, containers and optimizer classes only). The
    data-parallel `module.` prefix is removed; where a file holds a layer both with and
    without it, the first one is kept, as the vendor's synthesis tool does.
    """
    from onnx2ai8x.importer.checkpoint import load_checkpoint_file

    checkpoint = load_checkpoint_file(path)
    state = checkpoint.get("state_dict", checkpoint) if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict):
        raise _bad(str(path), "no state_dict in the checkpoint",
                   "pass a vendor (or ai8x_torch) training checkpoint")
    chosen: dict[str, bool] = {}  # top-level layer name -> keeps the prefixed spelling
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        prefixed = key.startswith("module.")
        name = key.removeprefix("module.")
        if chosen.setdefault(name.split(".")[0], prefixed) == prefixed:
            out[name] = value
    return out

"""The accelerator's layers as PyTorch modules, API-compatible with the vendor's `ai8x`.

A hardware layer is pooling -> convolution / linear -> output shift -> activation
(seed 000, "List of Predefined Modules"). Every layer module is a
`QuantizationAwareModule` with the vendor's attribute, parameter and buffer names
(`op`, `pool`, `bn`, `output_shift`, `weight_bits`, `bias_bits`, `quantize_activation`,
`adjust_output_shift`, `shift_quantile`), so vendor model files and checkpoints work.

Three numeric modes, chosen by `set_device` when the forward pass runs:

* floating point (no QAT): plain PyTorch arithmetic, activations in [-1, 1);
* quantization-aware training (after `initiate_qat`): weights, biases and activations are
  rounded to their bit widths in the forward pass with straight-through gradients, and the
  output shift follows the weights (the vendor's QAT forward);
* simulate (`set_device(..., simulate=True)` with quantized weights): the accelerator's
  integer arithmetic exactly as the synthesis tool computes it (seed 000, "Data Format",
  "Rounding"), in float64 so every sum is exact; see `_simulate`.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from onnx2ai8x.errors import Ai8xError

from .device import current_device
from .quant import clamp_fraction, quantize, straight_through

# Activations the hardware applies after the output shift.
ACTIVATIONS = (None, "ReLU", "Abs")


class LayerError(Ai8xError, ValueError):
    """A layer configuration or input the accelerator (or this flow) cannot use.

    An `Ai8xError` (code, where, message, hint: the CLI and notebooks render it without
    a traceback) and a `ValueError`, for code written against the vendor's module, which
    fails with assertions there.
    """


def _bad(where: str, message: str, hint: str) -> LayerError:
    return LayerError("ai8x_torch.layer", where, message, hint)


class Abs(nn.Module):
    """|x| (the MAX78000/MAX78002 `Abs` activation)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.abs(x)


class Empty(nn.Module):
    """Pass-through, used where a layer has no activation or no quantization step."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def get_activation(activation: str | None = None) -> nn.Module:
    """The module for an activation name ('ReLU', 'Abs' or None), as the vendor's."""
    if activation == "ReLU":
        return nn.ReLU()
    if activation == "Abs":
        return Abs()
    if activation is None:
        return Empty()
    raise _bad("activation", f"activation must be one of {ACTIVATIONS}, not {activation!r}",
               "use 'ReLU', 'Abs' or None")


def _flag(value: float | bool | int, dtype: torch.dtype) -> nn.Parameter:
    # The vendor keeps these as frozen Parameters (so they are in `state_dict` under the
    # layer's name); the same kind keeps checkpoints interchangeable.
    return nn.Parameter(torch.tensor([value], dtype=dtype), requires_grad=False)


def _vendor_quantile(x: torch.Tensor, q: float) -> torch.Tensor:
    """The quantile the vendor's QAT uses to choose the output shift (its `ai8x.quantile`).

    Facts from the vendor's code: the sorted values sit at positions (2k + 1) / (2n); the
    segment is found there (the last position <= q, kept within 0 .. n - 2), but the
    fraction is q * (n - 1) - k, the fraction for positions spread evenly over [0, 1]. The
    result is therefore not the textbook quantile (nor `torch.quantile`); the vendor's
    checkpoints were trained with it, so QAT here computes the same number. q = 1 gives
    the maximum.
    """
    x = torch.sort(x.flatten())[0]
    n = x.numel()
    if n == 1 or q == 1.0:
        return x[-1]
    positions = torch.linspace(1 / (2 * n), (2 * n - 1) / (2 * n), n, device=x.device)
    count = int(torch.searchsorted(positions, torch.tensor([q], device=x.device),
                                   right=True)[0])
    k = torch.tensor([min(max(count, 1), n - 1) - 1], device=x.device)
    # The same tensor operations as the vendor's, so the float32 rounding is the same.
    frac = q * (n - 1) - k
    return (x[k] + frac * (x[k + 1] - x[k])).squeeze(0)


class QuantizationAwareModule(nn.Module):
    """One hardware layer: optional pooling, optional conv/linear, shift, activation.

    Attributes (the export reads them): `op` (nn.Conv1d / Conv2d / ConvTranspose2d /
    Linear or None), `pool` (nn.MaxPool1d/2d, AvgPool1d/2d or None), `pooling` ('Max',
    'Avg' or None), `activation` ('ReLU', 'Abs' or None) and its module `activate`, `wide`
    (32-bit output), `bn` (BatchNorm until `fuse_bn_layers`), `eltwise` (None here).
    """

    eltwise: str | None = None

    def __init__(self, pooling: str | None = None, activation: str | None = None,
                 wide: bool = False, weight_bits: int | None = None,
                 bias_bits: int | None = None, quantize_activation: bool = False,
                 pool: nn.Module | None = None, op: nn.Module | None = None,
                 bn: nn.Module | None = None, shift_quantile: float = 1.0) -> None:
        super().__init__()
        if weight_bits not in (None, 1, 2, 4, 8) or bias_bits not in (None, 1, 2, 4, 8):
            raise _bad(type(self).__name__, f"weight/bias bits must be 1, 2, 4 or 8, not "
                       f"{weight_bits}/{bias_bits}", "the kernel memory holds 1-, 2-, 4- or "
                       "8-bit weights (seed 000, 'Weight Bits')")
        if wide and activation is not None:
            # The 32-bit output is the raw accumulator (seed 000, "wide").
            raise _bad(type(self).__name__, "a wide (32-bit) output cannot have an "
                       "activation", "use activation=None with wide=True")
        self.activation = activation
        self.activate = get_activation(activation)
        self.wide = bool(wide)
        self.pooling = pooling
        self.pool = pool
        self.op = op
        self.bn = bn
        self.output_shift = _flag(0.0, torch.float32)
        self.init_module(weight_bits, bias_bits, quantize_activation, shift_quantile)

    # -- configuration, as the vendor's -------------------------------------------------

    def init_module(self, weight_bits: int | None, bias_bits: int | None,
                    quantize_activation: bool, shift_quantile: float,
                    export: bool = False) -> None:
        """Set the layer's quantization mode (float when all three are off, else QAT)."""
        del export  # the vendor's ONNX-export switch; export here reads hardware_params
        if weight_bits is None and bias_bits is None and not quantize_activation:
            wb, bb, qa, adjust = 0, 0, False, False
        elif weight_bits in (1, 2, 4, 8) and bias_bits in (1, 2, 4, 8) and quantize_activation:
            wb, bb, qa = weight_bits, bias_bits, True
            # During QAT the shift follows the weights; in simulate mode it is fixed.
            adjust = not current_device().simulate
        else:
            raise _bad(type(self).__name__, f"undefined quantization mode: weight_bits="
                       f"{weight_bits}, bias_bits={bias_bits}, quantize_activation="
                       f"{quantize_activation}", "set all three (QAT) or none (floating "
                       "point)")
        self.weight_bits = _flag(wb, torch.int64)
        self.bias_bits = _flag(bb, torch.int64)
        self.quantize_activation = _flag(qa, torch.bool)
        self.adjust_output_shift = _flag(adjust, torch.bool)
        self.shift_quantile = _flag(float(shift_quantile), torch.float32)

    def set_functions(self) -> None:
        """Vendor API (`update_model`): nothing to rebuild, modes are read per call."""

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        # Checkpoints written before the vendor added `shift_quantile` lack the key; they
        # mean the default quantile 1.0 (the maximum), so supply it instead of failing.
        key = prefix + "shift_quantile"
        if key not in state_dict and prefix + "output_shift" in state_dict:
            state_dict[key] = torch.tensor([1.0])
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    # -- the numbers ---------------------------------------------------------------------

    @property
    def hardware_weight_bits(self) -> int:
        """Weight bits of the quantized layer (the vendor's default 8 when stored as 0)."""
        wb = int(self.weight_bits.detach().flatten()[0])
        return wb if wb else 8

    def _conv(self, x: torch.Tensor, weight: torch.Tensor,
              bias: torch.Tensor | None) -> torch.Tensor:
        op = self.op
        if isinstance(op, nn.Linear):
            return F.linear(x, weight, bias)
        if isinstance(op, nn.ConvTranspose2d):
            return F.conv_transpose2d(x, weight, bias, op.stride, op.padding,
                                      op.output_padding, op.groups, op.dilation)
        if isinstance(op, nn.Conv1d):
            return F.conv1d(x, weight, bias, op.stride, op.padding, op.dilation, op.groups)
        return F.conv2d(x, weight, bias, op.stride, op.padding, op.dilation, op.groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if current_device().simulate:
            return self._simulate(x)
        return self._train_forward(x)

    def _train_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The vendor's floating-point / QAT forward pass (activations in [-1, 1))."""
        dev = current_device()
        qat = bool(self.quantize_activation.detach().flatten()[0])
        if self.pool is not None:
            x = self.pool(x)
            if self.pooling == "Avg":
                if qat:
                    # The vendor's QAT rounds the average with torch.round (half to even)
                    # when rounding is on (its RoundQat); the hardware and simulate mode
                    # round half away from zero. Training follows the vendor.
                    scale = float(2 ** (dev.ACTIVATION_BITS - 1))
                    rnd = _round_even if dev.round_avg else _trunc
                    x = rnd(x * scale) / scale
                x = clamp_fraction(x, dev.ACTIVATION_BITS)
        if self.op is None:
            return x
        weight, bias = self.op.weight, self.op.bias
        if bool(self.adjust_output_shift.detach().flatten()[0]):
            params = weight.detach().flatten()
            if bias is not None:
                params = torch.cat((params, bias.detach().flatten()))
            limit = _vendor_quantile(params.abs(), float(self.shift_quantile.detach()[0]))
            out_shift = -torch.floor(torch.log2(1.0 / limit)).clamp(-15.0, 15.0)
            weight_scale = torch.exp2(-out_shift)
        else:
            out_shift = self.output_shift.detach()
            weight_scale = None
        wb = int(self.weight_bits.detach().flatten()[0])
        bb = int(self.bias_bits.detach().flatten()[0])
        if weight_scale is not None:
            weight = weight * weight_scale
            bias = None if bias is None else bias * weight_scale
        if wb:
            weight = clamp_fraction(quantize(weight, wb), wb)
        if bias is not None and bb:
            bias = clamp_fraction(quantize(bias, bb), bb)
        x = self._conv(x, weight, bias)
        if self.bn is not None:
            x = self.bn(x) / 4.0
        if not self.wide:
            # The wide output keeps the accumulator: no shift (seed 000, "wide").
            x = x * torch.exp2(out_shift)
        x = self.activate(x)
        if self.wide:
            bits = dev.WIDE_LAYER_RESOLUTION_BITS
            if qat:
                x = quantize(x, bits)
            lim = 2.0 ** (dev.FULL_ACC_BITS - 2 * (dev.DATA_BITS - 1) - 1)
            return torch.clamp(x, -lim, lim)
        if qat:
            x = quantize(x, dev.ACTIVATION_BITS)
        return clamp_fraction(x, dev.ACTIVATION_BITS)

    def _simulate(self, x: torch.Tensor) -> torch.Tensor:
        """The accelerator's integers, as the synthesis tool's simulator computes them.

        float64 holds every intermediate exactly (|accumulator| < 2**40 << 2**53).
        Pooling: max, or the window sum divided by the window size, truncated toward
        zero (rounded half away with `round_avg`; 1-D average pooling in a Conv1d layer
        always truncates, as the vendor's simulator does) and saturated to 8 bits. Then the integer
        convolution plus the bias (the 8-bit bias value times 128), the output stage
        floor(0.5 + acc * 2**shift / 128) with the final shift (stored shift + the
        implicit 8 - weight_bits), saturation to [-128, 127], and the activation
        clipping to [0, 127]. A wide layer returns the accumulator itself.
        """
        dev = current_device()
        x = x.to(torch.float64)
        _check_data(self, x)
        if self.pool is not None:
            pool = self.pool
            if isinstance(pool, (nn.MaxPool1d, nn.AvgPool1d)) and \
                    not isinstance(self.op, nn.Conv1d):
                # The vendor pools 1-D data with its 1-D rules only in a Conv1d layer
                # (izer simulate.pooling_layer); a pooling-only layer pools the data as
                # L x 1 pixels with the 2-D rules (dilation used, average rounding).
                x = _simulate_pool(_as_2d(pool), x.unsqueeze(-1), dev.round_avg)
                x = x.squeeze(-1)
            else:
                x = _simulate_pool(pool, x, dev.round_avg)
        if self.op is None:
            return x
        try:
            p = hardware_params(self)
        except ValueError as exc:
            raise _bad(type(self).__name__, f"simulate mode: {exc}",
                       "load a quantized (-q) checkpoint or call "
                       "ai8x_torch.quantize_model(model) first") from None
        weight = torch.from_numpy(p["weights"]).to(torch.float64).to(x.device)
        acc = self._conv(x, weight, None)
        if p["bias"] is not None:
            b = torch.from_numpy(p["bias"]).to(torch.float64).to(x.device)
            acc = acc + b.reshape(-1, *([1] * (acc.dim() - 2)))
        if not self.wide:
            acc = torch.floor(0.5 + acc * (2.0 ** p["output_shift"]) / 128.0)
            acc = torch.clamp(acc, -128.0, 127.0)
        if self.activation == "ReLU":
            acc = torch.clamp(acc, 0.0, 127.0)
        elif self.activation == "Abs":
            acc = torch.clamp(torch.abs(acc), 0.0, 127.0)
        return acc


def _check_data(layer: nn.Module, x: torch.Tensor) -> None:
    """Simulate mode computes on the accelerator's 8-bit integers; anything else (the
    [-1, 1) training scale, a float sample) would give silently wrong numbers."""
    if x.numel() == 0:
        return
    lo, hi = float(x.min()), float(x.max())
    if lo < -128 or hi > 127 or not bool(torch.all(x == torch.round(x))):
        raise _bad(type(layer).__name__, f"simulate mode expects 8-bit integer data, got "
                   f"values in [{lo:g}, {hi:g}]" + ("" if lo < -128 or hi > 127 else
                                                    " that are not all integers"),
                   "feed the sample as the accelerator holds it: round(x * 128) clamped "
                   "to [-128, 127] (ai8x.normalize with act_mode_8bit)")


def _trunc(x: torch.Tensor) -> torch.Tensor:
    return straight_through(x, torch.trunc(x))


def _round_even(x: torch.Tensor) -> torch.Tensor:
    return straight_through(x, torch.round(x))


def _simulate_pool(pool: nn.Module, x: torch.Tensor, round_avg: bool) -> torch.Tensor:
    if isinstance(pool, nn.MaxPool1d):
        # The vendor's 1-D max pooling reads an undilated window (izer compute.pool1d)
        # but produces as many values as the dilated window gives (its pooled_dim).
        (k,), (s,), (d,) = _one(pool.kernel_size), _one(pool.stride), _one(pool.dilation)
        count = (x.shape[-1] - d * (k - 1) - 1) // s + 1
        return F.max_pool1d(x, k, s)[..., :count]
    if isinstance(pool, (nn.MaxPool2d,)):
        return pool(x)
    if isinstance(pool, nn.AvgPool1d):
        (k,), (s,) = _one(pool.kernel_size), _one(pool.stride)
        total = torch.round(F.avg_pool1d(x, k, s) * k)
        return torch.clamp(torch.trunc(total / k), -128.0, 127.0)
    k = _pair(pool.kernel_size)
    s = _pair(pool.stride)
    count = k[0] * k[1]
    # avg_pool of integers in float64 times the count recovers the exact window sum.
    total = torch.round(F.avg_pool2d(x, k, s) * count)
    if round_avg:
        q = torch.sign(total) * torch.floor((2 * torch.abs(total) + count) / (2 * count))
    else:
        q = torch.trunc(total / count)
    return torch.clamp(q, -128.0, 127.0)


def _as_2d(pool: nn.Module) -> nn.Module:
    """The 2-D pooling of L x 1 pixels equal to a 1-D pooling module."""
    (k,), (s,) = _one(pool.kernel_size), _one(pool.stride)
    if isinstance(pool, nn.MaxPool1d):
        (d,) = _one(pool.dilation)
        return nn.MaxPool2d((k, 1), (s, 1), dilation=(d, 1))
    return nn.AvgPool2d((k, 1), (s, 1))


def _one(v) -> tuple[int]:
    return (int(v),) if isinstance(v, int) else (int(v[0]),)


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def hardware_params(module: QuantizationAwareModule) -> dict:
    """The integers a quantized layer puts into the accelerator.

    For a layer whose weights hold the quantized checkpoint's values (a vendor `-q`
    checkpoint loaded, or after `quantize_model`):

    * `weights`: int64 numpy array in PyTorch layout;
    * `bias_hw`: the 8-bit bias memory values, floor(stored / 2**(weight_bits - 1))
      (the vendor's checkpoint convention, golden README), or None;
    * `bias`: what the hardware adds to the accumulator, bias_hw * 128, or None;
    * `output_shift`: the final shift, stored shift + 8 - weight_bits (seed 004,
      `output_shift`: narrow weights shift implicitly);
    * `weight_bits`, `stored_output_shift`.
    """
    import numpy as np

    if module.op is None:
        raise ValueError("a pooling-only layer has no weights")
    wb = module.hardware_weight_bits
    w = module.op.weight.detach().to(torch.float64).cpu().numpy()
    if not np.all(np.isfinite(w)) or np.any(w != np.round(w)):
        raise ValueError("the layer's weights are not integers: quantize the model first "
                         "(ai8x_torch.quantize_model) or load a quantized checkpoint")
    weights = w.astype(np.int64)
    bias_hw = None
    if module.op.bias is not None:
        b = module.op.bias.detach().to(torch.float64).cpu().numpy()
        bias_hw = np.floor(b / 2 ** (wb - 1)).astype(np.int64)
    stored = int(round(float(module.output_shift.detach().flatten()[0])))
    return {"weights": weights, "bias_hw": bias_hw,
            "bias": None if bias_hw is None else bias_hw * 128,
            "output_shift": stored + 8 - wb, "stored_output_shift": stored,
            "weight_bits": wb}


# ---------------------------------------------------------------------------------------
# The layer families


def _values(v) -> tuple[int, ...]:
    return tuple(int(e) for e in v) if isinstance(v, (tuple, list)) else (int(v),)


def _check_pool(where: str, pooling: str, size, stride, dilation) -> None:
    """Pooling limits every device has (seed 000, "Pooling", `pool_dilation`).

    Device-dependent limits (pool dilation and depthwise convolution only on the
    MAX78002) are not checked here, unlike the vendor's module, which asserts them when
    the layer is built: models are often built before the device is selected, and the
    converter's legalize stage checks them against the target device with a fix.
    """
    if max(_values(size)) > 16 or min(_values(size)) < 1:
        raise _bad(where, f"pool size {size} is outside 1..16", "pool in two layers")
    if max(_values(stride)) > 16 or min(_values(stride)) < 1:
        raise _bad(where, f"pool stride {stride} is outside 1..16", "use a stride of 1..16")
    dil = _values(dilation)
    if max(dil) > 16 or min(dil) < 1 or (pooling != "Max" and max(dil) > 1):
        raise _bad(where, f"pool dilation {dilation} with {pooling} pooling",
                   "pool dilation (1..16) applies to max pooling only")


def _check_groups(where: str, groups: int, cin: int, cout: int) -> None:
    """Groups are 1, or depthwise: groups = input = output channels (seed 000, "Conv2d"
    limits; MAX78002 only, which legalize checks for the target device)."""
    if groups != 1 and (groups != cin or cin != cout):
        raise _bad(where, f"groups={groups} with {cin} input and {cout} output channels",
                   "use groups=1, or depthwise: groups = input = output channels")


def _pool_module(pooling: str | None, dims: int, size, stride, dilation,
                 where: str = "pooling") -> nn.Module | None:
    if pooling is None:
        return None
    if stride is None:
        stride = size
    if pooling in ("Max", "Avg"):
        _check_pool(where, pooling, size, stride, dilation)
    if pooling == "Max":
        cls = nn.MaxPool1d if dims == 1 else nn.MaxPool2d
        return cls(kernel_size=size, stride=stride, dilation=dilation, padding=0)
    if pooling == "Avg":
        cls = nn.AvgPool1d if dims == 1 else nn.AvgPool2d
        return cls(kernel_size=size, stride=stride, padding=0)
    raise _bad("pooling", f"pooling must be 'Max', 'Avg' or None, not {pooling!r}",
               "use pooling='Max' or 'Avg'")


def _batchnorm(kind: str | None, dims: int, channels: int, bias: bool, eps: float,
               momentum: float, where: str = "batchnorm") -> nn.Module | None:
    if kind is None:
        return None
    if kind not in ("Affine", "NoAffine"):
        raise _bad(where, f"batchnorm must be 'Affine', 'NoAffine' or None, not "
                   f"{kind!r}", "use batchnorm='Affine' or 'NoAffine'")
    if not bias:
        # Folding the BatchNorm into the layer needs a bias to hold its shift; the
        # vendor's ai8x refuses this form as well (its model files take `bias` from
        # train.py's --use-bias, which every training script for them passes).
        raise _bad(where, "a BatchNorm layer needs bias=True",
                   "pass bias=True (the vendor's train.py: --use-bias); the folded "
                   "BatchNorm shift becomes the bias")
    cls = nn.BatchNorm1d if dims == 1 else nn.BatchNorm2d
    return cls(channels, eps=eps, momentum=momentum, affine=kind == "Affine")


class Conv2d(QuantizationAwareModule):
    """2-D pooling ('Max', 'Avg', None), then a 2-D convolution (or transposed
    convolution with `op='ConvTranspose2d'`), then the activation."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | None,
                 op: str = "Conv2d", pooling: str | None = None, pool_size=2,
                 pool_stride=2, pool_dilation=1, stride=1, padding=0, dilation=1,
                 bias: bool = True, activation: str | None = None, wide: bool = False,
                 batchnorm: str | None = None, weight_bits: int | None = None,
                 bias_bits: int | None = None, quantize_activation: bool = False,
                 groups: int = 1, eps: float = 1e-05, momentum: float = 0.05) -> None:
        pool = _pool_module(pooling, 2, pool_size, pool_stride, pool_dilation,
                            type(self).__name__)
        if kernel_size is not None:
            _check_groups(type(self).__name__, groups, in_channels, out_channels)
        bn = _batchnorm(batchnorm, 2, out_channels, bool(bias), eps, momentum,
                        f"{type(self).__name__}({in_channels}, {out_channels}) batchnorm")
        if kernel_size is None:
            opn = None
        else:
            if isinstance(kernel_size, tuple):
                kernel_size = kernel_size[0]
            if op == "Conv2d":
                opn = nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size,
                                stride=stride, padding=padding, dilation=dilation,
                                bias=bool(bias), groups=groups)
            elif op == "ConvTranspose2d":
                # The hardware's transposed convolution doubles the size (seed 000).
                opn = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=kernel_size,
                                         stride=stride, output_padding=1, padding=padding,
                                         dilation=dilation, bias=bool(bias), groups=groups)
            else:
                raise _bad(type(self).__name__, f"op must be 'Conv2d' or "
                           f"'ConvTranspose2d', not {op!r}", "use one of the two")
        super().__init__(pooling, activation, wide, weight_bits, bias_bits,
                         quantize_activation, pool, opn, bn)


class Conv1d(QuantizationAwareModule):
    """1-D pooling ('Max', 'Avg', None), then a 1-D convolution, then the activation."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | None,
                 pooling: str | None = None, pool_size=2, pool_stride=2, pool_dilation=1,
                 stride=1, padding=0, dilation=1, bias: bool = True,
                 activation: str | None = None, wide: bool = False,
                 batchnorm: str | None = None, weight_bits: int | None = None,
                 bias_bits: int | None = None, quantize_activation: bool = False,
                 groups: int = 1, eps: float = 1e-05, momentum: float = 0.05) -> None:
        pool = _pool_module(pooling, 1, pool_size, pool_stride, pool_dilation,
                            type(self).__name__)
        if kernel_size is not None:
            _check_groups(type(self).__name__, groups, in_channels, out_channels)
        bn = _batchnorm(batchnorm, 1, out_channels, bool(bias), eps, momentum,
                        f"{type(self).__name__}({in_channels}, {out_channels}) batchnorm")
        opn = None if kernel_size is None else nn.Conv1d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, bias=bool(bias), groups=groups)
        super().__init__(pooling, activation, wide, weight_bits, bias_bits,
                         quantize_activation, pool, opn, bn)


class Linear(QuantizationAwareModule):
    """A fully connected layer (the hardware's 1x1 "MLP" layer) and its activation."""

    def __init__(self, in_features: int, out_features: int, pooling: str | None = None,
                 bias: bool | None = None, activation: str | None = None,
                 wide: bool = False, batchnorm: str | None = None,
                 weight_bits: int | None = None, bias_bits: int | None = None,
                 quantize_activation: bool = False) -> None:
        if pooling is not None or batchnorm is not None:
            raise _bad(type(self).__name__, "Linear takes neither pooling nor batchnorm",
                       "pool in the layer before; fold BatchNorm yourself")
        # `bias=None` means no bias, as in the vendor's module.
        super().__init__(None, activation, wide, weight_bits, bias_bits,
                         quantize_activation, None,
                         nn.Linear(in_features, out_features, bias is True), None)
        # The vendor gives the linear op the convolution attributes, as None, so code
        # that reads them from any layer's op works on linear layers too.
        for attr in ("stride", "padding", "dilation", "groups"):
            setattr(self.op, attr, None)


class ConvTranspose2d(Conv2d):
    """Pooling, then a transposed 2-D convolution (stride 2), then the activation."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, op="ConvTranspose2d", **kwargs)


def _variant(name: str, base: type, doc: str, *, pooling: str | None = None,
             activation: str | None = None, batchnorm: bool = False,
             depthwise: bool = False) -> type:
    """A vendor module name that fixes some of its base class's arguments."""

    def __init__(self, *args, **kwargs) -> None:
        if pooling is not None:
            kwargs["pooling"] = pooling
        if activation is not None:
            kwargs["activation"] = activation
        if batchnorm:
            kwargs.setdefault("batchnorm", "Affine")
        if depthwise:
            kwargs["groups"] = args[0] if args else kwargs["in_channels"]
        base.__init__(self, *args, **kwargs)

    return type(name, (base,), {"__init__": __init__, "__doc__": doc,
                                "__module__": "ai8x_torch"})


def _pool_only(name: str, base: type, pooling: str, doc: str) -> type:
    """A pooling-only layer (MaxPool2d, AvgPool1d, ...): pass-through after pooling."""

    def __init__(self, kernel_size, stride=None, dilation=1, **kwargs) -> None:
        if pooling == "Max":
            kwargs["pool_dilation"] = dilation
        base.__init__(self, 0, 0, None, pooling=pooling, pool_size=kernel_size,
                      pool_stride=stride, activation=None, **kwargs)

    return type(name, (base,), {"__init__": __init__, "__doc__": doc,
                                "__module__": "ai8x_torch"})


def _families() -> dict[str, type]:
    out: dict[str, type] = {}
    acts = {"": None, "ReLU": "ReLU", "Abs": "Abs"}
    pools = {"": None, "MaxPool": "Max", "AvgPool": "Avg"}
    for dims, base in (("2d", Conv2d), ("1d", Conv1d)):
        for pname, pooling in pools.items():
            for bn in (False, True):
                for aname, act in acts.items():
                    for dw in ((False, True) if dims == "2d" else (False,)):
                        name = (f"Fused{pname}{'Depthwise' if dw else ''}Conv{dims}"
                                f"{'BN' if bn else ''}{aname}")
                        if name in (f"FusedConv{dims}", "FusedDepthwiseConv2d"):
                            continue
                        out[name] = _variant(
                            name, base, f"{pooling or 'No'} pooling, "
                            f"{'depthwise ' if dw else ''}{dims.upper()} convolution"
                            f"{', BatchNorm' if bn else ''}, activation {act}.",
                            pooling=pooling, activation=act, batchnorm=bn, depthwise=dw)
    out["DepthwiseConv2d"] = _variant("DepthwiseConv2d", Conv2d,
                                      "Depthwise 2-D convolution (MAX78002).", depthwise=True)
    for pname, pooling in pools.items():
        for bn in (False, True):
            for aname, act in acts.items():
                for dw in (False, True):
                    name = (f"Fused{pname}{'Depthwise' if dw else ''}ConvTranspose2d"
                            f"{'BN' if bn else ''}{aname}")
                    if name in ("FusedConvTranspose2d",):
                        continue
                    out[name] = _variant(
                        name, ConvTranspose2d, f"{pooling or 'No'} pooling, "
                        f"{'depthwise ' if dw else ''}transposed 2-D convolution"
                        f"{', BatchNorm' if bn else ''}, activation {act}.",
                        pooling=pooling, activation=act, batchnorm=bn, depthwise=dw)
    out["DepthwiseConvTranspose2d"] = _variant(
        "DepthwiseConvTranspose2d", ConvTranspose2d, "Depthwise transposed 2-D convolution.",
        depthwise=True)
    out["FusedLinearReLU"] = _variant("FusedLinearReLU", Linear, "Linear, then ReLU.",
                                      activation="ReLU")
    out["FusedLinearAbs"] = _variant("FusedLinearAbs", Linear, "Linear, then Abs.",
                                     activation="Abs")
    out["MaxPool2d"] = _pool_only("MaxPool2d", Conv2d, "Max", "2-D max pooling only.")
    out["AvgPool2d"] = _pool_only("AvgPool2d", Conv2d, "Avg", "2-D average pooling only.")
    out["MaxPool1d"] = _pool_only("MaxPool1d", Conv1d, "Max", "1-D max pooling only.")
    out["AvgPool1d"] = _pool_only("AvgPool1d", Conv1d, "Avg", "1-D average pooling only.")
    return out


FAMILIES = _families()


# ---------------------------------------------------------------------------------------
# Element-wise operations


class Eltwise(nn.Module):
    """An element-wise operation over two or more tensors of the same shape.

    The accelerator combines the operands in order and saturates the result to 8 bits
    (seed 000, "Element-wise Operations"); in floating point the range is [-1, 1).
    """

    op_name: str = ""

    def __init__(self, f: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
                 ) -> None:
        super().__init__()
        self.f = f or self._combine

    def _combine(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, *x: torch.Tensor) -> torch.Tensor:
        if len(x) < 2:
            raise _bad(type(self).__name__, f"{len(x)} operand(s); an element-wise "
                       "operation needs 2 to 16", "pass two or more tensors")
        simulate = current_device().simulate
        if simulate:
            for operand in x:
                _check_data(self, operand.to(torch.float64))
        y = x[0]
        for other in x[1:]:
            y = self._combine_int(y, other) if simulate else self.f(y, other)
        if simulate:
            return torch.clamp(y.to(torch.float64), -128.0, 127.0)
        return clamp_fraction(y, current_device().ACTIVATION_BITS)

    def _combine_int(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.f(a.to(torch.float64), b.to(torch.float64))


class Add(Eltwise):
    """Element-wise sum."""

    op_name = "add"

    def _combine(self, a, b):
        return a + b


class Sub(Eltwise):
    """Element-wise difference (first operand minus the others)."""

    op_name = "sub"

    def _combine(self, a, b):
        return a - b


class _Bitwise(Eltwise):
    _fn: Callable = torch.bitwise_or

    def _combine(self, a, b):
        # Fractions in [-1, 1) are the bytes v * 128; combine the bytes, scale back. The
        # gradient passes straight through (bit operations have none).
        ia = torch.round(a.detach() * 128.0).to(torch.int64)
        ib = torch.round(b.detach() * 128.0).to(torch.int64)
        return straight_through(a, type(self)._fn(ia, ib).to(a.dtype) / 128.0)

    def _combine_int(self, a, b):
        return type(self)._fn(a.to(torch.int64), b.to(torch.int64)).to(torch.float64)


class BitwiseOr(_Bitwise):
    """Element-wise bitwise OR of the two's complement bytes."""

    op_name = "or"
    _fn = staticmethod(torch.bitwise_or)


class BitwiseXor(_Bitwise):
    """Element-wise bitwise XOR of the two's complement bytes."""

    op_name = "xor"
    _fn = staticmethod(torch.bitwise_xor)

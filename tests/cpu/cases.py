"""Random CPU-op cases for the property tests: one generator per kind.

Each generator draws parameters from `rng` (shapes, kernels, strides, padding,
dilation, groups, requantization constants from tame to extreme) and returns a
segment plus a batch of int8 samples (random values and the two extremes).
"""
from __future__ import annotations

import os

import numpy as np

from onnx2ai8x.cpu import ops as K
from onnx2ai8x.errors import Ai8xError

# ONNX2AI8X_CPU_CASES=1000 runs the full property sweep (issue 28: >= 1,000 per op).
DEFAULT_CASES = 8
CASES = int(os.environ.get("ONNX2AI8X_CPU_CASES", DEFAULT_CASES))
SAMPLES = 3  # random samples per case, plus all -128 and all 127


def samples(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    rand = rng.integers(-128, 128, (SAMPLES, *shape))
    edges = np.stack([np.full(shape, -128), np.full(shape, 127)])
    return np.concatenate([rand, edges]).astype(np.int8)


def _requant(rng: np.random.Generator, fan_in: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel or shared (M, s): mostly a scale that keeps outputs in range, sometimes
    the accelerator's power of two, sometimes extreme values (M near 2**31, s up to 61)."""
    count = n if rng.random() < 0.5 else 1
    mode = rng.random()
    if mode < 0.15:
        pairs = [K.pow2_requant(int(rng.integers(-2, 20))) for _ in range(count)]
    elif mode < 0.3:
        pairs = [(int(rng.integers(0, 2 ** 31)), int(rng.integers(0, 62)))
                 for _ in range(count)]
    else:
        base = 1.0 / (128.0 * max(1.0, np.sqrt(fan_in)))
        pairs = [K.requant_params(base * float(rng.uniform(0.3, 8.0))) for _ in range(count)]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def _clamp(rng: np.random.Generator) -> dict:
    r = rng.random()
    if r < 0.25:
        return {"act_min": 0, "act_max": 127}
    if r < 0.35:
        lo = int(rng.integers(-128, 128))
        return {"act_min": lo, "act_max": int(rng.integers(lo, 128))}
    return {}


def _spatial(rng: np.random.Generator, nd: int, size_max: int = 12):
    """A spatial input shape with kernel, stride, dilation and padding that fit."""
    while True:
        size = tuple(int(rng.integers(1, size_max + 1)) for _ in range(nd))
        kernel = tuple(int(rng.integers(1, 8)) for _ in range(nd))
        dil = tuple(int(rng.integers(1, 4)) if rng.random() < 0.3 else 1 for _ in range(nd))
        stride = tuple(int(rng.integers(1, 4)) for _ in range(nd))
        pads = tuple(int(rng.integers(0, kernel[a % nd] * dil[a % nd]))
                     if rng.random() < 0.6 else 0 for a in range(2 * nd))
        ok = all(size[a] + pads[a] + pads[nd + a] >= dil[a] * (kernel[a] - 1) + 1
                 for a in range(nd))
        if ok:
            return size, kernel, stride, dil, pads


def gen_conv(rng: np.random.Generator, name: str):
    nd = 1 if rng.random() < 0.3 else 2
    size, kernel, stride, dil, pads = _spatial(rng, nd)
    group = 1
    r = rng.random()
    if r < 0.25:  # depthwise
        cin = int(rng.integers(1, 9))
        group, cout = cin, cin * int(rng.integers(1, 3))
    elif r < 0.35:
        group = int(rng.integers(2, 4))
        cin, cout = group * int(rng.integers(1, 3)), group * int(rng.integers(1, 3))
    else:
        cin, cout = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    w = rng.integers(-128, 128, (cout, cin // group, *kernel))
    if rng.random() < 0.1:
        w = np.full_like(w, -128 if rng.random() < 0.5 else 127)
    limit = np.abs(w.reshape(cout, -1)).sum(axis=1) * 128
    if rng.random() < 0.15:  # bias at the accumulator's limit
        bias = (2 ** 31 - 1 - limit) * rng.choice([-1, 1], cout)
    else:
        bias = rng.integers(-50000, 50000, cout)
    m, s = _requant(rng, w[0].size, cout)
    op = K.conv(name, "x", "y", (cin, *size), w, bias, m, s, strides=stride, pads=pads,
                dilations=dil, group=group, **_clamp(rng))
    return [op], {"x": samples(rng, (cin, *size))}


def gen_dense(rng: np.random.Generator, name: str):
    shape = tuple(int(rng.integers(1, 9)) for _ in range(int(rng.integers(1, 4))))
    k = int(np.prod(shape))
    cout = int(rng.integers(1, 17))
    w = rng.integers(-128, 128, (cout, k))
    bias = rng.integers(-100000, 100000, cout)
    m, s = _requant(rng, k, cout)
    op = K.dense(name, "x", "y", shape, w, bias, m, s, **_clamp(rng))
    return [op], {"x": samples(rng, shape)}


def _pool(rng: np.random.Generator, name: str, kind: str):
    while True:
        nd = 1 if rng.random() < 0.3 else 2
        size, kernel, stride, dil, pads = _spatial(rng, nd)
        c = int(rng.integers(1, 6))
        try:
            if kind == K.MAXPOOL:
                op = K.maxpool(name, "x", "y", (c, *size), kernel, strides=stride, pads=pads,
                               dilations=dil)
            else:
                count = int(np.prod(kernel))
                r = rng.random()
                if r < 0.4:  # padding counts (count_include_pad = 1)
                    m, s = K.avgpool_requant(count, float(rng.uniform(0.5, 2.0)))
                elif r < 0.75:  # real positions only (count_include_pad = 0)
                    m, s = K.avgpool_requant_per_count(count, float(rng.uniform(0.5, 2.0)))
                else:  # extreme constants, shared or per count
                    m, s = _requant(rng, count, count + 1)
                op = K.avgpool(name, "x", "y", (c, *size), kernel, m, s, strides=stride,
                               pads=pads, dilations=dil)
        except Ai8xError:
            continue  # a window of padding only: draw again
        return [op], {"x": samples(rng, (c, *size))}


def gen_maxpool(rng, name):
    return _pool(rng, name, K.MAXPOOL)


def gen_avgpool(rng, name):
    return _pool(rng, name, K.AVGPOOL)


def _shape(rng: np.random.Generator) -> tuple[int, ...]:
    return tuple(int(rng.integers(1, 7)) for _ in range(int(rng.integers(1, 4))))


def _b_shape(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The second input's shape: mostly the same, sometimes broadcast (1 on some axes)."""
    if rng.random() < 0.6:
        return shape
    return tuple(1 if rng.random() < 0.5 else d for d in shape)


def gen_add(rng, name):
    shape = _shape(rng)
    b_shape = _b_shape(rng, shape)
    if rng.random() < 0.2:
        ms = rng.integers(0, 2 ** 31, 2)
        s = int(rng.integers(0, 62))
    else:
        ms = np.array([K.requant_params(float(rng.uniform(0.2, 2.0)))[0] for _ in range(2)])
        s = 31  # requant_params gives 31-bit multipliers for scales in [0.5, 1)
        ms = ms >> int(rng.integers(0, 3))
    op = K.add(name, "a", "b", "y", shape, ms, s, b_shape=b_shape, **_clamp(rng))
    return [op], {"a": samples(rng, shape), "b": samples(rng, b_shape)}


def gen_mul(rng, name):
    shape = _shape(rng)
    b_shape = _b_shape(rng, shape)
    m, s = _requant(rng, 128, 1)
    op = K.mul(name, "a", "b", "y", shape, m, s, b_shape=b_shape, **_clamp(rng))
    return [op], {"a": samples(rng, shape), "b": samples(rng, b_shape)}


def gen_lut(rng, name):
    shape = _shape(rng)
    r = rng.random()
    if r < 0.5:
        fn = list(K.ACTIVATIONS.values())[int(rng.integers(len(K.ACTIVATIONS)))]
        table = K.lut_table(fn, float(rng.uniform(0.005, 0.2)), float(rng.uniform(0.005, 0.2)))
    elif r < 0.7:  # PReLU: one LeakyReLU table per channel
        table = np.stack([K.lut_table(K.leaky_relu(float(a)), 1.0, 1.0)
                          for a in rng.uniform(0.0, 0.5, shape[0])])
    else:
        table = rng.integers(-128, 128, (shape[0] if rng.random() < 0.5 else 1, 256))
    return [K.lut(name, "x", "y", shape, table)], {"x": samples(rng, shape)}


def gen_softmax(rng, name):
    shape = _shape(rng)
    op = K.softmax(name, "x", "y", shape, float(rng.uniform(0.001, 0.5)),
                   axis=int(rng.integers(-len(shape), len(shape))))
    return [op], {"x": samples(rng, shape)}


def gen_argmax(rng, name):
    shape = _shape(rng)
    op = K.argmax(name, "x", "y", shape, axis=int(rng.integers(0, len(shape))))
    x = samples(rng, shape)
    x[0] = rng.integers(-2, 2, shape)  # ties: the first maximum wins
    return [op], {"x": x}


def gen_concat(rng, name):
    shape = _shape(rng)
    axis = int(rng.integers(0, len(shape)))
    n = int(rng.integers(1, 4))
    shapes = [shape[:axis] + (int(rng.integers(1, 5)),) + shape[axis + 1:] for _ in range(n)]
    names = [f"x{i}" for i in range(n)]
    op = K.concat(name, names, "y", shapes, axis=axis)
    return [op], {t: samples(rng, s) for t, s in zip(names, shapes, strict=True)}


def gen_reshape(rng, name):
    shape = _shape(rng)
    n = int(np.prod(shape))
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    d = int(rng.choice(divisors))
    out = (d, n // d) if rng.random() < 0.5 else (n,)
    return [K.reshape(name, "x", "y", shape, out)], {"x": samples(rng, shape)}


def gen_transpose(rng, name):
    shape = tuple(int(rng.integers(1, 6)) for _ in range(int(rng.integers(1, 5))))
    perm = tuple(int(p) for p in rng.permutation(len(shape)))
    return [K.transpose(name, "x", "y", shape, perm)], {"x": samples(rng, shape)}


def gen_chain(rng, name):
    """A stem-to-head segment: conv, activation table, pooling, dense, softmax + argmax
    (exercises the scratch arena's reuse)."""
    c, h, w = int(rng.integers(1, 4)), int(rng.integers(6, 12)), int(rng.integers(6, 12))
    k = int(rng.integers(1, 6))
    cout = int(rng.integers(2, 8))
    wts = rng.integers(-128, 128, (cout, c, k, k))
    m, s = _requant(rng, c * k * k, cout)
    conv = K.conv(f"{name}_c", "x", "t1", (c, h, w), wts, None, m, s, pads=(k // 2,) * 4)
    act = K.lut(f"{name}_l", "t1", "t2", conv.out_shape,
                K.lut_table(K.ACTIVATIONS["Hardswish"], 0.05, 0.05))
    pool = K.maxpool(f"{name}_p", "t2", "t3", act.out_shape, (2, 2), strides=(2, 2))
    n = int(np.prod(pool.out_shape))
    m2, s2 = _requant(rng, n, 10)
    dense = K.dense(f"{name}_d", "t3", "t4", pool.out_shape, rng.integers(-128, 128, (10, n)),
                    None, m2, s2)
    soft = K.softmax(f"{name}_s", "t4", "prob", (10,), 0.1)
    arg = K.argmax(f"{name}_a", "t4", "cls", (10,))
    return [conv, act, pool, dense, soft, arg], {"x": samples(rng, (c, h, w))}


def gen_se(rng, name):
    """A MobileNetV3 squeeze-and-excitation block with Hardswish: global average, two 1x1
    convolutions, Hardsigmoid, a per-channel (broadcast) multiply."""
    c, h, w = int(rng.integers(2, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    mid = int(rng.integers(1, 5))
    gap = K.avgpool(f"{name}_gap", "x", "g", (c, h, w), (h, w), *K.avgpool_requant(h * w))
    m1, s1 = _requant(rng, c, mid)
    fc1 = K.conv(f"{name}_fc1", "g", "r", (c, 1, 1), rng.integers(-128, 128, (mid, c, 1, 1)),
                 rng.integers(-999, 999, mid), m1, s1, act_min=0)
    m2, s2 = _requant(rng, mid, c)
    fc2 = K.conv(f"{name}_fc2", "r", "e", (mid, 1, 1), rng.integers(-128, 128, (c, mid, 1, 1)),
                 None, m2, s2)
    gate = K.lut(f"{name}_hs", "e", "gate", (c, 1, 1),
                 K.lut_table(K.ACTIVATIONS["Hardsigmoid"], 0.05, 1 / 127))
    scaled = K.mul(f"{name}_mul", "x", "gate", "xs", (c, h, w), *K.requant_params(1 / 127),
                   b_shape=(c, 1, 1))
    act = K.lut(f"{name}_hswish", "xs", "y", (c, h, w),
                K.lut_table(K.ACTIVATIONS["Hardswish"], 0.05, 0.05))
    return [gap, fc1, fc2, gate, scaled, act], {"x": samples(rng, (c, h, w))}


GENERATORS = {K.CONV: gen_conv, K.DENSE: gen_dense, K.MAXPOOL: gen_maxpool,
              K.AVGPOOL: gen_avgpool, K.ADD: gen_add, K.MUL: gen_mul, K.LUT: gen_lut,
              K.SOFTMAX: gen_softmax, K.ARGMAX: gen_argmax, K.CONCAT: gen_concat,
              K.RESHAPE: gen_reshape, K.TRANSPOSE: gen_transpose, "chain": gen_chain,
              "se": gen_se}

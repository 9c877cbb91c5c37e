"""A recovered export is exactly its source: checked on a sample, layer by layer.

The exporter dialect that read the integers (importer/dialects/vendor_export) also
writes its canonical model with the hardware's arithmetic put back in: the output
shift's rounding floor(0.5 + x * 128) / 128, the pooling unit's truncation and the
element-wise saturation. On onnxruntime that model computes, in float units, exactly
the codes the accelerator computes (float32 holds every value while an accumulator
stays below 2**24). The recovered network's reference run (custom_ops) must give the
same values at every layer; the first layer that does not is a bug of the recovery,
and the conversion stops saying so (issue 24: "a recovered export that is not exactly
its source is a bug and says so").
"""
from __future__ import annotations

import numpy as np

from ..errors import Ai8xError
from ..network import Op

# float32 adds integers exactly below this (24-bit significand)
_EXACT_F32 = float(1 << 24)


def _sample(fm, mapping, x: np.ndarray | None) -> np.ndarray:
    """One sample in the model's input units: the given one, else a fixed pseudo-random
    int8 pattern mapped back through the input mapping (exact: a power-of-two scale)."""
    shape = tuple(fm.input_model_shape)
    if x is not None:
        x = np.asarray(x, np.float64)
        return (x.reshape(shape) if x.size == int(np.prod(shape)) else x[0])[np.newaxis]
    q = np.random.default_rng(24).integers(-128, 128, (1, *mapping.shape))
    return (q * mapping.scale).reshape(1, *shape)


def _accumulator_bound(lay) -> float:
    """The largest |accumulator| the layer can reach on int8 data (8-bit inputs)."""
    if lay.weights is None:
        return 0.0
    w = np.abs(np.asarray(lay.weights, np.float64))
    out_axis = 1 if lay.operator == Op.CONVTRANSPOSE2D else 0
    per_out = np.moveaxis(w, out_axis, 0).reshape(w.shape[out_axis], -1).sum(axis=1)
    bias = 0.0 if lay.bias_hw is None else float(np.max(np.abs(lay.bias_hw))) * 128
    return float(per_out.max()) * 128 * max(1, lay.operands) + bias


def check_recovery(fm, result, units, x: np.ndarray | None = None) -> tuple[str, ...]:
    """Raise when the recovered network (`result`, quantize.ptq.QuantResult; `units`:
    every layer's float units per code) differs from the source's rounded canonical
    model on the sample `x` (the model's input units; None: a fixed pseudo-random
    one); returns warnings for layers float32 cannot check exactly."""
    blob = None if fm.canonical is None else fm.canonical.fact("verify_model")
    if blob is None:
        return ()
    import onnxruntime as ort

    import custom_ops
    from custom_ops.builder import build_proto

    from .ptq import _layer_view

    layers = result.network.layers
    # Small models, one sample: no graph optimization and one thread (an onnxruntime
    # thread pool costs more to start than these runs take).
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    sess = ort.InferenceSession(blob, options, providers=["CPUExecutionProvider"])
    known = {o.name for o in sess.get_outputs()}
    wanted = sorted({info.tensor for info in fm.layers if info.tensor in known})
    xs = _sample(fm, result.mapping, x)
    ref = dict(zip(wanted, sess.run(wanted, {sess.get_inputs()[0].name:
                                            xs.astype(np.float32)}), strict=True))
    qnet_all = build_proto(result.network, outputs=list(range(len(layers))),
                           avg_pool_rounding=False)
    got = custom_ops.run(custom_ops.session(qnet_all, threads=1),
                         result.mapping.quantize(xs))
    warnings = []
    for i, (lay, info) in enumerate(zip(layers, fm.layers, strict=True)):
        if info.tensor not in ref:
            continue
        mine = _layer_view(np.asarray(got[i], np.float64), info) * units[i]
        theirs = np.asarray(ref[info.tensor], np.float64).reshape(1, -1)
        if mine.shape == theirs.shape and np.array_equal(mine, theirs):
            continue
        if _accumulator_bound(lay) >= _EXACT_F32:
            warnings.append(f"warning[float.vendor-unverified] layer {lay.name}: its "
                            "accumulators can exceed float32's exact range, so the check "
                            "of the recovery against the export is not exact here")
            continue
        diff = np.flatnonzero(mine.ravel() != theirs.ravel()) if mine.shape == \
            theirs.shape else np.array([0])
        k = int(diff[0])
        raise Ai8xError(
            "float.vendor-not-exact", f"layer {lay.name} (node {', '.join(info.nodes)})",
            f"the recovered integer network differs from the export it was read from at "
            f"this layer ({diff.size} of {theirs.size} values on the sample, the first at "
            f"index {k}: {_show(mine, k)} instead of {_show(theirs, k)})",
            "this is a bug in onnx2ai8x's recovery of exports: please report it with the "
            "model")
    return tuple(warnings)


def _show(a: np.ndarray, k: int) -> str:
    return f"{float(a.ravel()[k]):.6g}" if k < a.size else "nothing"


__all__ = ["check_recovery"]

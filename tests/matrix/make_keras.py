"""Write the matrix's Keras and TFLite cells (run after make_torch.py, which writes the
inputs).

    /work/envs/tf/bin/python tests/matrix/make_keras.py [ROW ...]

Runs in an environment of its own (written with tensorflow-cpu 2.21, Keras 3.15,
tf2onnx 1.17), e.g. `python3.11 -m venv /tmp/tf && /tmp/tf/bin/pip install
tensorflow-cpu tf2onnx`. Not run by the tests: they read what it wrote.

Each row is written as a Keras user writes it (channels-last: images (8, 8, 3),
sequences (8 steps, 8 features)), with seeded initial weights (BatchNormalization with
seeded non-trivial statistics), saved the way Keras 3 saves for serving
(`model.export`), and converted with the tf2onnx command line:

* `keras/`: `--saved-model` and `--output` only (tf2onnx's defaults, NHWC input);
* `keras_nchw/`: the same with `--inputs-as-nchw x`;
* `tflite_float_io/`: `tf.lite.TFLiteConverter.from_saved_model` with full-integer
  quantization (`optimizations=[DEFAULT]`, the calibration inputs as the representative
  dataset, `TFLITE_BUILTINS_INT8`), float input and output, then `tf2onnx --tflite`;
* `tflite_int8_io/`: the same with `inference_input_type = inference_output_type =
  tf.int8`, the usual export of edge tools.

`models/keras.npz` holds the Keras model's outputs on the held-out inputs (NHWC, as it
computes them), `models/tflite_*.npz` the TFLite interpreter's (int8 outputs
dequantized; `<row>.input_q` and `<row>.output_q` are the int8 model's input and output
(scale, zero point)). A cell a tool fails to write is listed with the tool's error in
`models/<column>/not_made.json`.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import catalogue as cat  # noqa: E402


def nhwc(x: np.ndarray) -> np.ndarray:
    """NCHW / NCL -> channels-last."""
    return np.ascontiguousarray(np.moveaxis(x, 1, -1))


def inputs(kind: str, part: str = "held") -> np.ndarray:
    return nhwc(np.load(cat.DATA)[f"{part}_{kind}"])


def _bn(k, c: int):
    rng = np.random.default_rng(c)
    bn = k.layers.BatchNormalization()
    return bn, [0.5 + rng.random(c), 0.2 * rng.standard_normal(c),
                0.3 * rng.standard_normal(c), 0.5 + rng.random(c)]


def build(k, name: str):  # noqa: C901 - one branch per row
    """Row `name` as a Keras model (None: Keras cannot write it)."""
    L = k.layers
    r = cat.row(name)
    i = k.Input((8, 8, 3) if r.kind == "img" else (8, 8), name="x")
    late = []  # (layer, weights) set once built

    def c2(x, c, k_=3, act="relu", **kw):
        kw.setdefault("padding", "same")
        return L.Conv2D(c, k_, activation=act, **kw)(x)

    def c1(x, c, k_=3, act="relu", **kw):
        kw.setdefault("padding", "same")
        return L.Conv1D(c, k_, activation=act, **kw)(x)

    mp = L.MaxPooling2D(2)
    if name == "conv2d_3x3":
        y = c2(i, 4)
    elif name == "conv2d_valid":
        y = c2(i, 4, act=None, padding="valid")
    elif name == "conv2d_1x1":
        y = mp(c2(i, 4, 1))
    elif name == "conv2d_stride2":
        y = c2(i, 8, strides=2)
    elif name == "conv2d_dilation2":
        y = c2(i, 4, dilation_rate=2)
    elif name == "conv2d_groups":
        y = c2(mp(c2(i, 8)), 8, groups=2)
    elif name == "conv2d_depthwise":
        y = L.ReLU()(L.DepthwiseConv2D(3, padding="same")(mp(c2(i, 8))))
    elif name == "conv2d_nobias":
        y = c2(i, 4, use_bias=False)
    elif name == "conv2d_5x5":
        y = c2(c2(i, 4, 5), 4)
    elif name == "conv1d_k9":
        y = c1(i, 8, 9)
    elif name == "conv1d":
        y = c1(i, 8)
    elif name == "conv1d_valid":
        y = c1(i, 8, act=None, padding="valid")
    elif name == "conv1d_stride2":
        y = c1(i, 8, strides=2)
    elif name == "conv1d_dilation2":
        y = c1(i, 8, dilation_rate=2)
    elif name == "conv1d_depthwise":
        y = L.ReLU()(L.DepthwiseConv1D(3, padding="same")(c1(i, 8)))
    elif name == "convtranspose2d":
        y = L.Conv2DTranspose(4, 3, strides=2, padding="same", activation="relu")(
            mp(c2(i, 4)))
    elif name == "maxpool2d":
        y = mp(c2(i, 8))
    elif name == "avgpool2d":
        y = L.AveragePooling2D(2)(c2(i, 8))
    elif name == "maxpool1d":
        y = L.MaxPooling1D(2)(c1(i, 8))
    elif name == "avgpool1d":
        y = L.AveragePooling1D(2)(c1(i, 8))
    elif name == "global_avgpool2d":
        y = L.GlobalAveragePooling2D()(c2(i, 16))
    elif name == "global_maxpool2d":
        y = L.GlobalMaxPooling2D()(c2(i, 16))
    elif name == "global_avgpool1d":
        y = L.GlobalAveragePooling1D()(c1(i, 16))
    elif name == "adaptive_avgpool2d":
        y = L.AdaptiveAveragePooling2D(4)(c2(i, 4))
    elif name == "flatten_linear":
        y = L.Dense(10)(L.Flatten()(mp(c2(i, 8))))
    elif name == "mlp":
        y = L.Dense(10)(L.Dense(16, activation="relu")(L.Flatten()(i)))
    elif name in ("add", "sub", "mul", "concat"):
        x = mp(c2(i, 4))
        a = c2(x, 4)
        b = c2(x, 4, 1) if name == "concat" else c2(x, 4, act=None)
        join = {"add": L.Add, "sub": L.Subtract, "mul": L.Multiply,
                "concat": L.Concatenate}[name]
        y = join()([a, b])
    elif name == "relu6":
        y = L.ReLU(6.0)(c2(i, 4, act=None))
    elif name == "abs":
        y = L.Lambda(k.ops.abs)(c2(i, 4, act=None))
    elif name == "no_activation":
        y = c2(mp(c2(i, 8, act=None)), 4, act=None)
    elif name == "bn_fused":
        bn, w = _bn(k, 4)
        late.append((bn, w))
        y = L.ReLU()(bn(c2(i, 4, act=None, use_bias=False)))
    elif name == "bn_unfused":
        bn, w = _bn(k, 8)
        late.append((bn, w))
        y = c2(bn(mp(c2(i, 8))), 4, padding="valid")
    elif name == "input_norm":
        norm = L.Normalization(mean=[0.5, 0.3, 0.5], variance=[0.0625, 0.04, 0.09])
        y = mp(c2(norm(i), 4))
    elif name == "upsample2d":
        y = c2(L.UpSampling2D(2)(mp(c2(i, 4))), 4)
    elif name == "upsample1d":
        y = c1(L.UpSampling1D(2)(c1(i, 4)), 4)
    else:
        return None
    model = k.Model(i, y)
    for layer, w in late:
        layer.set_weights([np.asarray(v, np.float32) for v in w])
    return model


def tf2onnx(args: list[str]) -> None:
    """tf2onnx's command line (`python -m tf2onnx.convert ARGS`), run in this process:
    the same code, without starting tensorflow again for each file."""
    from tf2onnx import convert

    argv = sys.argv
    sys.argv = ["tf2onnx.convert", *args]
    try:
        convert.main()
    finally:
        sys.argv = argv


def clean(path: Path) -> None:
    """Drop the producer version (the same file from every build); refuse a file that
    is not ONNX (tf2onnx leaves a TensorFlow op it cannot convert in the graph)."""
    import onnx

    model = onnx.load(str(path))
    model.producer_version = ""
    foreign = sorted({n.op_type for n in model.graph.node if n.domain in ("", "ai.onnx")
                      and not onnx.defs.has(n.op_type)})
    if foreign:
        path.unlink()
        raise ValueError(f"tf2onnx left operators that are not ONNX: {', '.join(foreign)}")
    onnx.save(model, str(path))


def tflite(saved: Path, kind: str, int8_io: bool) -> bytes:
    import tensorflow as tf

    cal = inputs(kind, "cal")
    conv = tf.lite.TFLiteConverter.from_saved_model(str(saved))
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([cal[k:k + 1]] for k in range(len(cal)))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if int8_io:
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def run_tflite(blob: bytes, x: np.ndarray) -> tuple[np.ndarray, list, list]:
    """The interpreter's outputs on x (float; int8 I/O quantized and dequantized), and
    the input's and output's (scale, zero point)."""
    import tensorflow as tf

    it = tf.lite.Interpreter(model_content=blob)
    it.allocate_tensors()
    i, o = it.get_input_details()[0], it.get_output_details()[0]
    iq, oq = list(i["quantization"]), list(o["quantization"])
    outs = []
    for k in range(len(x)):
        v = x[k:k + 1]
        if i["dtype"] == np.int8:
            v = np.clip(np.round(v / iq[0]) + iq[1], -128, 127).astype(np.int8)
        it.set_tensor(i["index"], v)
        it.invoke()
        y = it.get_tensor(o["index"])
        if o["dtype"] == np.int8:
            y = (y.astype(np.float32) - oq[1]) * oq[0]
        outs.append(y)
    return np.concatenate(outs), iq, oq


def _update(path: Path, arrays: dict) -> None:
    have = dict(np.load(path)) if path.exists() else {}
    have.update(arrays)
    np.savez_compressed(path, **dict(sorted(have.items())))


def _not_made(col: str, rowname: str, reason: str | None) -> None:
    path = cat.MODELS / col / "not_made.json"
    have = json.loads(path.read_text()) if path.exists() else {}
    if reason is None:
        have.pop(rowname, None)
    else:
        have[rowname] = reason
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(sorted(have.items())), indent=1) + "\n")


def _last_line(exc: Exception) -> str:
    text = getattr(exc, "stderr", None) or str(exc)
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else type(exc).__name__


def write_row(k, rowname: str, outs: dict) -> None:
    r = cat.row(rowname)
    model = build(k, rowname)
    if model is None:
        return
    x = inputs(r.kind)
    outs.setdefault("keras", {})[rowname] = np.asarray(model.predict(x, verbose=0),
                                                       np.float16)
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "saved"
        model.export(str(saved), verbose=False)
        for col, extra in (("keras", []), ("keras_nchw", ["--inputs-as-nchw", "x"])):
            path = cat.model_path(col, rowname)
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                tf2onnx(["--saved-model", str(saved), "--output", str(path), *extra])
                clean(path)
            except Exception as exc:  # noqa: BLE001 - the tool's own failure, recorded
                _not_made(col, rowname, _last_line(exc))
                path.unlink(missing_ok=True)
                continue
            _not_made(col, rowname, None)
        for col, int8_io in (("tflite_float_io", False), ("tflite_int8_io", True)):
            path = cat.model_path(col, rowname)
            try:
                blob = tflite(saved, r.kind, int8_io)
                lite = Path(tmp) / f"{col}.tflite"
                lite.write_bytes(blob)
                tf2onnx(["--tflite", str(lite), "--output", str(path)])
                clean(path)
            except Exception as exc:  # noqa: BLE001 - the tool's own failure, recorded
                _not_made(col, rowname, _last_line(exc))
                path.unlink(missing_ok=True)
                continue
            _not_made(col, rowname, None)
            y, iq, oq = run_tflite(blob, x)
            outs.setdefault(col, {})[rowname] = y.astype(np.float16)
            if int8_io:
                outs[col][f"{rowname}.input_q"] = np.asarray(iq, np.float64)
                outs[col][f"{rowname}.output_q"] = np.asarray(oq, np.float64)


def main(only: list[str]) -> None:
    import tensorflow as tf

    k = tf.keras
    tf.config.experimental.enable_op_determinism()
    outs: dict = {}
    for r in cat.ROWS:
        if only and r.name not in only:
            continue
        k.utils.set_random_seed(cat.seed(r.name))
        write_row(k, r.name, outs)
        print("wrote", r.name, flush=True)
    for col, arrays in outs.items():
        _update(cat.column(col).outputs, arrays)


if __name__ == "__main__":
    main(sys.argv[1:])

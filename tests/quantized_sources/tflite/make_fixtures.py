"""TFLite full-integer models converted with tf2onnx (issue 34 item 3: integer I/O).

Not run by the tests (they need neither tensorflow nor tf2onnx): it wrote the committed
`*.onnx` files and their source outputs (`*_source.npz`: the TFLite interpreter's
input and output on seeded samples). Run it in an environment of its own
(tensorflow-cpu, Keras 3, tf2onnx 1.17), e.g.

    /work/envs/tf/bin/python tests/quantized_sources/tflite/make_fixtures.py

One small Keras CNN (seeded initial weights), converted by TFLiteConverter with
`optimizations = [tf.lite.Optimize.DEFAULT]`, a representative dataset and
`supported_ops = [TFLITE_BUILTINS_INT8]`, three ways:

* `int8_io`: `inference_input_type = inference_output_type = tf.int8` (the usual
  export of Edge-AI tools), samples in [0, 1) (the input's zero point is -128);
* `int8_io_symmetric`: the same with samples in [-1, 1] (zero point -1: TFLite's
  asymmetric int8 puts 255 steps across the range);
* `int8_io_zero`: samples in [-1.28, 1.27], the range whose zero point is 0 (scale
  0.01): the file's codes are then the accelerator's;
* `int8_io_valid`: samples in [-1, 1] (zero point -1) into a model whose first
  convolution pads nothing (`padding="valid"`): the zero point's share folds into that
  layer's integer bias;
* `float_io`: the converter's default float input and output (what the refusal of an
  integer input the accelerator cannot take exactly proposes).

Each .tflite file goes through `python -m tf2onnx.convert --tflite F --output F.onnx`
and nothing else.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SHAPE = (8, 8, 3)


def build(keras, first_padding: str = "same"):
    L = keras.layers
    i = keras.Input(SHAPE, name="image")
    x = L.Conv2D(8, 3, padding=first_padding, activation="relu")(i)
    x = L.MaxPooling2D(2)(x)
    x = L.Conv2D(8, 3, padding="same", activation="relu")(x)
    x = L.Flatten()(x)
    return keras.Model(i, L.Dense(4)(x))


RANGES = {"int8_io": (0.0, 1.0), "int8_io_symmetric": (-1.0, 1.0),
          "int8_io_zero": (-1.28, 1.27), "int8_io_valid": (-1.0, 1.0),
          "float_io": (0.0, 1.0)}


def samples(name: str, n: int, seed: int) -> np.ndarray:
    low, high = RANGES[name]
    rng = np.random.default_rng(seed)
    x = rng.uniform(low, high, (n, *SHAPE)).astype(np.float32)
    if low < 0:  # the range TFLite sees: exactly [low, high] (first sample's corners)
        x[0, 0, 0, 0], x[0, 0, 0, 1] = low, high
    return x


def tflite(tf, model, name: str, integer_io: bool) -> bytes:
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    cal = samples(name, 64, 1)
    conv.representative_dataset = lambda: ([x[np.newaxis]] for x in cal)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if integer_io:
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def source_outputs(tf, blob: bytes, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The TFLite interpreter's input (as the file takes it) and output per sample."""
    interp = tf.lite.Interpreter(model_content=blob)
    interp.allocate_tensors()
    inp, out = interp.get_input_details()[0], interp.get_output_details()[0]
    feed, got = [], []
    for s in x:
        v = s[np.newaxis]
        if inp["dtype"] != np.float32:
            scale, zero = inp["quantization"]
            v = np.clip(np.floor(v / scale + 0.5) + zero, -128, 127).astype(inp["dtype"])
        interp.set_tensor(inp["index"], v)
        interp.invoke()
        feed.append(v[0])
        got.append(interp.get_tensor(out["index"])[0])
    return np.stack(feed), np.stack(got)


def main(only: list[str]) -> None:
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(34)
    model = build(keras)
    valid = build(keras, "valid")
    for name in RANGES:
        if only and name not in only:
            continue
        blob = tflite(tf, valid if name == "int8_io_valid" else model, name,
                      name != "float_io")
        feed, out = source_outputs(tf, blob, samples(name, 16, 2))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}.tflite"
            path.write_bytes(blob)
            subprocess.run([sys.executable, "-m", "tf2onnx.convert", "--tflite", str(path),
                            "--output", str(HERE / f"{name}.onnx")], check=True,
                           capture_output=True)
        np.savez(HERE / f"{name}_source.npz", x=feed, y=out,
                 float_x=samples(name, 16, 2))
        print("wrote", name)


if __name__ == "__main__":
    main(sys.argv[1:])

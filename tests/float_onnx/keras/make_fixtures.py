"""Train small Keras models on the digits and export them with tf2onnx's defaults.

Not run by the tests (they need neither tensorflow nor tf2onnx): it wrote the committed
`*.onnx` files, `held_out.npz` and the calibration sets `cal_*.npy`. Run it in an
environment of its own, e.g.

    python3.11 -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu tf2onnx \
        scikit-learn
    /tmp/tf/bin/python tests/float_onnx/keras/make_fixtures.py [NAME ...]

(written with tensorflow-cpu 2.21, Keras 3.15, tf2onnx 1.17). Each model is saved the
way Keras 3 saves for serving (`model.export`) and converted with the tf2onnx command
line and nothing but `--saved-model` and `--output`, as its README shows; two are also
converted with `--inputs-as-nchw`. `fixtures.json` records each model's float accuracy
as Keras computes it and the device it is meant for.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from digits import CALIBRATION, HELD_OUT, SEED, layout  # noqa: E402


def split():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)
    x_rest, x_test, y_rest, y_test = train_test_split(
        x, d.target, test_size=HELD_OUT, random_state=SEED, stratify=d.target)
    x_train, x_cal, y_train, _ = train_test_split(
        x_rest, y_rest, test_size=CALIBRATION, random_state=SEED, stratify=y_rest)
    return x_train, y_train, x_cal, x_test, y_test


def models(k, x_train_gray):
    """name -> (input kind, device, builder); each builder returns an uncompiled model."""
    L = k.layers

    def gray_cnn():
        # the one-channel model: tf2onnx writes its NHWC->NCHW change as a Reshape
        i = k.Input((8, 8, 1), name="image")
        x = L.Conv2D(16, 3, padding="same", use_bias=False)(i)
        x = L.BatchNormalization()(x)
        x = L.ReLU()(x)
        x = L.MaxPooling2D(2)(x)
        x = L.Conv2D(32, 3, padding="same", activation="relu")(x)
        x = L.Flatten()(x)  # flattened channels-last: the dense weights are permuted
        return k.Model(i, L.Dense(10)(x))

    def gray_norm():
        # Rescaling and Normalization on the input, padding="same" with stride 2 where
        # TensorFlow's padding is symmetric (odd size), global average pooling
        norm = L.Normalization()
        norm.adapt(x_train_gray[..., np.newaxis] * 16.0)
        i = k.Input((8, 8, 1), name="image")
        x = L.Rescaling(16.0)(i)
        x = norm(x)
        x = L.Conv2D(16, 3, activation="relu")(x)  # 6x6
        x = L.MaxPooling2D(2, strides=1)(x)  # 5x5
        x = L.Conv2D(32, 3, strides=2, padding="same", activation="relu")(x)  # 3x3
        x = L.GlobalAveragePooling2D()(x)
        return k.Model(i, L.Dense(10)(x))

    def rgb_concat():
        # three channels, Concatenate, a Dense on a 4-D tensor (a 1x1 convolution)
        i = k.Input((8, 8, 3), name="image")
        x = L.Conv2D(16, 3, padding="same", activation="relu")(i)
        a = L.Conv2D(16, 1, activation="relu")(x)
        b = L.Conv2D(16, 3, padding="same", activation="relu")(x)
        x = L.Concatenate()([a, b])
        x = L.Dense(24, activation="relu")(x)
        x = L.MaxPooling2D(2)(x)
        x = L.Flatten()(x)
        return k.Model(i, L.Dense(10)(x))

    def rgb_separable():
        # DepthwiseConv2D and SeparableConv2D (MAX78002 has depthwise convolutions)
        i = k.Input((8, 8, 3), name="image")
        x = L.Conv2D(16, 3, padding="same", activation="relu")(i)
        x = L.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
        x = L.BatchNormalization()(x)
        x = L.ReLU()(x)
        x = L.SeparableConv2D(32, 3, padding="same", activation="relu")(x)
        x = L.MaxPooling2D(2)(x)
        x = L.Flatten()(x)
        return k.Model(i, L.Dense(10)(x))

    def rows_conv1d():
        # each digit as 8 steps of 8 features (rows): Conv1D, MaxPooling1D, Flatten
        i = k.Input((8, 8), name="rows")
        x = L.Conv1D(16, 3, padding="same", activation="relu")(i)
        x = L.Conv1D(32, 3, padding="same", activation="relu")(x)
        x = L.MaxPooling1D(2)(x)
        x = L.Flatten()(x)
        return k.Model(i, L.Dense(10)(x))

    def rgb_norm():
        # a Rescaling with an offset and a per-channel Normalization before a zero-padded
        # convolution: an offset and a scale per channel on the input
        norm = L.Normalization()
        norm.adapt(layout(x_train_gray, "rgb") * 2.0 - 1.0)
        i = k.Input((8, 8, 3), name="image")
        x = L.Rescaling(2.0, offset=-1.0)(i)
        x = norm(x)
        x = L.Conv2D(16, 3, padding="same", activation="relu")(x)
        x = L.MaxPooling2D(2)(x)
        x = L.Conv2D(32, 3, padding="same", activation="relu")(x)
        x = L.GlobalAveragePooling2D()(x)
        return k.Model(i, L.Dense(10)(x))

    def rgb_residual():
        # a residual Add with a ReLU after it, ReLU(6), AveragePooling2D, Dropout and a
        # softmax output (left to the CPU)
        i = k.Input((8, 8, 3), name="image")
        x = L.Conv2D(16, 3, padding="same", use_bias=False)(i)
        x = L.BatchNormalization()(x)
        x = L.ReLU(6.0)(x)
        y = L.Conv2D(16, 3, padding="same")(x)
        y = L.BatchNormalization()(y)
        x = L.Activation("relu")(L.Add()([x, y]))
        x = L.AveragePooling2D(2)(x)
        x = L.Conv2D(32, 3, padding="same", activation="relu")(x)
        x = L.GlobalAveragePooling2D()(x)
        x = L.Dropout(0.2)(x)
        return k.Model(i, L.Dense(10, activation="softmax")(x))

    return {
        "gray_cnn": ("gray", "MAX78000", gray_cnn),
        "gray_norm": ("gray", "MAX78000", gray_norm),
        "rgb_concat": ("rgb", "MAX78000", rgb_concat),
        "rgb_separable": ("rgb", "MAX78002", rgb_separable),
        "rows_conv1d": ("rows", "MAX78000", rows_conv1d),
        "rgb_norm": ("rgb", "MAX78000", rgb_norm),
        "rgb_residual": ("rgb", "MAX78000", rgb_residual),
    }


def refused(k):
    """Models that cannot be taken exactly (untrained: only their form matters)."""
    L = k.layers
    i = k.Input((8, 8, 1), name="image")
    # 8 is even: TensorFlow pads a 3x3 stride-2 "same" convolution 0 before, 1 after
    x = L.Conv2D(8, 3, strides=2, padding="same", activation="relu")(i)
    x = L.Flatten()(x)
    return {"refused_same_stride2_even": k.Model(i, L.Dense(10)(x))}


def export(model, name: str, *extra: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "saved"
        model.export(str(saved), verbose=False)
        subprocess.run([sys.executable, "-m", "tf2onnx.convert", "--saved-model",
                        str(saved), "--output", str(HERE / f"{name}.onnx"), *extra],
                       check=True, capture_output=True)


def main(only: list[str]) -> None:
    """Make the fixtures named in `only` (all when empty); fixtures.json keeps the
    others' entries."""
    import tensorflow as tf

    k = tf.keras
    tf.config.experimental.enable_op_determinism()
    x_train, y_train, x_cal, x_test, y_test = split()
    np.savez_compressed(HERE / "held_out.npz", x=x_test, y=y_test)
    for kind in ("gray", "rgb", "rows"):
        np.save(HERE / f"cal_{kind}.npy", layout(x_cal, kind))
    path = HERE / "fixtures.json"
    facts = json.loads(path.read_text()) if only and path.exists() else {}
    for n, (name, (kind, device, build)) in enumerate(models(k, x_train).items()):
        if only and name not in only:
            continue
        k.utils.set_random_seed(SEED + n)
        model = build()
        softmax = model.layers[-1].get_config().get("activation") == "softmax"
        model.compile(optimizer=k.optimizers.Adam(3e-3), metrics=["accuracy"],
                      loss=k.losses.SparseCategoricalCrossentropy(from_logits=not softmax))
        model.fit(layout(x_train, kind), y_train, epochs=30, batch_size=32, verbose=0)
        acc = float(model.evaluate(layout(x_test, kind), y_test, verbose=0)[1])
        export(model, name)
        facts[name] = {"input": kind, "device": device, "keras_accuracy": round(acc, 6)}
        if name in ("gray_cnn", "gray_norm"):
            export(model, f"{name}_nchw", "--inputs-as-nchw", "image")
            facts[f"{name}_nchw"] = dict(facts[name], input="gray_nchw")
        print(f"{name}: {acc:.4f}", flush=True)
    for name, model in refused(k).items():
        if not only or name in only:
            export(model, name)
    path.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])

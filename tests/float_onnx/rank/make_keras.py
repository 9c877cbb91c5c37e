"""Train small Keras models on the digits and export them with tf2onnx's defaults
(issue 34: Keras' 1-D layers, strided "same" Conv1D, UpSampling2D, Conv2DTranspose).

Not run by the tests (they need neither tensorflow nor tf2onnx): it wrote the
`keras_*.onnx` files and `fixtures_keras.json`. Run it in an environment of its own
(tensorflow-cpu 2.21, Keras 3.15, tf2onnx 1.17, scikit-learn), as
`../keras/make_fixtures.py` says:

    /path/to/tf/bin/python tests/float_onnx/rank/make_keras.py [NAME ...]

(`NAME ...`: remake only those; TensorFlow's training is not bit-reproducible, so a run
gives slightly different weights.)
Each model is saved with `model.export` and converted by the tf2onnx command line with
`--saved-model` and `--output` only. The digits are the Keras fixtures' split: the rows
of each image as 8 steps x 8 features (Keras' 1-D layout), or (8, 8, 1) images.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "keras"))
from digits import SEED, layout  # noqa: E402
from make_fixtures import split  # noqa: E402


def export(model, name: str) -> None:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "saved"
        model.export(str(saved), verbose=False)
        subprocess.run([sys.executable, "-m", "tf2onnx.convert", "--saved-model",
                        str(saved), "--output", str(HERE / f"{name}.onnx")],
                       check=True, capture_output=True)


def models(k):
    """name -> (input kind, builder, trained)."""
    L = k.layers

    def kws1d():
        # Conv1D stack, MaxPooling1D, AveragePooling1D, GlobalAveragePooling1D, Dense:
        # tf2onnx writes each 1-D layer as ExpandDims -> 2-D operation -> Squeeze
        i = k.Input((8, 8), name="rows")
        x = L.Conv1D(16, 3, padding="same", activation="relu")(i)
        x = L.Conv1D(16, 3, padding="same", activation="relu")(x)
        x = L.MaxPooling1D(2)(x)
        x = L.Conv1D(32, 3, padding="same", activation="relu")(x)
        x = L.AveragePooling1D(2)(x)
        x = L.Conv1D(32, 3, padding="same", activation="relu")(x)
        x = L.GlobalAveragePooling1D()(x)
        return k.Model(i, L.Dense(10)(x))

    def conv1d_stride2_same():
        # stride 2, padding="same" on 8 steps: TensorFlow pads 0 before and 1 after
        i = k.Input((8, 8), name="rows")
        x = L.Conv1D(16, 3, strides=2, padding="same", activation="relu")(i)
        x = L.Conv1D(32, 3, padding="same", activation="relu")(x)
        x = L.GlobalMaxPooling1D()(x)
        return k.Model(i, L.Dense(10)(x))

    def upsampling2d():
        # UpSampling2D: tf2onnx writes Unsqueeze -> Tile -> Transpose -> Reshape twice
        i = k.Input((8, 8, 1), name="image")
        x = L.Conv2D(16, 3, padding="same", activation="relu")(i)
        x = L.MaxPooling2D(2)(x)
        x = L.UpSampling2D(2)(x)
        x = L.Conv2D(16, 3, padding="same", activation="relu")(x)
        x = L.MaxPooling2D(2)(x)
        x = L.Flatten()(x)
        return k.Model(i, L.Dense(10)(x))

    def upsampling1d():
        # UpSampling1D: tf2onnx writes Unsqueeze -> Tile -> Reshape between transposes
        i = k.Input((8, 8), name="rows")
        x = L.Conv1D(16, 3, padding="same", activation="relu")(i)
        x = L.MaxPooling1D(2)(x)
        x = L.UpSampling1D(2)(x)
        x = L.Conv1D(16, 3, padding="same", activation="relu")(x)
        x = L.GlobalAveragePooling1D()(x)
        return k.Model(i, L.Dense(10)(x))

    def transpose(padding, crop):
        def build():
            i = k.Input((8, 8, 1), name="image")
            x = L.Conv2D(16, 3, padding="same", activation="relu")(i)
            x = L.MaxPooling2D(2)(x)
            x = L.Conv2DTranspose(16, 3, strides=2, padding=padding, activation="relu")(x)
            if crop:
                x = L.Cropping2D(((1, 0), (1, 0)))(x)
            x = L.MaxPooling2D(2)(x)
            x = L.Flatten()(x)
            return k.Model(i, L.Dense(10)(x))
        return build

    def same_stride2(size, pad_first=False, pool=False):
        # the forms tf2onnx's same-padding refusal proposes (untrained: only the form
        # matters): an odd size, ZeroPadding2D(1) + "valid", stride 1 + MaxPooling2D(2)
        def build():
            i = k.Input((size, size, 1), name="image")
            if pad_first:
                x = L.Conv2D(8, 3, strides=2, padding="valid", activation="relu")(
                    L.ZeroPadding2D(1)(i))
            elif pool:
                x = L.MaxPooling2D(2)(L.Conv2D(8, 3, padding="same", activation="relu")(i))
            else:
                x = L.Conv2D(8, 3, strides=2, padding="same", activation="relu")(i)
            return k.Model(i, L.Dense(10)(L.Flatten()(x)))
        return build

    return {
        "hint_same_stride2_odd": ("gray9", same_stride2(9), False),
        "hint_zeropadding_valid": ("gray", same_stride2(8, pad_first=True), False),
        "hint_stride1_maxpool": ("gray", same_stride2(8, pool=True), False),
        "keras_kws1d": ("rows", kws1d, True),
        "keras_conv1d_stride2_same": ("rows", conv1d_stride2_same, True),
        "keras_upsampling2d": ("gray", upsampling2d, True),
        "keras_upsampling1d": ("rows", upsampling1d, True),
        # Conv2DTranspose(padding="same") keeps outputs 0..2n-1 of the full result
        "keras_convtranspose_same": ("gray", transpose("same", False), False),
        # ... the refusal's hint applied: "valid", then the first row and column cropped
        "keras_convtranspose_valid_cropped": ("gray", transpose("valid", True), True),
    }


def main(only: list[str]) -> None:
    """Make the fixtures named in `only` (all when empty), keeping the others' entries."""
    import tensorflow as tf

    k = tf.keras
    tf.config.experimental.enable_op_determinism()
    x_train, y_train, _, x_test, y_test = split()
    path = HERE / "fixtures_keras.json"
    facts = json.loads(path.read_text()) if only and path.exists() else {}
    for n, (name, (kind, build, trained)) in enumerate(models(k).items()):
        if only and name not in only:
            continue
        k.utils.set_random_seed(SEED + 100 + n)
        model = build()
        entry = {"input": kind, "device": "MAX78000"}
        if trained:
            model.compile(optimizer=k.optimizers.Adam(3e-3), metrics=["accuracy"],
                          loss=k.losses.SparseCategoricalCrossentropy(from_logits=True))
            model.fit(layout(x_train, kind), y_train, epochs=30, batch_size=32, verbose=0)
            acc = float(model.evaluate(layout(x_test, kind), y_test, verbose=0)[1])
            entry["keras_accuracy"] = round(acc, 6)
        export(model, name)
        facts[name] = entry
        print(name, entry, flush=True)
    path.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Keras models with layers the accelerator refuses, exported with tf2onnx's defaults
(issue 28's acceptance models made by real tools).

Not run by the tests (they need neither tensorflow nor tf2onnx): it wrote the committed
`*.onnx` files. Run it in an environment of its own (tensorflow-cpu 2.21, Keras 3,
tf2onnx 1.17), e.g.

    /work/venvs/tf/bin/python tests/partition/keras/make_fixtures.py

Weights are Keras' seeded initial values (the split, the quantization and the known
answer do not need a trained model); each model is saved the way Keras 3 saves for
serving (`model.export`) and converted with the tf2onnx command line and nothing but
`--saved-model` and `--output`.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def models(k):
    L = k.layers

    def stem5():
        # a 5x5 first convolution (the accelerator has 1x1 and 3x3 kernels)
        i = k.Input((16, 16, 3), name="image")
        x = L.Conv2D(16, 5, padding="same", activation="relu")(i)
        x = L.Conv2D(16, 3, padding="same", activation="relu")(x)
        x = L.MaxPooling2D(2)(x)
        x = L.Conv2D(10, 1)(x)
        return k.Model(i, x)

    def dense_head():
        # a Dense over a 32x32 feature map (the accelerator flattens at most 16x16)
        i = k.Input((32, 32, 3), name="image")
        x = L.Conv2D(8, 3, padding="same", activation="relu")(i)
        x = L.Conv2D(4, 3, padding="same", activation="relu")(x)
        x = L.Flatten()(x)
        return k.Model(i, L.Dense(10)(x))

    def lift_between():
        # a LeakyReLU between a 1-D and a 2-D part, the Reshape lifting the rank next
        # to it (issue 34: a CPU segment between accelerator runs that changes the shape)
        i = k.Input((32, 4), name="signal")
        x = L.Conv1D(16, 3, padding="same")(i)
        x = L.LeakyReLU(negative_slope=0.1)(x)
        x = L.Reshape((1, 32, 16))(x)
        x = L.Conv2D(8, 3, padding="same", activation="relu")(x)
        return k.Model(i, L.Conv2D(4, 1)(x))

    def bn_between():
        # a BatchNormalization after a max-pooling (not foldable into the convolution
        # before it): tf2onnx writes Mul and Add; the Mul runs on the CPU and the Add
        # is the next part's input offset, which the CPU segment adds (issue 34)
        import numpy as np

        i = k.Input((16, 16, 3), name="image")
        x = L.Conv2D(16, 3, padding="same", activation="relu")(i)
        bn = L.BatchNormalization()
        x = bn(L.MaxPooling2D(2)(x))
        x = L.Conv2D(16, 3, padding="valid", activation="relu")(x)
        model = k.Model(i, L.Conv2D(10, 1)(x))
        # statistics as after training (the initial ones make the layer the identity)
        rng = np.random.default_rng(34)
        bn.set_weights([rng.uniform(0.5, 1.5, 16), rng.uniform(-0.3, 0.3, 16),
                        rng.uniform(0.0, 0.5, 16), rng.uniform(0.5, 2.0, 16)])
        return model

    return {"stem5": stem5, "dense_head": dense_head, "lift_between": lift_between,
            "bn_between": bn_between}


def export(model, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "saved"
        model.export(str(saved), verbose=False)
        subprocess.run([sys.executable, "-m", "tf2onnx.convert", "--saved-model",
                        str(saved), "--output", str(HERE / f"{name}.onnx")],
                       check=True, capture_output=True)


def main(only: list[str]) -> None:
    import keras

    keras.utils.set_random_seed(28)
    for name, build in models(keras).items():
        if only and name not in only:
            continue
        export(build(), name)
        print("wrote", name)


if __name__ == "__main__":
    main(sys.argv[1:])

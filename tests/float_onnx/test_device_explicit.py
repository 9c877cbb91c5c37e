"""No silent default device in the float reader (issue 27 item 7): where the grouping of
a float model depends on the device, the device given decides it, and without one the
reader says so instead of assuming the MAX78000."""
from __future__ import annotations

import io

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from onnx2ai8x.errors import EXIT_USAGE, Ai8xError  # noqa: E402
from onnx2ai8x.importer.float_onnx import read_float_model  # noqa: E402


def _conv_then_pool(channels: int):
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, channels, 3, padding=1)
            self.pool = torch.nn.MaxPool2d(2)

        def forward(self, x):
            return self.pool(torch.relu(self.conv(x)))

    buf = io.BytesIO()
    torch.onnx.export(Net().eval(), torch.zeros(1, 3, 8, 8), buf, dynamo=False,
                      opset_version=17)
    return onnx.load_from_string(buf.getvalue())


def test_a_wide_pooling_only_layer_is_grouped_for_the_device_given():
    model = _conv_then_pool(128)
    # MAX78000 pools more than 64 channels only with a convolution (an identity one is
    # inserted); MAX78002 pools them alone
    assert read_float_model(model, "MAX78000").network.layers[1].name.endswith("_identity")
    assert read_float_model(model, "MAX78002").network.layers[1].name.endswith("_MaxPool")
    with pytest.raises(Ai8xError) as err:
        read_float_model(model)
    assert err.value.code == "usage.device" and err.value.exit_code == EXIT_USAGE


def test_without_a_device_a_model_every_device_groups_alike_is_read():
    assert len(read_float_model(_conv_then_pool(32)).network.layers) == 2

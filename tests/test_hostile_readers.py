"""One crafted input per traceback signature of issue 24 (item 7) and of the fuzzing that
followed it: each gave a Python exception (a traceback, or the CLI's "internal error")
before its class was fixed, and must now be an Ai8xError message (`error[code]`) with a
non-zero exit. Every message produced here is also scanned for Python reprs (numpy
numbers, arrays, bytes literals), which mean nothing to a user.

The readers' boundaries these exercise: onnxpb.check_text (text fields), importer/
validate.py (node arity, required and window attributes, attribute types; the float
reader's check_float_graph), importer/shapes.py (ranks), the sidecar parser's integer
range, importer/checkpoint.py (empty weights), map/kernels.py (a kernel run longer than
memory), the .npy and YAML readers of the float path. tests/fuzz finds each class with
its seeded mutators.
"""
from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest

from onnx2ai8x import onnxpb
from onnx2ai8x.cli import main
from onnx2ai8x.errors import Diagnostic, plain, show

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits"
FLOAT = ROOT / "examples" / "digits_float"

# What a Python repr looks like in a message: numpy numbers and arrays, bytes literals,
# classes, dict reprs of numpy values.
REPR = re.compile(r"np\.\w+\(|np\.(True|False)_|array\(|dtype=|<class |\bb'|\bb\"")


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path


def _run(args: list[str], capsys) -> tuple[int, str]:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    assert not REPR.search(err), f"a Python repr in the message: {err}"
    return code, err


def _refused(args: list[str], capsys, code_prefix: str) -> str:
    """The command fails with a clear message of the expected code (exit 1 or 2)."""
    code, err = _run(args, capsys)
    assert code in (1, 2), err
    assert f"error[{code_prefix}" in err, err
    return err


def _digits() -> onnxpb.ModelProto:
    return onnxpb.load(DIGITS / "digits.onnx")


def _node(model, name: str):
    return next(n for n in model.graph.node if n.name == name)


def _save(path: Path, data) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.SerializeToString())
    return path


def _bad_text(model, placeholder: str) -> bytes:
    """The model serialized with the text `placeholder` (set by the caller in one field)
    replaced by bytes of the same length that are not UTF-8."""
    data = model.SerializeToString()
    bad = b"\xff\xfe" + placeholder.encode()[2:]
    assert data.count(placeholder.encode()) == 1
    return data.replace(placeholder.encode(), bad)


# --------------------------------------------------------------------------- ai8x-ONNX

def _sidecar_metadata_not_utf8():
    m = _digits()
    _node(m, "conv1").metadata_props.add(key="ai8x.sidecar", value='{"name": "QQQQQQ"}')
    return _bad_text(m, "QQQQQQ")  # was: UnicodeDecodeError in onnx_reader.read


def _node_name_not_utf8():
    m = _digits()
    _node(m, "conv2/pool").name = "QQQQQQQQQQ"
    return _bad_text(m, "QQQQQQQQQQ")  # was: TypeError in onnx_reader._groups


def _graph_name_not_utf8():
    m = _digits()
    m.graph.name = "QQQQQQQQQQQQ"
    m.doc_string = ""
    return _bad_text(m, "QQQQQQQQQQQQ")  # was: TypeError in report.to_json (check)


def _shift_attribute_missing():
    m = _digits()
    node = _node(m, "conv1/shift")
    keep = [a for a in node.attribute if a.name != "shift"]
    del node.attribute[:]
    node.attribute.extend(keep)
    return m  # was: KeyError in onnx_reader.read_numerics


def _add_with_one_operand():
    m = _digits()
    del _node(m, "conv2/bias").input[1:]
    return m  # was: IndexError in a list comprehension of onnx_reader.py (sources)


def _pool_of_a_vector():
    m = _digits()
    _node(m, "conv2/pool").input[0] = "fc.bias"
    return m  # was: IndexError in importer/shapes.py _pool


def _attribute_of_type_proto_kind():
    m = _digits()
    attr = _node(m, "conv1/clamp").attribute.add()
    attr.name, attr.type = "extra", onnxpb.AttributeProto.TYPE_PROTO
    return m  # was: ValueError in onnxpb.get_attribute_value


def _window_of_wrong_length():
    m = _digits()
    for a in _node(m, "conv2/pool").attribute:
        if a.name == "strides":
            a.ints.append(2)
    return m  # the window attributes disagree: 2-D kernel, 3 strides


@pytest.mark.parametrize("make, commands, code", [
    (_sidecar_metadata_not_utf8, ("convert", "sidecar", "check"), "model.unreadable"),
    (_node_name_not_utf8, ("convert", "sidecar", "check", "run"), "model.unreadable"),
    (_graph_name_not_utf8, ("check", "convert"), "model.unreadable"),
    (_shift_attribute_missing, ("convert", "sidecar", "check"), "model.attribute"),
    (_add_with_one_operand, ("convert", "sidecar", "check"), "model.node"),
    (_pool_of_a_vector, ("convert", "sidecar", "check"), "model.shapes"),
    (_attribute_of_type_proto_kind, ("convert", "sidecar"), "model.attribute"),
    (_window_of_wrong_length, ("convert", "sidecar"), "model.attribute"),
], ids=lambda v: getattr(v, "__name__", None))
def test_damaged_ai8x_onnx_is_a_message(work, capsys, make, commands, code):
    path = _save(work / "bad.onnx", make())
    np.save(work / "x.npy", np.load(DIGITS / "sample.npy"))
    for command in commands:
        args = {"convert": ["convert", path, "-o", work / "out"],
                "run": ["run", path, "--input", work / "x.npy", "-o", work / "y.npy"],
                }.get(command, [command, path])
        err = _refused(args, capsys, code if command != "check" else "model")
        assert "bad.onnx" in err or code != "model.unreadable", err


# --------------------------------------------------------------------------- sidecars

def _digits_sidecar(work: Path, capsys) -> list[str]:
    code = main(["sidecar", str(DIGITS / "digits.onnx"), "-o", str(work / "net.yaml")])
    capsys.readouterr()
    assert code == 0
    return (work / "net.yaml").read_text().splitlines()


def test_sidecar_stopping_before_the_last_layer(work, capsys):
    """`next_sequence: -1` on layer 0 of four (was: ValueError from zip(strict=True) in
    map/memory_check.py read_gap_supported)."""
    lines = _digits_sidecar(work, capsys)
    first = next(k for k, line in enumerate(lines) if line.startswith("  - "))
    lines.insert(first + 1, "    next_sequence: -1")
    (work / "stop.yaml").write_text("\n".join(lines) + "\n")
    for command in ("sidecar", "convert"):
        args = [command, DIGITS / "digits.onnx", "--sidecar", work / "stop.yaml"]
        err = _refused(args + (["-o", work / "out"] if command == "convert" else []),
                       capsys, "sidecar.sequence")
        assert "after 1 of the model's 4 hardware layers" in err


@pytest.fixture
def vendor_project(work):
    pytest.importorskip("torch")
    from tests.fuzz.test_fuzz import TINY_YAML, _tiny_checkpoint

    ckpt, sample = _tiny_checkpoint()
    (work / "net.pth.tar").write_bytes(ckpt)
    (work / "x.npy").write_bytes(sample)
    return TINY_YAML.decode()


def _izer(work: Path, config: str, *extra: str) -> list:
    (work / "net.yaml").write_text(config)
    return ["import-izer", "--config-file", work / "net.yaml", "--checkpoint-file",
            work / "net.pth.tar", "--sample", work / "x.npy", "-o", work / "net.onnx",
            *(extra if "--device" in extra else ("--device", "MAX78000", *extra))]


@pytest.mark.parametrize("value", ["99999999999999999999", "[1, 99999999999999999999]"])
def test_sidecar_integer_beyond_any_field(work, capsys, vendor_project, value):
    """A dilation of 10**20 on the vendor YAML's 1x1 layer, whose output size it does not
    change (was: ValueError in onnxpb.make_attribute: an ONNX attribute holds 64 bits)."""
    config = vendor_project.replace("    pad: 0\n", f"    pad: 0\n    dilation: {value}\n", 1)
    err = _refused(_izer(work, config), capsys, "sidecar")
    assert "99999999999999999999" in err and "out of the range" in err


def test_checkpoint_without_weight_values(work, capsys, vendor_project):
    """conv1's weights of shape (0, 1, 3, 3), binary on the MAX78002 (was: ValueError in
    sidecar/resolve.py _weight_bits, from the min() of no values)."""
    import torch

    sd = torch.load(work / "net.pth.tar", weights_only=True)
    sd["state_dict"]["conv1.op.weight"] = sd["state_dict"]["conv1.op.weight"][:0]
    torch.save(sd, work / "net.pth.tar")
    config = vendor_project.replace("    pad: 1\n", "    pad: 1\n    quantization: binary\n", 1)
    err = _refused(_izer(work, config, "--device", "MAX78002"), capsys, "checkpoint.invalid")
    assert "holds no values" in err and "conv1" in err


# --------------------------------------------------------------------------- float path

def _float_model(nodes, inputs, outputs, inits, opset: int = 13) -> bytes:
    from onnx import helper

    graph = helper.make_graph(nodes, "crafted", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]
                             ).SerializeToString()


def _wide_linear() -> tuple[bytes, np.ndarray]:
    """One linear layer 256 -> 1024: more kernel columns than any processor holds."""
    from onnx import TensorProto, helper

    w = np.random.default_rng(0).uniform(-0.1, 0.1, (1024, 256)).astype(np.float32)
    model = _float_model(
        [helper.make_node("Flatten", ["x"], ["f"], axis=1),
         helper.make_node("Gemm", ["f", "w"], ["y"], transB=1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.reshape(-1).tolist())])
    cal = np.random.default_rng(0).uniform(-1, 1, (8, 1, 16, 16)).astype(np.float32)
    return model, cal


def test_linear_layer_longer_than_kernel_memory(work, capsys):
    """--device MAX78002 on a 256 -> 1024 linear layer (was: IndexError in
    map/kernels.py _search: the reverse search wrapped columns past the memory)."""
    model, cal = _wide_linear()
    _save(work / "wide.onnx", model)
    np.save(work / "cal.npy", cal)
    for device in ("MAX78002", "MAX78000"):
        err = _refused(["convert", work / "wide.onnx", "--calibration", work / "cal.npy",
                        "--device", device, "-o", work / "out"], capsys, "map.kernel-memory")
        assert "kernel memory exhausted" in err


def _float_digits():
    import onnx

    return onnx.load(str(FLOAT / "digits_float.onnx"))


def _gemm_missing_weights():
    m = _float_digits()
    del next(n for n in m.graph.node if n.op_type == "Gemm").input[1:]
    return m.SerializeToString()  # was: IndexError in float_onnx op_Gemm


def _pool_without_output():
    m = _float_digits()
    del next(n for n in m.graph.node if n.op_type == "MaxPool").output[:]
    return m.SerializeToString()  # was: IndexError in float_onnx _pool


def _conv_without_input():
    m = _float_digits()
    del m.graph.node[0].input[:]
    return m.SerializeToString()  # was: IndexError in float_onnx data


def _initializer_dims_beyond_data():
    m = _float_digits()
    init = m.graph.initializer[0]
    del init.dims[:]
    init.dims.append(1 << 62)
    return m.SerializeToString()  # was: ValueError in float_onnx _Walker.__init__


def _conv_bias_of_wrong_size():
    from onnx import numpy_helper

    m = _float_digits()
    conv = m.graph.node[0]
    bias = next(i for i in m.graph.initializer if i.name == conv.input[2])
    bias.CopyFrom(numpy_helper.from_array(np.zeros(3, np.float32), bias.name))
    return m.SerializeToString()  # was: onnxruntime Fail in quantize/ptq.py _float_outputs


def _float_name_not_utf8():
    m = _float_digits()
    m.graph.node[1].name = "QQQQQQQQQQQQQQ"
    data = m.SerializeToString()
    return data.replace(b"QQQQQQQQQQQQQQ", b"\xff" * 14)


def _gemm_weights_of_rank_one():
    from onnx import numpy_helper

    m = _float_digits()
    gemm = next(n for n in m.graph.node if n.op_type == "Gemm")
    w = next(i for i in m.graph.initializer if i.name == gemm.input[1])
    w.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w).reshape(-1), w.name))
    return m.SerializeToString()  # was: IndexError in float_onnx _dense


def _conv_fed_a_vector():
    m = _float_digits()
    dims = m.graph.input[0].type.tensor_type.shape.dim
    del dims[2:]  # (N, C): a 2-D convolution of no rows or columns
    return m.SerializeToString()  # was: IndexError in float_onnx _conv


def _input_of_negative_size():
    m = _float_digits()
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = -5
    return m.SerializeToString()  # with a ConvTranspose: an IndexError in float_onnx _conv


def _initializer_of_unknown_type():
    m = _float_digits()
    m.graph.initializer[0].data_type = 99
    return m.SerializeToString()  # was: KeyError in onnx's numpy_helper (float walker)


def _four_bit_initializer_of_negative_dims():
    from onnx import TensorProto

    m = _float_digits()
    init = m.graph.initializer[0]
    init.data_type = TensorProto.INT4
    init.dims[0] = -1
    return m.SerializeToString()  # was: ValueError in onnx's numpy_helper (float walker)


def _gemm_alpha_of_another_type():
    m = _float_digits()
    gemm = next(n for n in m.graph.node if n.op_type == "Gemm")
    attr = next(a for a in gemm.attribute if a.name == "alpha")
    attr.type = attr.TYPE_PROTO
    return m.SerializeToString()  # was: TypeError in float_onnx op_Gemm (float(TypeProto))


def _input_of_unknown_type():
    m = _float_digits()
    m.graph.input[0].type.tensor_type.elem_type = 99
    return m.SerializeToString()  # was: ValueError in float_onnx _simplify (enum name)


@pytest.mark.parametrize("make, code", [
    (_input_of_unknown_type, "model.input-type"),
    (_gemm_alpha_of_another_type, "model.attribute"),
    (_initializer_of_unknown_type, "model.tensor"),
    (_four_bit_initializer_of_negative_dims, "model.tensor"),
    (_gemm_weights_of_rank_one, "float.dense-shape"),
    (_conv_fed_a_vector, "float.conv-rank"),
    (_input_of_negative_size, "model.input"),
    (_gemm_missing_weights, "model.node"),
    (_pool_without_output, "model.node"),
    (_conv_without_input, "model.node"),
    (_initializer_dims_beyond_data, "model.tensor"),
    (_conv_bias_of_wrong_size, "float."),
    (_float_name_not_utf8, "float.model.unreadable"),
], ids=lambda v: getattr(v, "__name__", None))
def test_damaged_float_model_is_a_message(work, capsys, make, code):
    pytest.importorskip("onnx")
    _save(work / "f.onnx", make())
    np.save(work / "cal.npy", np.load(FLOAT / "calibration.npy")[:16])
    code_prefix = code.removeprefix("float.") if code.startswith("float.model") else code
    for args in (["quantize", work / "f.onnx", "--device", "MAX78000", "--calibration",
                  work / "cal.npy", "-o", work / "q.onnx"],
                 ["convert", work / "f.onnx", "--device", "MAX78000", "--calibration",
                  work / "cal.npy", "-o", work / "out"]):
        _refused(args, capsys, code_prefix)


def _calibration_header_of_a_petabyte() -> bytes:
    header = repr({"descr": "<f4", "fortran_order": False,
                   "shape": (1 << 40, 1, 8, 8)}).encode()
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


@pytest.mark.parametrize("what, data, code", [
    # was: MemoryError in quantize.load_array (numpy allocates what the header declares)
    ("calibration", _calibration_header_of_a_petabyte(), "usage.bad-input"),
    # was: UnicodeDecodeError in quantize/ptq.py load_weight_bits
    ("weight-bits", b"\xff\xfe default: 8\n", "usage.calibration"),
    ("weight-bits", b"default: 3\n", "usage.calibration"),
    # was: ValueError in quantize/calibrate.py tensor_range (numpy's percentile range)
    ("percentile", b"1e9", "usage.calibration"),
    ("percentile", b"nan", "usage.calibration"),
])
def test_damaged_float_inputs_are_a_message(work, capsys, what, data, code):
    pytest.importorskip("onnx")
    np.save(work / "cal.npy", np.load(FLOAT / "calibration.npy")[:16])
    extra = []
    if what == "calibration":
        (work / "cal.npy").write_bytes(data)
    elif what == "percentile":
        extra = ["--calibration-method", "percentile", "--percentile", data.decode()]
    else:
        (work / "bits.yaml").write_bytes(data)
        extra = ["--weight-bits", work / "bits.yaml"]
    for command, out in (("quantize", "q.onnx"), ("convert", "out")):
        _refused([command, FLOAT / "digits_float.onnx", "--device", "MAX78000",
                  "--calibration", work / "cal.npy", "-o", work / out, *extra], capsys, code)


# --------------------------------------------------------------------------- messages

def test_reshape_message_shows_plain_numbers(work, capsys):
    """A float reshape the hardware cannot do is named with its target as written, not
    as `[np.int64(-1), np.int64(8)]` (issue 24)."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    w = np.random.default_rng(1).uniform(-0.5, 0.5, (4, 1, 3, 3)).astype(np.float32)
    model = _float_model(
        [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Reshape", ["r", "shape"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 8])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.reshape(-1).tolist()),
         helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 8])])
    _save(work / "r.onnx", model)
    np.save(work / "cal.npy", np.random.default_rng(1).uniform(-1, 1, (4, 1, 4, 4))
            .astype(np.float32))
    err = _refused(["quantize", work / "r.onnx", "--device", "MAX78000", "--calibration",
                    work / "cal.npy", "-o", work / "q.onnx"], capsys, "float.reshape")
    assert "-1, 8" in err and "np." not in err and "int64" not in err


def test_show_and_plain_render_numpy_values_plainly():
    assert show([np.int64(-1), np.int64(8)]) == "[-1, 8]"
    assert show((np.int32(3),)) == "(3,)"
    assert show(np.array([[1, 2], [3, 4]])) == "[[1, 2], [3, 4]]"
    assert show(np.float32(0.1)) == "0.1"
    assert show(b"a\xff") == "a\\xff"
    assert plain(f"reshape to {[np.int64(-1), np.int64(8)]}") == "reshape to [-1, 8]"
    assert plain(f"{np.array([1, 2])!r} {[np.True_, np.float32(0.5)]}") == \
        "[1, 2] [True, 0.5]"
    d = Diagnostic("x", f"{[np.uint8(1)]}", f"pads {list(np.array([1, 2]))}",
                   f"{(np.int64(4),)}")
    assert d.render() == "error[x] [1]: pads [1, 2]\n  hint: (4,)"


def test_fuzz_mutators_reach_the_fixed_classes():
    """The fuzz test's ONNX mutators produce each damage class above (so the default set
    keeps exercising them): text that is not UTF-8, a node without an operand, a missing
    attribute, a window op fed a vector."""
    import random

    from tests.fuzz.cases import _bad_text, _broken_node

    base = (DIGITS / "digits.onnx").read_bytes()
    rng = random.Random(24)
    texts = [_bad_text(rng, base) for _ in range(40)]
    assert any(b"\xff" in t or b"\xc3" in t or b"\x80" in t for t in texts)
    broken = [onnxpb.ModelProto.FromString(_broken_node(rng, base)) for _ in range(200)]
    assert any(len(n.input) == 1 and n.op_type == "Add" for m in broken for n in m.graph.node)
    assert any(n.op_type == "OutputShift" and not any(a.name == "shift" for a in n.attribute)
               for m in broken for n in m.graph.node)
    inits = {t.name for t in onnxpb.ModelProto.FromString(base).graph.initializer}
    assert any(n.op_type == "MaxPool" and n.input and n.input[0] in inits
               for m in broken for n in m.graph.node)


def test_bytes_helpers_round_trip():
    """(the crafted inputs above are what they claim: not UTF-8, yet decodable)"""
    data = _node_name_not_utf8()
    model = onnxpb.ModelProto.FromString(data)
    assert any(isinstance(n.name, bytes) for n in model.graph.node)
    with pytest.raises(onnxpb.DecodeError, match="not UTF-8"):
        onnxpb.decode(data)
    assert io.BytesIO(data).read(1)

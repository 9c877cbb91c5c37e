"""Seeded generators of hostile inputs for every input kind and subcommand.

Each generator takes a random.Random and the well-formed base files (the digits example,
its float twin, a wide float linear layer and a tiny vendor project built in the test)
and returns Cases (tests/fuzz/runner.py). The same seed gives the same cases: a failure
is reproduced by its seed and index.

Damages compound (a model may get two or three), and reach past the bytes into what the
readers interpret: text that is not UTF-8 (the protobuf runtime hands it over as bytes),
nodes with an operand or attribute missing or of another op, window ops fed tensors of
another rank, sidecar keys the file did not set, given values of the wrong kind or range.
"""
from __future__ import annotations

import io
import random
import re
import struct
from collections.abc import Callable

import numpy as np

from onnx2ai8x import onnxpb
from onnx2ai8x.onnxpb import AttributeProto

from .runner import Case

KINDS = ("onnx", "sidecar", "sample", "checkpoint", "output", "options", "project", "float",
         "cpu", "targets", "toplevel", "combos", "json")


# --------------------------------------------------------------------------- bytes

def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    how = rng.randrange(7)
    if how == 0:
        return bytes(buf[:rng.randrange(len(buf))])
    if how == 1:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        return bytes(buf)
    if how == 2:
        at = rng.randrange(len(buf))
        return bytes(buf[:at] + rng.randbytes(rng.randint(1, 64)) + buf[at:])
    if how == 3:
        a = rng.randrange(len(buf))
        b = min(len(buf), a + rng.randint(1, 256))
        return bytes(buf[:b] + buf[a:b] * rng.randint(2, 50) + buf[b:])
    if how == 4:
        return rng.choice([b"", b"\x00", rng.randbytes(rng.randint(1, 4096))])
    if how == 5:
        del buf[rng.randrange(len(buf)):][:rng.randint(1, 64)]
        return bytes(buf)
    at = rng.randrange(len(buf))
    buf[at] ^= 1 << rng.randrange(8)
    return bytes(buf)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, body: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def _deep_onnx(depth: int) -> bytes:
    """A model whose graph holds a node whose attribute holds a graph ... `depth` deep."""
    graph = b""
    for _ in range(depth):
        attr = _field(1, b"g") + _varint(20 << 3) + b"\x05" + _field(6, graph)
        graph = _field(1, _field(5, attr))
    return _field(7, graph)


# --------------------------------------------------------------------------- ONNX

_ODD_META = ["[]", "true", "nan", "-1", "99999999999999999999", "", "1.5", "0x10",
             "{}", "null", "inf", "-0", "\u00e9", "1e400"]


def _structural(rng: random.Random, base: bytes) -> bytes:
    model = onnxpb.ModelProto.FromString(base)
    graph = model.graph
    how = rng.randrange(13)
    nodes = list(graph.node)
    if how == 0 and nodes:  # an attribute of a wrong or unknown type
        node = rng.choice([n for n in nodes if n.attribute] or nodes)
        if node.attribute:
            attr = rng.choice(node.attribute)
            attr.type = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 13, 14])
            if rng.random() < 0.5:
                attr.ClearField("ints")
                attr.s = b"x"
    elif how == 1 and graph.initializer:  # dims that do not match the data
        t = rng.choice(graph.initializer)
        dims = list(t.dims) or [1]
        dims[rng.randrange(len(dims))] = rng.choice([0, -1, 7, 1 << 31, 1 << 62, 3])
        del t.dims[:]
        t.dims.extend(dims)
    elif how == 2 and graph.initializer:  # an exotic or unknown data type
        t = rng.choice(graph.initializer)
        t.data_type = rng.choice([0, 8, 9, 10, 14, 15, 16, 17, 23, 99])
    elif how == 3:  # node metadata of odd values
        node = rng.choice(nodes)
        key = rng.choice(["ai8x.output_shift", "ai8x.weight_bits", "ai8x.flatten",
                          "ai8x.pool_dilation", "ai8x.layer_index", "ai8x.sidecar",
                          "ai8x.operator"])
        node.metadata_props.add(key=key, value=rng.choice(_ODD_META))
    elif how == 4:  # model metadata
        model.metadata_props.add(key=rng.choice(["ai8x.device", "ai8x.input_scale"]),
                                 value=rng.choice(_ODD_META))
    elif how == 5:  # the graph emptied
        del graph.node[:]
    elif how == 6 and graph.output and graph.input:  # an output renamed to the input
        graph.output[0].name = graph.input[0].name
    elif how == 7 and graph.input:  # absurd input dims
        dims = graph.input[0].type.tensor_type.shape.dim
        if len(dims) > 1:
            dims[rng.randrange(1, len(dims))].dim_value = rng.choice(
                [0, -5, 1 << 40, 100_000, 3])
    elif how == 8 and graph.input:  # an exotic input type
        graph.input[0].type.tensor_type.elem_type = rng.choice([0, 1, 8, 9, 11, 16, 99])
    elif how == 9:  # an integer attribute out of range
        for node in nodes:
            for attr in node.attribute:
                if attr.type == AttributeProto.INT and rng.random() < 0.5:
                    attr.i = rng.choice([-1, 0, 99, 1 << 40, -(1 << 62)])
    elif how == 10 and nodes:  # nodes removed or duplicated
        k = rng.randrange(len(nodes))
        if rng.random() < 0.5:
            del graph.node[k]
        else:
            graph.node.add().CopyFrom(nodes[k])
    elif how == 11 and nodes:  # inputs rewired
        node = rng.choice(nodes)
        if node.input:
            node.input[rng.randrange(len(node.input))] = rng.choice(
                ["", "nope", graph.input[0].name if graph.input else "x", node.output[0],
                 *[t.name for t in graph.initializer][:1],  # data from a weight or bias
                 rng.choice(graph.initializer).name if graph.initializer else ""])
    elif how == 12 and graph.initializer:  # a float tensor where integers belong
        t = rng.choice(graph.initializer)
        arr = onnxpb.to_array(t).astype(np.float32) + rng.choice([0.5, 0.25, 0.0])
        t.CopyFrom(onnxpb.from_array(arr, t.name))
    return model.SerializeToString()


def _mutate_onnx(rng: random.Random, base: bytes) -> bytes:
    """One damage of a serialized model: bytes, structure, text or a node's shape."""
    if rng.random() < 0.3:
        return _mutate_bytes(rng, base)
    data = base
    for _ in range(rng.choice((1, 1, 2, 3))):  # damages compound: each reader guards alone
        pick = rng.random()
        mutate = _structural if pick < 0.45 else _bad_text if pick < 0.65 else _broken_node
        try:
            data = mutate(rng, data)
        except (IndexError, ValueError):  # nothing left to damage (an emptied graph)
            break
    return data


def _strings(model) -> list[str]:
    """The text fields of a model a reader interprets: names, op types, attribute names,
    metadata."""
    graph = model.graph
    out = [graph.name, *(p.key for p in model.metadata_props),
           *(p.value for p in model.metadata_props)]
    for node in graph.node:
        out += [node.name, node.op_type, *node.input, *node.output,
                *(a.name for a in node.attribute), *(p.key for p in node.metadata_props),
                *(p.value for p in node.metadata_props)]
    out += [t.name for t in graph.initializer] + [v.name for v in graph.input]
    return [s for s in out if s and isinstance(s, str)]  # bytes: already damaged


def _bad_text(rng: random.Random, base: bytes) -> bytes:
    """A text field (a node name, a tensor name, an attribute name, metadata) made of bytes
    that are not UTF-8, in one place or everywhere it occurs: the protobuf runtime
    decodes such a proto2 string as `bytes`, not `str`."""
    model = onnxpb.ModelProto.FromString(base)
    if rng.random() < 0.3:  # text a reader parses further: a layer's sidecar entry (JSON)
        node = rng.choice(model.graph.node)
        node.metadata_props.add(key=rng.choice(["ai8x.sidecar", "ai8x.operator"]),
                                value=rng.choice(['{"name": "damaged"}', "conv2d"]))
        base = model.SerializeToString()
    strings = _strings(model)
    if not strings:
        return base
    text = rng.choice(strings).encode()
    at = rng.randrange(len(text))
    bad = text[:at] + rng.choice([b"\xff", b"\xc3", b"\x80"]) + text[at + 1:]
    old, new = _varint(len(text)) + text, _varint(len(bad)) + bad
    return base.replace(old, new) if rng.random() < 0.6 else base.replace(old, new, 1)


def _broken_node(rng: random.Random, base: bytes) -> bytes:
    """A node or attribute of the wrong shape for its op: a required attribute removed, a
    list attribute of another length, an input or output removed, another op of the same
    family, a graph input or weight of another rank."""
    model = onnxpb.ModelProto.FromString(base)
    graph = model.graph
    nodes = list(graph.node)
    node = rng.choice(nodes)
    how = rng.randrange(8)
    if how == 7:  # a window op fed a tensor of another rank: a weight, a bias, a flat row
        windows = [n for n in nodes if n.op_type in ("MaxPool", "AveragePool", "Conv",
                                                     "ConvInteger", "Flatten") and n.input]
        sources = [t.name for t in graph.initializer] + [
            n.output[0] for n in nodes if n.op_type in ("Flatten", "Gemm", "MatMulInteger")
            and n.output]
        if windows and sources:
            rng.choice(windows).input[0] = rng.choice(sources)
    elif how == 0 and node.attribute:  # a required attribute missing
        del node.attribute[rng.randrange(len(node.attribute))]
    elif how == 1:  # a list attribute of another length
        lists = [a for n in nodes for a in n.attribute if a.type == AttributeProto.INTS]
        if lists:
            attr = rng.choice(lists)
            values = list(attr.ints)
            del attr.ints[:]
            attr.ints.extend(rng.choice([[], values[:1], values * 2, values[:-1],
                                         [rng.choice([0, -1, 1 << 40])] * len(values)]))
    elif how == 2 and (node.input or node.output):  # an input or output removed
        field = node.input if node.input and rng.random() < 0.6 else node.output
        if rng.random() < 0.5:
            del field[:]
        else:
            del field[rng.randrange(len(field)):]
    elif how == 3:  # another op of the same family, or of another domain
        swaps = {"MaxPool": rng.choice(["AveragePool", "Conv", "Flatten"]),
                 "AveragePool": "MaxPool", "Conv": "ConvTranspose",
                 "ConvInteger": "MatMulInteger", "MatMulInteger": "ConvInteger",
                 "Gemm": "MatMul", "Add": rng.choice(["Sub", "Mul", "Concat"]),
                 "Flatten": "Reshape", "Reshape": "Flatten", "Relu": "Abs",
                 "OutputShift": "Clamp", "Clamp": "OutputShift", "Identity": "Split",
                 "Slice": "Pad", "Concat": "Split"}
        node.op_type = swaps.get(node.op_type, rng.choice(list(swaps)))
        if rng.random() < 0.2:
            node.domain = rng.choice(["", "ai8x", "ai.onnx"])
    elif how == 4 and graph.input:  # the input of another rank
        dims = graph.input[0].type.tensor_type.shape.dim
        keep = rng.choice([1, 2, 5])
        while len(dims) > keep:
            del dims[len(dims) - 1]
        while len(dims) < keep:
            dims.add().dim_value = 2
    elif how == 5 and graph.initializer:  # a tensor of another rank, data kept
        t = rng.choice(graph.initializer)
        arr = onnxpb.to_array(t)
        shape = rng.choice([(arr.size,), (1, arr.size), (*arr.shape, 1), ()])
        if shape == () and arr.size != 1:
            shape = (arr.size,)
        t.CopyFrom(onnxpb.from_array(arr.reshape(shape), t.name))
    else:  # a node's attributes all taken from another node
        other = rng.choice(nodes)
        del node.attribute[:]
        node.attribute.extend(other.attribute)
    return model.SerializeToString()


def onnx_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    cases = []
    fixed = [b"", b"not onnx", _deep_onnx(5000), _deep_onnx(90),
             _field(7, _field(2, b"g") + _field(1, _field(4, b"Abs"))) * 4000
             + base["model.onnx"]]
    for i in range(count):
        if i < len(fixed):
            data = fixed[i]
        else:
            data = _mutate_onnx(rng, base["model.onnx"])
        command = rng.choice(["convert", "check", "sidecar", "run"])
        files = {"model.onnx": data, "sample.npy": base["sample.npy"]}
        if command == "convert":
            argv = ("convert", "model.onnx", "-o", "out", "--device",
                    rng.choice(["MAX78000", "MAX78002"]))
        elif command == "run":
            argv = ("run", "model.onnx", "--input", "sample.npy", "-o", "y.npy")
        else:
            argv = (command, "model.onnx")
        cases.append(Case("onnx", f"{i:04d}", argv, files, outputs=("out", "y.npy")))
    return cases


# --------------------------------------------------------------------------- sidecar

def _bomb(rng: random.Random) -> str:
    levels = rng.randint(8, 20)
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
    for k in range(1, levels):
        text += f"a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * 9) + "]\n"
    return text + "arch: bomb\ndataset: x\nlayers:\n  - processors: 1\n"


def _merge_bomb(levels: int) -> str:
    text = "m0: &m0 {k: 1, j: 2}\n"
    for k in range(1, levels):
        text += f"m{k}: &m{k} {{<<: *m{k - 1}, a: *m{k - 1}, b: *m{k - 1}, c: *m{k - 1}}}\n"
    return text + f"arch: bomb\ndataset: x\nlayers:\n  - {{processors: 1, name: *m{levels - 1}}}\n"


_ODD_YAML = ["-1", "99999999999999999999", "~", "[]", "{}", "nan", ".inf", "0x",
             "'text'", "[1, [2, [3]]]", "*nope", "&a", "!!python/object:os.system",
             "0b102", "1e400", "yes", "\"\\xff\"", "- 1", "{a: 1, a: 2}",
             # typed the wrong way inside a list or mapping, or out of range
             "[1, x]", "[3, null]", "[1.5, 2]", "[[3, 3]]", "{a: 1}", "[]", "3x", "3x3x3",
             "[0, 0]", "[1, 2, 3]", "true", "2.5", "-0x10", "1_000", "0o17", "1e3",
             "9223372036854775808", "[-1, -1]", "0x" + "f" * 40]


def _mutate_yaml(rng: random.Random, text: str) -> str:
    lines = text.splitlines()
    how = rng.randrange(7)
    if how == 6:  # a key of the format the file does not set, given an odd value
        from onnx2ai8x.sidecar.parse import LAYER_KEYS

        starts = [k for k, line in enumerate(lines) if line.startswith("  - ")]
        if starts:
            lines.insert(rng.choice(starts) + 1, f"    {rng.choice(LAYER_KEYS)}: "
                         + rng.choice(_ODD_YAML + ["99999999999999999999", "65536", "0",
                                                   "1", "2", "-99999999999999999999"]))
    elif how == 0 and lines:
        k = rng.randrange(len(lines))
        if ":" in lines[k]:
            key = lines[k].split(":", 1)[0]
            lines[k] = f"{key}: {rng.choice(_ODD_YAML)}"
    elif how == 1 and lines:
        del lines[rng.randrange(len(lines))]
    elif how == 2 and lines:
        k = rng.randrange(len(lines))
        lines.insert(k, lines[k])
    elif how == 3 and lines:
        k = rng.randrange(len(lines))
        lines[k] = "\t" + lines[k] if rng.random() < 0.5 else lines[k].lstrip()
    elif how == 4:
        return _mutate_bytes(rng, text.encode()).decode("utf-8", "replace")
    else:
        lines.append(rng.choice(["  - processors: 0xffffffffffffffffff",
                                 "  - {}", "  - []", "extra: 1", "layers: 3",
                                 "  - processors: -1", "  - out_offset: 0x7fffffff"]))
    return "\n".join(lines) + "\n"


def sidecar_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    text = base["model.yaml"].decode()
    fixed = ["[" * 50_000 + "]" * 50_000, "{a: " * 20_000 + "1" + "}" * 20_000,
             _bomb(rng), _merge_bomb(30), "", "\x00\x01\x02", "- a\n- b\n",
             "arch: x\ndataset: y\nlayers:\n  - {name: *a}\n",
             "a: &a [" + ", ".join(["x" * 1000] * 200) + "]\nb: &b [" + ", ".join(
                 ["*a"] * 100) + "]\narch: x\ndataset: y\nlayers:\n  - {processors: *b}\n"]
    cases = []
    for i in range(count):
        body = fixed[i] if i < len(fixed) else _mutate_yaml(rng, text)
        data = body.encode("utf-8", "surrogateescape") if i != 5 else b"\xff\xfe\x00bad"
        argv = ("convert", "model.onnx", "--sidecar", "net.yaml", "-o", "out")
        if rng.random() < 0.3:
            argv = ("sidecar", "model.onnx", "--sidecar", "net.yaml")
        cases.append(Case("sidecar", f"{i:04d}", argv,
                          {"model.onnx": base["model.onnx"], "net.yaml": data},
                          outputs=("out",)))
    return cases


# --------------------------------------------------------------------------- samples

def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def _npy_header(shape: tuple, dtype: str = "<i8", body: bytes = b"") -> bytes:
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + body


def _npz(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def sample_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    good = np.load(io.BytesIO(base["sample.npy"]))
    makers: list[Callable[[], bytes]] = [
        lambda: _npy_header((10 ** 12,)),
        lambda: _npy_header((1 << 40, 1 << 40)),
        lambda: _npy_header((-1,)),
        lambda: _npy_header(good.shape, "<i8", b"\x00" * 7),
        lambda: _npy_header(good.shape, "|O"),
        lambda: _npy_header(good.shape, "<c16", b"\x00" * 16 * good.size),
        lambda: _npy(np.array([{"a": 1}], dtype=object)),
        lambda: _npy(good.astype(np.float64) + 0.5),
        lambda: _npy(good.astype(np.complex64)),
        lambda: _npy(np.full(good.shape, np.nan)),
        lambda: _npy(good.astype(bool)),
        lambda: _npy(np.array("text")),
        lambda: _npy(good[..., :1]),
        lambda: _npy(good.reshape(-1)),
        lambda: _npy(np.zeros((2, *good.shape), np.int64)),
        lambda: _npy(np.zeros((0, *good.shape[1:]), np.int64)),
        lambda: _npy(good * 1000),
        lambda: _npy(np.zeros((1, 1, 1, 1, 1, 1), np.int8)),
        lambda: _npz(x=good),
        lambda: _npz(x=good, y=good),
        lambda: _npz(),
        lambda: b"",
        lambda: _mutate_bytes(rng, base["sample.npy"]),
        lambda: _npy(np.zeros((3, 4000, 4000), np.int8)),
    ]
    cases = []
    for i in range(count):
        data = makers[i % len(makers)]() if i < len(makers) else \
            rng.choice(makers)()
        if rng.random() < 0.5:
            argv = ("run", "model.onnx", "--input", "x.npy", "-o", "y.npy")
        else:
            argv = ("convert", "model.onnx", "--sample-input", "x.npy", "-o", "out")
        cases.append(Case("sample", f"{i:04d}", argv,
                          {"model.onnx": base["model.onnx"], "x.npy": data},
                          outputs=("out", "y.npy")))
    return cases


# --------------------------------------------------------------------------- checkpoints

def checkpoint_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    """import-izer on the tiny vendor project, with its checkpoint and config mutated."""
    import torch

    state = torch.load(io.BytesIO(base["net.pth.tar"]), weights_only=True)

    def saved(obj) -> bytes:
        buf = io.BytesIO()
        torch.save(obj, buf)
        return buf.getvalue()

    def with_state(**changes) -> bytes:
        sd = dict(state["state_dict"])
        for key, value in changes.items():
            if value is None:
                sd.pop(key.replace("__", "."), None)
            else:
                sd[key.replace("__", ".")] = value
        return saved({**state, "state_dict": sd})

    w = state["state_dict"]["conv1.op.weight"]
    makers = [
        lambda: with_state(conv1__op__weight=torch.empty(w.shape, device="meta")),
        lambda: with_state(conv1__op__weight=w.to(torch.complex64)),
        lambda: with_state(conv1__op__weight=w.bool()),
        lambda: with_state(conv1__op__weight=w[:, :, :2]),
        lambda: with_state(conv1__op__weight=w.reshape(-1)),
        lambda: with_state(conv1__op__weight=w + 0.5),
        lambda: with_state(conv1__op__weight=w * 1000),
        lambda: with_state(conv1__op__bias=torch.full((w.shape[0],), 0.5)),
        lambda: with_state(conv1__op__bias=torch.zeros(3)),
        lambda: with_state(conv1__weight_bits=torch.tensor(99.0)),
        lambda: with_state(conv1__weight_bits=torch.tensor(-3.0)),
        lambda: with_state(conv1__output_shift=torch.tensor(1e30)),
        lambda: with_state(conv1__output_shift=torch.tensor(float("nan"))),
        lambda: with_state(conv2__op__weight=None),
        lambda: with_state(conv3__op__weight=w.clone()),
        lambda: with_state(conv1__op__weight=w.to_sparse()),
        # no values at all, or values the declared width cannot hold
        lambda: with_state(conv1__op__weight=w[:0]),
        lambda: with_state(conv1__op__weight=w[:, :0]),
        lambda: with_state(conv2__op__weight=torch.zeros((4, 8, 0, 0))),
        lambda: with_state(conv1__weight_bits=torch.tensor([8.0, 8.0])),
        lambda: with_state(conv1__weight_bits=torch.tensor(1.0)),
        lambda: with_state(conv1__op__weight=torch.sign(w) + (w == 0)),
        lambda: with_state(conv1__op__weight=w[:0], conv1__op__bias=torch.zeros(0)),
        lambda: saved([1, 2, 3]),
        lambda: saved({"state_dict": 3}),
        lambda: b"",
        lambda: _mutate_bytes(rng, base["net.pth.tar"]),
    ]
    configs = [
        lambda: base["net.yaml"],
        lambda: base["net.yaml"].split(b"  - ")[0] + b"  - " + base["net.yaml"].split(
            b"  - ")[1],  # fewer layers than the checkpoint
        lambda: _mutate_yaml(rng, base["net.yaml"].decode()).encode(),
        lambda: _bomb(rng).encode(),
        lambda: base["net.yaml"].replace(b"    kernel_size: 3x3", b"    kernel_size: 3x3\n"
                                         + rng.choice([b"    quantization: binary",
                                                       b"    quantization: 1",
                                                       b"    quantization: 2"])),
    ]
    cases = []
    for i in range(count):
        ckpt = makers[i % len(makers)]() if i < 2 * len(makers) else rng.choice(makers)()
        config = configs[0]() if i < len(makers) else rng.choice(configs)()
        files = {"net.yaml": config, "net.pth.tar": ckpt, "x.npy": base["net.npy"]}
        argv = ("import-izer", "--config-file", "net.yaml", "--checkpoint-file",
                "net.pth.tar", "--sample", "x.npy", "-o", "net.onnx")
        if i >= len(makers) and rng.random() < 0.5:  # binary weights exist on the MAX78002
            argv += ("--device", "MAX78002")
        else:
            argv += ("--device", "MAX78000")
        cases.append(Case("checkpoint", f"{i:04d}", argv, files, outputs=("net.onnx",)))
    return cases


# --------------------------------------------------------------------------- outputs

def output_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    model = base["model.onnx"]
    inputs = {"models/model.onnx": model, "models/sample.npy": base["sample.npy"],
              "models/net.yaml": base["model.yaml"]}
    conv = ("convert", "models/model.onnx", "--sample-input", "models/sample.npy",
            "--sidecar", "models/net.yaml")
    long_name = "x" * 300
    variants = [
        (conv + ("-o", "models", "--overwrite"), {}, {}),
        (conv + ("-o", "models/model.onnx", "--overwrite"), {}, {}),
        (conv + ("-o", "models/sample.npy", "--overwrite"), {}, {}),
        (conv + ("-o", ".", "--overwrite"), {}, {}),
        (conv + ("-o", "", "--overwrite"), {}, {}),
        (conv + ("-o", "home", "--overwrite"), {}, {}),
        (conv + ("-o", "/"), {}, {}),
        (conv + ("-o", "..", "--overwrite"), {}, {}),
        (conv + ("-o", "models/model.onnx/out"), {}, {}),
        (conv + ("-o", long_name), {}, {}),
        (conv + ("-o", f"{long_name}/a"), {}, {}),
        (conv + ("-o", "/proc/onnx2ai8x-fuzz"), {}, {}),
        (conv + ("-o", "/sys/onnx2ai8x-fuzz"), {}, {}),
        (conv + ("-o", "dangling"), {}, {"dangling": "nowhere/at/all"}),
        (conv + ("-o", "dangling", "--overwrite"), {}, {"dangling": "nowhere/at/all"}),
        (conv + ("-o", "linkdir", "--overwrite"), {}, {"linkdir": "models"}),
        (conv + ("-o", "file.txt"), {"file.txt": b"mine"}, {}),
        (conv + ("-o", "file.txt", "--overwrite"), {"file.txt": b"mine"}, {}),
        (conv + ("-o", "/dev/full/x"), {}, {}),
        (("run", "models/model.onnx", "--input", "models/sample.npy", "-o",
          "models/sample.npy"), {}, {}),
        (("run", "models/model.onnx", "--input", "models/sample.npy", "-o",
          "models/model.onnx"), {}, {}),
        (("run", "models/model.onnx", "--input", "models/sample.npy", "-o", "y.txt"),
         {}, {}),
        (("run", "models/model.onnx", "--input", "models/sample.npy", "-o", "models"),
         {}, {}),
        (("run", "models/model.onnx", "--input", "models/sample.npy", "-o", ""), {}, {}),
        (("sidecar", "models/model.onnx", "-o", "models/model.onnx"), {}, {}),
        (("sidecar", "models/model.onnx", "--sidecar", "models/net.yaml", "-o",
          "models/net.yaml"), {}, {}),
        (("sidecar", "models/model.onnx", "-o", "models"), {}, {}),
        (("sidecar", "models/model.onnx", "-o", "/proc/self/x"), {}, {}),
        (("import-izer", "--config-file", "net.yaml", "--checkpoint-file",
          "net.pth.tar", "--sample", "x.npy", "-d", "MAX78000", "-o", "net.yaml"), {}, {}),
        (("import-izer", "--config-file", "net.yaml", "--checkpoint-file",
          "net.pth.tar", "--sample", "x.npy", "-d", "MAX78000", "-o", "net.pth.tar"), {},
         {}),
        (("import-izer", "--config-file", "net.yaml", "--checkpoint-file",
          "net.pth.tar", "--sample", "x.npy", "-d", "MAX78000", "-o", "."), {}, {}),
    ]
    project = {"net.yaml": base["net.yaml"], "net.pth.tar": base["net.pth.tar"],
               "x.npy": base["net.npy"]}
    cases = []
    for i in range(count):
        argv, extra, links = variants[i % len(variants)]
        files = {**inputs, **project, **extra}
        cases.append(Case("output", f"{i:04d}", argv, files, links))
    return cases


# --------------------------------------------------------------------------- options

_VALUES = ["-1", "0", "3", "4", "99999999999", "1e3", "x", "", "P0.1", "-1.0", "2.99",
           "1.33", "0.0", "99.99", "1.", "1.2.3", "\u00e9", "-", "--", "1" * 5000]


def option_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    options = ["--timer", "--boost", "--max-checklines", "--device", "--board",
               "--maxim-path", "--sidecar", "--sample-input"]
    flags = ["--fifo", "--fast-fifo", "--softmax", "--mlator", "--overlap-data",
             "--no-unload", "--no-kat", "--new-kernel-loader", "--riscv", "--mexpress",
             "--no-mexpress", "--avg-pool-rounding", "--compact-weights", "--quiet",
             "--json", "--nonsense", "-x"]
    cases = []
    for i in range(count):
        argv = ["convert", "model.onnx", "-o", "out"]
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.6:
                argv += [rng.choice(options), rng.choice(_VALUES)]
            else:
                argv.append(rng.choice(flags))
        if rng.random() < 0.1:
            argv = [rng.choice(["check", "run", "sidecar", "import-izer", "bogus"]),
                    *argv[1:]]
        cases.append(Case("options", f"{i:04d}", tuple(argv),
                          {"model.onnx": base["model.onnx"]}, outputs=("out",)))
    return cases


# --------------------------------------------------------------------------- projects

PROJECT_FILES = ("cnn.c", "main.c", "weights.h", "sampledata.h", "sampleoutput.h")
_NUMBER = re.compile(rb"0x[0-9a-fA-F]+|\b\d+\b")
_EXTREMES = (b"0", b"-1", b"0xffffffff", b"0x80000000", b"4294967296",
             b"99999999999999999999", b"0x7fffffff")
_C_NOISE = (b"#define X (", b"}", b"{", b"for (;;) {", b"while (1);", b"#if 0", b"#endif",
            b"/*", b"uint32_t t[] = {", b"#define SAMPLE_OUTPUT { 1, 2,",
            b'#include "nothere.h"', b"memcpy32((uint32_t *) 0x50400000, kernels, 99999999);")


def _mutate_c(rng: random.Random, text: bytes) -> bytes:
    """One hostile edit of a C source: bytes, lines, numbers or statements."""
    lines = text.split(b"\n")
    how = rng.randrange(8)
    if how == 0:
        return _mutate_bytes(rng, text) if text else text
    if how == 1:
        for _ in range(rng.randint(1, 10)):
            if lines:
                del lines[rng.randrange(len(lines))]
    elif how == 2:
        i = rng.randrange(len(lines))
        lines[i:i] = [lines[i]] * rng.choice((2, 100, 5000))
    elif how == 3:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif how == 4:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(_C_NOISE))
    elif how in (5, 6):
        numbers = list(_NUMBER.finditer(text))
        if not numbers:
            return b""
        m = rng.choice(numbers)
        if how == 5:
            new = rng.choice(_EXTREMES)
        else:
            value = int(m.group(0), 0) + rng.choice((-1, 1, 16, 256, 1 << 20))
            new = (hex(value) if m.group(0).startswith(b"0x") else str(value)).encode()
        return text[:m.start()] + new + text[m.end():]
    else:
        return b""
    return b"\n".join(lines)


def project_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    """`verify` on a generated project (the digits example, with and without FIFO input;
    a transposed layer fed from the FIFO) with one or two of its files edited, and with
    hostile options."""
    projects = [base[key] for key in ("project", "project-fifo", "project-up")]
    options = [(), (), (), ("--json",), ("--stop-after", "2", "-o", "dump"),
               ("--stop-after", "99"), ("--layer-order", "0,1,2,3"),
               ("--layer-order", "0,,9"), ("--model", "p/model.onnx")]
    cases = []
    for i in range(count):
        files = {f"p/{name}": data for name, data in rng.choice(projects).items()}
        for _ in range(rng.randint(1, 2)):
            name = f"p/{rng.choice(PROJECT_FILES)}"
            files[name] = _mutate_c(rng, files[name])
        argv = ("verify", "p", *rng.choice(options))
        cases.append(Case("project", f"{i:04d}", argv, files, outputs=("dump",)))
    return cases


# --------------------------------------------------------------------------- float models

_WEIGHT_BITS = [b"default: 1\n", b"default: 2\n", b"default: 4\n", b"default: 3\n",
                b"default: 8\nnope: 4\n", b"- 1\n", b"default: [8]\n", b"\xff\xfe",
                b"default: 99999999999999999999\n", b"{default: 8, default: 4}\n", b""]


def _float_options(rng: random.Random) -> tuple[list[str], dict]:
    """Options of the float path, some hostile: weight widths, calibration method,
    percentile, labels."""
    argv: list[str] = []
    files: dict = {}
    if rng.random() < 0.4:
        argv += ["--weight-bits", "bits.yaml"]
        files["bits.yaml"] = rng.choice(_WEIGHT_BITS)
    if rng.random() < 0.3:
        argv += ["--calibration-method", rng.choice(["max", "mse", "percentile", "x", ""])]
    if rng.random() < 0.2:
        argv += ["--percentile", rng.choice(["99.99", "0", "-1", "100", "101", "nan", "1e9"])]
    if rng.random() < 0.2:
        argv += ["--labels", "labels.npy"]
        files["labels.npy"] = rng.choice([
            _npy(np.arange(16) % 10), _npy(np.arange(3)), _npy(np.full(16, -1)),
            _npy(np.full(16, 1 << 40)), _npy(np.zeros((16, 2))), _npy(np.full(16, np.nan)),
            b"", _npy(np.array(["a"] * 16))])
    return argv, files


def _damaged_calibration(rng: random.Random, cal: bytes) -> bytes:
    """Calibration samples (N x the input) damaged: bytes, values, shape, type, header."""
    good = np.load(io.BytesIO(cal))
    makers = [
        lambda: _mutate_bytes(rng, cal), lambda: _npy(good.astype(np.float64)),
        lambda: _npy(np.full(good.shape, np.nan, np.float32)),
        lambda: _npy(np.full(good.shape, np.inf, np.float32)),
        lambda: _npy(good[:0]), lambda: _npy(good[:1]), lambda: _npy(good[0]),
        lambda: _npy(good[..., :3]), lambda: _npy(good.astype(np.int8)),
        lambda: _npy(good.astype(np.complex64)), lambda: _npy(good * 1e30),
        lambda: _npy(np.zeros_like(good)), lambda: _npz(x=good),
        lambda: _npy_header((1 << 40, *good.shape[1:]), "<f4"),
        lambda: _npy(np.array([{"a": 1}], dtype=object)), lambda: b""]
    return rng.choice(makers)()


def float_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    """`quantize` and `convert --calibration` (the float readers): a float model (the
    digits example, one wide linear layer, or an exporter dialect's file) damaged as the
    ONNX kind damages models, its calibration data damaged as the sample kind damages
    samples, or hostile options."""
    cases = []
    for i in range(count):
        # half the digits example, the rest spread over the other bases (the wide layer
        # and one model per exporter dialect)
        others = sorted(k for k in base if k.startswith("float-") and k.endswith(".onnx"))
        model_key = "float.onnx" if rng.random() < 0.5 else rng.choice(others)
        model, cal = base[model_key], base[model_key.replace(".onnx", "-cal.npy")]
        pick = rng.random()
        if pick < 0.45:
            model = _mutate_onnx(rng, model)
        elif pick < 0.75:
            cal = _damaged_calibration(rng, cal)
        argv, files = _float_options(rng) if pick >= 0.6 else ([], {})
        if rng.random() < 0.5:
            argv = ["quantize", "model.onnx", "-d", "MAX78000", "--calibration", "cal.npy",
                    "-o", "q.onnx", *argv]
        else:
            argv = ["convert", "model.onnx", "-d", "MAX78000", "--calibration", "cal.npy",
                    "-o", "out", *argv]
        argv += ["--device", rng.choice(["MAX78000", "MAX78002"])]
        files.update({"model.onnx": model, "cal.npy": cal})
        cases.append(Case("float", f"{i:04d}", tuple(argv), files,
                          outputs=("out", "q.onnx", "q.report.json")))
    return cases


# --------------------------------------------------------------------------- CPU segments

CPU_FILES = ("cpu_io.c", "cpu_layers.c", "cpu_layers.h", "main.c", "sampleoutput.h")


def cpu_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    """The CPU-fallback paths (issue 28): `convert --cpu-fallback` of a float model with
    a CPU stem, a CPU segment between accelerator layers and a CPU head, its model or
    calibration damaged or with hostile options; and `verify` of its project with the
    CPU files (or the files that run them) edited."""
    cases = []
    for i in range(count):
        if rng.random() < 0.5:
            files = {f"p/{name}": data for name, data in base["split-project"].items()}
            for _ in range(rng.randint(1, 2)):
                name = f"p/{rng.choice(CPU_FILES)}"
                files[name] = _mutate_c(rng, files[name])
            argv = ("verify", "p", *rng.choice([(), ("--json",)]))
            cases.append(Case("cpu", f"{i:04d}", argv, files))
            continue
        model, cal = base["split.onnx"], base["split-cal.npy"]
        pick = rng.random()
        if pick < 0.4:
            model = _mutate_onnx(rng, model)
        elif pick < 0.7:
            cal = _damaged_calibration(rng, cal)
        argv = ["convert", "model.onnx", "--calibration", "cal.npy", "-o", "out",
                "--cpu-fallback", "--device", rng.choice(["MAX78000", "MAX78002"])]
        argv += rng.choice([[], [], ["--fifo"], ["--riscv"], ["--softmax"], ["--mlator"],
                            ["--sample-input", "cal.npy"], ["--verify"]])
        files = {"model.onnx": model, "cal.npy": cal}
        cases.append(Case("cpu", f"{i:04d}", tuple(argv), files,
                          outputs=("out", "report.json")))
    return cases


# --------------------------------------------------------------------------- issue 35

# What users put into a generated project (project.mk builds app/ with VPATH += app),
# and names that collide with what a project writes
_USER_ENTRIES = ("app/user.c", "my_notes.txt", ".vscode/mine.json", "data/x/y.bin",
                 ".hidden", "build/max78000.elf", "verify-layer1/layer1.npy", "cnn.c.orig",
                 "softmax.c", "README.md.txt", "weird name.txt")


def target_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    """Output targets holding the user's files (issue 35): an earlier project with files
    and folders the user added (and links, an edited or a damaged manifest, a user file
    where the new project writes one), a folder of the user's, a file, a link, with and
    without --overwrite, through convert, sidecar, run and verify --stop-after. Nothing
    the tool did not write may change."""
    tree = base["project-tree"]
    listed = tuple(f"out/{name}" for name in tree)
    cases = []
    for i in range(count):
        files: dict = {"model.onnx": base["model.onnx"], "sample.npy": base["sample.npy"]}
        links: dict = {}
        what = rng.randrange(6)
        earlier = what in (0, 1, 2, 3)
        if earlier:
            files.update({f"out/{name}": data for name, data in tree.items()})
        for name in rng.sample(_USER_ENTRIES, rng.randint(1, 4)):
            if earlier and f"out/{name}" in files:
                continue
            files[f"out/{name}" if what != 5 else f"mine/{name}"] = \
                rng.randbytes(rng.randint(0, 64))
        if what == 1:  # a listed file edited by the user: it must stay as edited
            name = rng.choice([n for n in tree if n.endswith((".c", ".h"))])
            files[f"out/{name}"] = tree[name] + b"/* mine */\n"
        elif what == 2:  # a damaged manifest
            files["out/onnx2ai8x-manifest.txt"] = _mutate_bytes(
                rng, tree["onnx2ai8x-manifest.txt"])
        elif what == 3:  # links of the user's inside the project
            files["outside.txt"] = b"outside\n"
            links["out/link-out"] = "../outside.txt"
            links["out/app-link"] = "../mine"
        elif what == 5:  # the output is a link to the user's folder
            links["out"] = "mine"
        options = rng.choice([(), ("--overwrite",), ("--overwrite", "--softmax"),
                              ("--overwrite", "--fifo")])
        kind = rng.random()
        if kind < 0.7:
            argv = ("convert", "model.onnx", "--device", "MAX78000", "--sample-input",
                    "sample.npy", "-o", "out", "-q", *options)
            written = {"out/softmax.c", "out/softmax.h"} if "--softmax" in options and \
                "out/softmax.c" not in files else set()
            # the tool's files: what the earlier manifest lists (unless edited), its own
            outputs = tuple(sorted({*listed, *written, "out/onnx2ai8x-manifest.txt"}
                                   - ({f"out/{name}"} if what == 1 else set())))
            if what == 1:
                outputs = tuple(o for o in outputs if o != f"out/{name}")
        elif kind < 0.85:
            argv = ("verify", "out" if earlier else "p", "--stop-after", "1", "-o",
                    "out/verify-layer1" if earlier else "out")
            if not earlier:
                files.update({f"p/{name}": data for name, data in tree.items()})
            outputs = ()
        else:
            target = rng.choice(["out", "out/my_notes.txt", "out/app"])
            argv = ("sidecar", "model.onnx", "--device", "MAX78000", "-o", target,
                    *options[:1])
            outputs = ()
        cases.append(Case("targets", f"{i:04d}", argv, files, links, outputs=outputs))
    return cases


def toplevel_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    """Sidecars whose global keys are misspelt, mis-cased, doubled, unknown or given
    where a partial sidecar cannot take them (issue 35: `layer:` for `layers:` threw
    the hand-tuning away with exit 0), through convert, check and sidecar."""
    from onnx2ai8x.sidecar.parse import GLOBAL_KEYS

    full = base["model.yaml"].decode()
    partial = "layers:\n  - name: conv1\n    processors: 0x0000000000000001\n"
    cases = []
    for i in range(count):
        text = full if rng.random() < 0.5 else partial
        key = rng.choice(GLOBAL_KEYS)
        how = rng.randrange(5)
        typo = (key[:-1] if how == 0 else key.upper() if how == 1 else
                key.capitalize() if how == 2 else key + rng.choice("sz_") if how == 3
                else rng.choice(["Layer", "layer", "LAYERS", "layers ", "lay ers", "ayers",
                                 "output-map", "dataBuffer", "snooop", "archs"]))
        if key in ("arch", "dataset", "layers") and f"\n{key}:" in "\n" + text:
            text = ("\n" + text).replace(f"\n{key}:", f"\n{typo}:", 1)[1:]
        else:
            text = f"{typo}: {rng.choice(['1', '[]', 'x', '{a: 1}', '0x1'])}\n" + text
        argv = rng.choice([("convert", "model.onnx", "--sidecar", "net.yaml", "-o", "out"),
                           ("check", "model.onnx", "--sidecar", "net.yaml"),
                           ("sidecar", "model.onnx", "--sidecar", "net.yaml")])
        cases.append(Case("toplevel", f"{i:04d}", (*argv, "--device", "MAX78000"),
                          {"model.onnx": base["model.onnx"], "net.yaml": text.encode()},
                          outputs=("out",)))
    return cases


# --------------------------------------------------------------------------- combinations

# Options of convert that change the project, each with values that are legal on their
# own: the combinations are what is hostile (issue 35: --fifo on a 32-channel 1x1
# network with --avg-pool-rounding reached an IndexError in the kernel search).
_SWITCHES = ("--fifo", "--fast-fifo", "--fast-fifo-quad", "--softmax", "--mlator",
             "--overlap-data", "--no-unload", "--no-kat", "--riscv", "--no-mexpress",
             "--avg-pool-rounding", "--zero-sram", "--no-pipeline", "--no-pll",
             "--max-speed", "--deepsleep", "--powerdown", "--no-wfi", "--one-shot",
             "--forever", "--fifo-go", "--no-fifo-wait", "--energy", "--riscv-debug",
             "--allow-oversize", "--verify", "--compact-weights")
_VALUED = (("--timer", ("0", "3")), ("--max-checklines", ("1", "8", "64")),
           ("--board", ("EvKit_V1", "FTHR_RevA")), ("--clock-divider", ("1", "4", "16")),
           ("--boost", ("2.5",)))


def combo_models() -> dict[str, tuple[bytes, bytes]]:
    """Float models the combinations convert (with calibration data): a 1x1 network
    behind a 1x1 stride-2 average pooling, 32 and 16 channels wide, and a 3x3 one of
    3 channels on 32x32 pixels."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(35)
    out = {}
    for name, cin, k, dim in (("wide1x1", 32, 1, 16), ("narrow1x1", 16, 1, 16),
                              ("rgb3x3", 3, 3, 32)):
        w = numpy_helper.from_array(rng.uniform(-0.5, 0.5, (24, cin, k, k))
                                    .astype(np.float32), "w")
        nodes = [helper.make_node("AveragePool", ["x"], ["p"], kernel_shape=[1, 1],
                                  strides=[2, 2]),
                 helper.make_node("Conv", ["p", "w"], ["c"], kernel_shape=[k, k],
                                  pads=[k // 2] * 4),
                 helper.make_node("Relu", ["c"], ["y"])]
        graph = helper.make_graph(
            nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                        [1, cin, dim, dim])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        out[name] = (model.SerializeToString(),
                     _npy(rng.uniform(-1, 1, (8, cin, dim, dim)).astype(np.float32)))
    return out


def combo_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    """convert with random combinations of legal options, on the digits example and on
    the combination models, for both parts."""
    cases = []
    models = sorted(k for k in base if k.startswith("combo-") and k.endswith(".onnx"))
    for i in range(count):
        argv = ["convert", "model.onnx", "-o", "out", "--device",
                rng.choice(["MAX78000", "MAX78002"])]
        pick = rng.choice(["digits", *models])
        files = {"model.onnx": base["model.onnx"]}
        if pick != "digits":
            files = {"model.onnx": base[pick], "cal.npy": base[pick.replace(".onnx", ".npy")]}
            argv += ["--calibration", "cal.npy", "--accept-loss"]
        argv += rng.sample(_SWITCHES, rng.randint(1, 5))
        for option, values in rng.sample(_VALUED, rng.randint(0, 2)):
            argv += [option, rng.choice(values)]
        cases.append(Case("combos", f"{i:04d}", tuple(argv), files,
                          outputs=("out", "report.json")))
    return cases


def json_cases(rng: random.Random, base: dict, count: int) -> list[Case]:
    """Command lines of the other kinds (hostile options, samples, outputs, combinations,
    projects) with --json: every outcome one JSON document on stdout, errors included."""
    cases = []
    sources = (option_cases, sample_cases, output_cases, combo_cases, project_cases)
    takes_json = ("convert", "check", "quantize", "verify")
    for i in range(count):
        maker = rng.choice(sources)
        case = maker(random.Random(rng.random()), base, rng.randint(1, 40))[-1]
        argv = list(case.argv)
        if argv and argv[0] in ("run", "sidecar", "import-izer"):
            argv[0] = rng.choice(("check", "convert"))
        if not argv or argv[0] not in takes_json:
            argv = ["convert", *argv[1:]]
        if "--json" not in argv:
            # before a `--`, after which it would be an argument, not the option
            end = argv.index("--") if "--" in argv else len(argv)
            argv.insert(rng.randint(1, end), "--json")
        if rng.random() < 0.2:
            argv.append(rng.choice(["-q", "--quiet", "--debug"]))
        cases.append(Case("json", f"{i:04d}", tuple(argv), case.files, case.symlinks,
                          outputs=(*case.outputs, "out", "y.npy", "report.json"),
                          json_out=True))
    return cases


GENERATORS = {"onnx": onnx_cases, "sidecar": sidecar_cases, "sample": sample_cases,
              "checkpoint": checkpoint_cases, "output": output_cases,
              "options": option_cases, "project": project_cases, "float": float_cases,
              "cpu": cpu_cases, "targets": target_cases, "toplevel": toplevel_cases,
              "combos": combo_cases, "json": json_cases}
assert tuple(GENERATORS) == KINDS

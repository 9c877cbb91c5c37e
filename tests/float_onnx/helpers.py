"""Shared helpers of the float front-end tests: export, quantize, compare, convert."""
from __future__ import annotations

import io
import math
import re
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import custom_ops


def float_run(model_path: Path, x: np.ndarray) -> np.ndarray:
    """The float model's first output on onnxruntime (the user's own reference)."""
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    if inp.shape[0] == 1:  # exported with a fixed batch of one: sample by sample
        return np.concatenate([sess.run(None, {inp.name: x[k:k + 1].astype(np.float32)})[0]
                               for k in range(x.shape[0])])
    return np.asarray(sess.run(None, {inp.name: x.astype(np.float32)})[0])


def metadata(model: onnx.ModelProto) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def quantized_float_output(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """The quantized model's first output in float units, computed from the metadata
    alone: q = clip(floor((x.transpose(perm) + offset) / scale + 0.5)) in the
    accelerator's input shape, out * output scale."""
    import json

    meta = metadata(model)
    scale = float(meta["ai8x.input_scale"])
    perm = json.loads(meta["ai8x.input_perm"])
    shape = json.loads(meta["ai8x.input_shape"])
    out_scale = json.loads(meta["ai8x.output_scales"])[0]
    v = np.transpose(x, perm).reshape(x.shape[0], *shape)
    offset = json.loads(meta.get("ai8x.input_offset", "[]"))
    if offset:
        v = v + np.reshape(offset, (1, -1, *([1] * (len(shape) - 1))))
    q = np.clip(np.floor(v / scale + 0.5), -128, 127).astype(np.int8)
    out = custom_ops.run(custom_ops.session(model), q)[0]
    return np.asarray(out, np.float64) * out_scale


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    ref = np.asarray(ref, np.float64).reshape(-1)
    got = np.asarray(got, np.float64).reshape(-1)
    noise = float(np.sum((ref - got) ** 2))
    return math.inf if noise == 0 else 10 * math.log10(float(np.sum(ref ** 2)) / noise)


def cli(args: list[str]) -> tuple[int, str, str]:
    """Run the command line in-process; (exit code, stdout, stderr)."""
    from onnx2ai8x.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def kat_words(project: Path) -> list[tuple[int, int, list[int]]]:
    """SAMPLE_OUTPUT of sampleoutput.h as (address, mask, words) groups."""
    text = (project / "sampleoutput.h").read_text()
    body = re.search(r"#define SAMPLE_OUTPUT \{(.*?)\}", text, re.S).group(1)
    vals = [int(v, 0) for v in re.findall(r"0x[0-9a-fA-F]+|\d+", body)]
    groups, k = [], 0
    while k < len(vals) and vals[k] != 0:
        addr, mask, count = vals[k], vals[k + 1], vals[k + 2]
        groups.append((addr, mask, vals[k + 3:k + 3 + count]))
        k += 3 + count
    return groups


def kat_matches(project: Path, outputs: list[np.ndarray]) -> bool:
    """The known answer holds exactly the values `onnx2ai8x run` gives: 32-bit outputs
    word for word (as a multiset: the words are laid out per processor), 8-bit outputs
    byte for byte (bytes beyond the channels are zero)."""
    groups = kat_words(project)
    words = [w for _, _, ws in groups for w in ws]
    if all(o.dtype == np.int32 for o in outputs):
        want = Counter(int(v) & 0xFFFFFFFF for o in outputs for v in o.reshape(-1))
        return Counter(words) == want
    got = Counter(b for w in words for b in w.to_bytes(4, "little"))
    want = Counter(int(v) & 0xFF for o in outputs for v in o.reshape(-1))
    extra = got - want
    return not (want - got) and set(extra) <= {0}

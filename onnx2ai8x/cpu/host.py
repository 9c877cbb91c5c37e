"""Run the generated CPU C on the host: compile `cpu_layers.c` with the host gcc and a
small runner, feed it arrays, read the outputs back.

Used by the tests (the C equals the reference bit for bit) and by `verify` (CPU segments
run through the very C the firmware builds). The binary is cached by a hash of the
sources, compiler and flags in the temp directory, so a batch of segments compiles once.
The runner reads, for each segment in order, a sample count (uint32, little-endian) and
then per sample every input's int8 bytes; it writes every output's bytes per sample
(int8, or int32 little-endian for ArgMax).
"""
from __future__ import annotations

import hashlib
import math
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from onnx2ai8x.errors import Ai8xError

from . import cgen
from . import ops as K
from .ops import CpuOp, Segment

CFLAGS = ("-std=c99", "-O1", "-Wall", "-Wextra", "-pedantic", "-Werror")
# Tests also run the C under the sanitizers: any signed overflow, out-of-bounds access or
# misaligned pointer is then an error rather than silently "working" on the host.
SANITIZE_FLAGS = ("-fsanitize=undefined,address", "-fno-sanitize-recover=all", "-g")
COMPILE_TIMEOUT = 600  # seconds
RUN_TIMEOUT = 600


def _compiler() -> list[str]:
    """The host compiler command: $CC (which may carry words, e.g. `ccache gcc`), else
    gcc or cc from PATH."""
    cc = shlex.split(os.environ.get("CC", "")) or \
        [c for c in (shutil.which("gcc") or shutil.which("cc"),) if c]
    if not cc or shutil.which(cc[0]) is None:
        what = f"the compiler {cc[0]} (from CC)" if cc else "no C compiler (gcc or cc)"
        raise Ai8xError("cpu.host-compiler", "host", f"{what} was not found",
                        "install gcc, or set CC to a C99 compiler")
    return cc


def _runner_source(segments: Sequence[Segment]) -> str:
    """A main() that streams samples through every segment (host only, never firmware)."""
    lines = ["#include <stdint.h>", "#include <stdio.h>", "", '#include "cpu_layers.h"', ""]
    io_bytes = 4
    calls = []
    for seg in segments:
        sizes_in = [_size(seg, t) for t in seg.inputs]
        sizes_out = [_size(seg, t) * _width(seg, t) for t in seg.outputs]
        offs, pos = [], 0
        for n in (*sizes_in, *sizes_out):
            offs.append(pos)
            pos += -(-n // 4) * 4
        io_bytes = max(io_bytes, pos)
        args = [f"IO8 + {o}" for o in offs[:len(sizes_in)]]
        args += [f"({'int32_t' if _width(seg, t) == 4 else 'int8_t'} *)(void *)(IO8 + {o})"
                 for t, o in zip(seg.outputs, offs[len(sizes_in):], strict=True)]
        reads = " && ".join(f"read_all(IO8 + {o}, {n})"
                            for o, n in zip(offs, sizes_in, strict=False)) or "1"
        writes = "; ".join(f"fwrite(IO8 + {o}, 1, {n}, stdout)"
                           for o, n in zip(offs[len(sizes_in):], sizes_out, strict=True))
        calls += ["    if (!read_all(&n, 4)) {", "        return 1;", "    }",
                  "    for (i = 0; i < n; ++i) {",
                  f"        if (!({reads})) {{", "            return 1;", "        }",
                  f"        cpu_{seg.name}({', '.join(args)});", f"        {writes};", "    }"]
    lines += [f"static int32_t io[{io_bytes // 4}];", "#define IO8 ((int8_t *)io)", "",
              "static int read_all(void *p, size_t n)", "{",
              "    return fread(p, 1, n, stdin) == n;", "}", "", "int main(void)", "{",
              "    uint32_t n, i;", *calls, "    return fflush(stdout) != 0;", "}", ""]
    return "\n".join(lines)


def _shapes(seg: Segment) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for op in seg.ops:
        for t, s in zip(op.inputs, op.in_shapes, strict=True):
            shapes.setdefault(t, s)
        shapes[op.output] = op.out_shape
    return shapes


def _size(seg: Segment, t: str) -> int:
    return math.prod(_shapes(seg)[t])


def _width(seg: Segment, t: str) -> int:
    return 4 if any(op.output == t and op.kind == K.ARGMAX for op in seg.ops) else 1


def compile_segments(segments: Sequence[Segment], sanitize: bool = False) -> Path:
    """The host binary running `segments` (compiled once per distinct source)."""
    files = cgen.render(segments)
    runner = _runner_source(segments)
    cc = _compiler()
    flags = (*CFLAGS, *(SANITIZE_FLAGS if sanitize else ()))
    key = hashlib.sha256("\0".join([*cc, *flags, files["cpu_layers.c"], files["cpu_layers.h"],
                                    runner]).encode()).hexdigest()[:32]
    cache = Path(tempfile.gettempdir()) / f"onnx2ai8x-cpu-{os.getuid()}"
    exe = cache / f"{key}.bin"
    if exe.is_file():
        return exe
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        work = Path(tmp)
        for name, text in {**files, "runner.c": runner}.items():
            (work / name).write_text(text)
        out = work / "runner.bin"
        cmd = [*cc, *flags, "-o", str(out), str(work / "runner.c"), str(work / "cpu_layers.c")]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Ai8xError("cpu.host-compile", "cpu_layers.c", "the host compile timed out",
                            "make the CPU segments smaller") from None
        if res.returncode != 0:
            raise Ai8xError("cpu.host-compile", "cpu_layers.c",
                            f"the host compiler failed: {res.stderr.strip()[:600]}",
                            "report this: generated C must compile without warnings")
        os.replace(out, exe)  # atomic: a concurrent compile of the same key is identical
    return exe


def run_segments(cases: Sequence[tuple[Segment, Mapping[str, np.ndarray]]],
                 sanitize: bool = False) -> list[dict[str, np.ndarray]]:
    """Run each (segment, feeds) through the compiled C. Feeds are batches
    `(N, *shape)`; returns per case {output tensor: (N, *shape)} (ArgMax as int64).
    `sanitize`: build with the undefined-behaviour and address sanitizers."""
    segments = [seg for seg, _ in cases]
    exe = compile_segments(segments, sanitize)
    chunks = []
    counts = []
    for seg, feeds in cases:
        shapes = _shapes(seg)
        arrays = [_batch(feeds, t, shapes[t]) for t in seg.inputs]
        n = arrays[0].shape[0] if arrays else 1
        counts.append(n)
        chunks.append(np.uint32(n).tobytes())
        if arrays:
            chunks.append(np.concatenate([a.reshape(n, -1) for a in arrays], axis=1).tobytes())
    res = subprocess.run([str(exe)], input=b"".join(chunks), capture_output=True,
                         timeout=RUN_TIMEOUT)
    if res.returncode != 0:
        detail = res.stderr.decode("utf-8", "replace").strip()[:400]
        raise Ai8xError("cpu.host-run", "cpu_layers.c",
                        f"the host-compiled CPU layers exited with status {res.returncode}"
                        + (f": {detail}" if detail else ""),
                        "report this: the generated C must run cleanly on every input")
    data, pos, results = res.stdout, 0, []
    for (seg, _), n in zip(cases, counts, strict=True):
        shapes = _shapes(seg)
        per = [(t, math.prod(shapes[t]) * _width(seg, t)) for t in seg.outputs]
        stride = sum(b for _, b in per)
        block = np.frombuffer(data, dtype=np.uint8, count=n * stride, offset=pos)
        block = block.reshape(n, stride)
        pos += n * stride
        out, col = {}, 0
        for t, b in per:
            raw = np.ascontiguousarray(block[:, col:col + b])
            dtype = "<i4" if _width(seg, t) == 4 else np.int8
            arr = raw.view(dtype).reshape(n, *shapes[t])
            out[t] = arr.astype(np.int64) if _width(seg, t) == 4 else arr
            col += b
        results.append(out)
    return results


def _batch(feeds: Mapping[str, np.ndarray], t: str, shape: tuple[int, ...]) -> np.ndarray:
    if t not in feeds:
        raise Ai8xError("cpu.input", f"CPU tensor {t}", "no value fed for this input",
                        "feed every input of the segment")
    arr = np.asarray(feeds[t])
    if arr.shape[1:] != shape:
        raise Ai8xError("cpu.input", f"CPU tensor {t}",
                        f"fed shape {list(arr.shape)}, expected (N, {', '.join(map(str, shape))})",
                        "feed a batch of samples of the tensor's shape")
    if arr.size and (arr.min() < -128 or arr.max() > 127):
        raise Ai8xError("cpu.input", f"CPU tensor {t}", "values outside [-128, 127]",
                        "feed int8 values")
    return np.ascontiguousarray(arr.astype(np.int8))


def run_segment(ops: Sequence[CpuOp], feeds: Mapping[str, np.ndarray],
                outputs: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """One segment on one sample (feeds of the tensors' own shapes); outputs by name."""
    seg = K.segment("segment", ops, outputs)
    shapes = _shapes(seg)
    batch = {t: np.asarray(feeds[t])[np.newaxis] if t in feeds else None for t in seg.inputs}
    missing = [t for t, v in batch.items() if v is None]
    if missing or any(batch[t].shape[1:] != shapes[t] for t in seg.inputs):
        raise Ai8xError("cpu.input", f"CPU segment reading {', '.join(seg.inputs)}",
                        "a fed value is missing or misshaped",
                        "feed one sample of each input's shape")
    out = run_segments([(seg, batch)])[0]
    return {t: v[0] for t, v in out.items()}


"""`onnx2ai8x verify` of a project with CPU segments (issue 28, item 4).

The project's own C runs: its cpu_layers.c is compiled with the host compiler and run
on the sample cpu_io.c holds; the stem's output is packed into the accelerator's input
words by cpu_io.c's own tables; the accelerator's part runs on the functional model
(ai8xsim) from a copy of the project whose main.c loads those words; the head reads
its input from the simulated data memory where cpu_io.c's tables say and runs through
the same compiled C; its output is compared with the known answer cpu_io.c checks on
the chip (the reference's).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .errors import EXIT_USAGE, Ai8xError

IO_FILE = "cpu_io.c"


def is_split(project: Path) -> bool:
    return (Path(project) / IO_FILE).is_file() and (Path(project) / "cpu_layers.c").is_file()


def _ints(body: str) -> list[int]:
    """The integers of a C initializer (decimal or hex, `u` suffixes)."""
    return [int(t, 0) for t in re.findall(r"-?0x[0-9a-fA-F]+|-?\d+", body)]


def _table(text: str, name: str) -> list[int] | None:
    m = re.search(rf"\b{name}\[\d+\] = \{{(.*?)\}};", text, re.S)
    return None if m is None else _ints(m.group(1))


def _rows(text: str, name: str, width: int) -> list[list[int]]:
    return _chunks(_table(text, name) or [], width)


def _bad(project: Path, what: str) -> Ai8xError:
    return Ai8xError("verify.cpu", str(project), f"the CPU segments' files: {what}",
                     "verify the project as onnx2ai8x --cpu-fallback wrote it",
                     exit_code=EXIT_USAGE)


def _compile(project: Path, tmp: Path) -> dict[str, tuple[str, str, int, int]]:
    """The project's cpu_layers.c in a host runner per segment: name -> (executable,
    output C type, input size, output size)."""
    header = (project / "cpu_layers.h").read_text()
    protos = re.findall(r"void cpu_(\w+)\(const int8_t \*in_0, (int8_t|int32_t) \*out_0\);",
                        header)
    runners = {}
    for name, ctype in protos:
        sizes = {k: int(v) for k, v in re.findall(
            rf"#define CPU_{name.upper()}_(IN|OUT)_0_SIZE (\d+)", header)}
        src = tmp / f"run_{name}.c"
        src.write_text(
            "#include <stdio.h>\n#include <stdint.h>\n#include \"cpu_layers.h\"\n"
            f"static int8_t in[{sizes['IN']}];\nstatic {ctype} out[{sizes['OUT']}];\n"
            "int main(void)\n{\n  int v;\n  long i;\n\n"
            f"  for (i = 0; i < {sizes['IN']}; i++) {{\n"
            "    if (scanf(\"%d\", &v) != 1) return 1;\n    in[i] = (int8_t) v;\n  }\n"
            f"  cpu_{name}(in, out);\n"
            f"  for (i = 0; i < {sizes['OUT']}; i++) printf(\"%ld\\n\", (long) out[i]);\n"
            "  return 0;\n}\n")
        exe = tmp / f"run_{name}"
        cc = shutil.which("gcc") or shutil.which("cc")
        if cc is None:
            raise _bad(project, "no host C compiler (gcc) to run the CPU layers")
        try:
            proc = subprocess.run([cc, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror",
                                   f"-I{project}", str(project / "cpu_layers.c"), str(src),
                                   "-o", str(exe)], capture_output=True, text=True,
                                  timeout=120)
        except subprocess.TimeoutExpired:
            raise _bad(project, "cpu_layers.c does not compile in 120 s") from None
        if proc.returncode:
            raise _bad(project, f"cpu_layers.c does not compile on the host: "
                       f"{proc.stderr.strip()[:300]}")
        runners[name] = (str(exe), ctype, sizes["IN"], sizes["OUT"])
    return runners


def _run(runner, values: np.ndarray) -> np.ndarray:
    exe, _, n_in, _ = runner
    feed = "\n".join(str(int(v)) for v in np.asarray(values).reshape(-1)[:n_in]) + "\n"
    try:
        proc = subprocess.run([exe], input=feed, capture_output=True, text=True,
                              timeout=RUN_SECONDS)
    except subprocess.TimeoutExpired:
        return np.zeros(0, np.int64)  # compared with the known answer: a FAIL
    if proc.returncode:
        return np.zeros(0, np.int64)
    return np.array([int(t) for t in proc.stdout.split()], np.int64)


def _pack(words: int, runs: list[list[int]], x: np.ndarray) -> list[int]:
    """cpu_io.c's cpu_pack in numpy: runs of (word, count, first[4], step[4])."""
    out = [0] * words
    for word, count, *rest in runs:
        first, step = rest[:4], rest[4:8]
        for i in range(count):
            w = 0
            for lane in range(4):
                if first[lane] >= 0:
                    w |= (int(x[first[lane] + i * step[lane]]) & 0xFF) << (8 * lane)
            out[word + i] = w
    return out


def _restore_main(main: str, words: list[list[int]]) -> str:
    """main.c as the plain conversion writes it, with the CPU's words as constants."""
    text = main.replace('#include "cpu_layers.h"\n#include "cpu_io.h"\n', "")
    for k, ws in enumerate(words):
        body = ", ".join(f"0x{w:08x}" for w in ws)
        text = re.sub(rf"#define input_{k} cpu_input_{k} [^\n]*",
                      f"static const uint32_t input_{k}[] = {{ {body} }};", text)
    text = re.sub(r" *cpu_(stem_input|accelerator_start|between_runs)\(\);[^\n]*\n", "",
                  text)
    return re.sub(r"  if \(cpu_head_check\(\) != CNN_OK\) fail\(\);[^\n]*\n", "", text)


RUN_SECONDS = 20  # one CPU segment on the host: far more than any sane segment takes


def verify_split(project: Path):
    """The whole project, in order: stem (host C), accelerator (ai8xsim), head (host
    C), against the known answer cpu_io.c holds."""
    try:
        return _verify_split(Path(project))
    except (UnicodeDecodeError, ValueError, IndexError, KeyError, AttributeError,
            TypeError, OverflowError) as exc:  # edited files: say which, no traceback
        raise _bad(Path(project), f"they do not read as onnx2ai8x wrote them "
                   f"({type(exc).__name__}: {str(exc)[:160]})") from None


def _verify_split(project: Path):
    from ai8xsim.verify import execute, render

    from .verdict import VerifyResult

    project = Path(project)
    io = (project / IO_FILE).read_text()
    main = (project / "main.c").read_text()
    lines: list[str] = []
    data: dict = {"project": str(project), "cpu_segments": []}
    with tempfile.TemporaryDirectory(prefix="onnx2ai8x-verify-cpu-") as tmp:
        runners = _compile(project, Path(tmp))
        words: list[list[int]] = []
        if "stem" in runners:
            sample = _table(io, "cpu_sample")
            if sample is None:
                raise _bad(project, "cpu_io.c holds no cpu_sample")
            stem_out = _run(runners["stem"], np.array(sample))
            if stem_out.size != runners["stem"][3]:
                data.update(passed=False, verdict="FAIL")
                return VerifyResult(False, "FAIL: the CPU stem (host-compiled "
                                    "cpu_layers.c) stopped or gave no output", data, "FAIL")
            counts = [int(n) for n in re.findall(r"^uint32_t cpu_input_\d+\[(\d+)\];", io,
                                                 re.M)]
            words = [_pack(n, _rows(io, f"cpu_pack_{k}", 10), stem_out)
                     for k, n in enumerate(counts)]
            lines.append(f"CPU stem (host-compiled cpu_layers.c): {len(sample)} values in, "
                         f"{stem_out.size} out, packed into {sum(counts)} input words")
            data["cpu_segments"].append("stem")
        copy = Path(tmp) / "project"
        shutil.copytree(project, copy)
        (copy / "main.c").write_text(_restore_main(main, words))
        for name in (IO_FILE, "cpu_io.h", "cpu_layers.c", "cpu_layers.h"):
            (copy / name).unlink()
        counts = _table(io, "cpu_layer_counts")
        if counts:
            outcome = execute(copy, stop_after=counts[0] & 0xFF)
            passed, acc_text = _runs(io, runners, outcome, counts, copy)
            data["accelerator_runs"] = len(counts)
        else:
            outcome = execute(copy)
            acc_text = render(outcome)
            passed = outcome.passed
        lines.append("accelerator (ai8xsim): " + acc_text.replace(str(copy), str(project)))
        data.update(device=outcome.device, layers=len(outcome.layers),
                    checked_words=outcome.checked_words,
                    mismatches=len(outcome.mismatches), error=outcome.error,
                    not_modelled=outcome.unmodelled)
        verdict = outcome.verdict
        if "head" in runners and passed and outcome.machine is not None:
            passed, text = _head(io, runners["head"], outcome.machine, project)
            lines.append(text)
            data["cpu_segments"].append("head")
            verdict = "PASS" if passed else "FAIL"
    data.update(passed=passed, verdict=verdict)
    mids = sorted(n for n in runners if n.startswith("between"))
    parts = [*(["CPU stem"] if "stem" in runners else []),
             "accelerator" + (f" runs with {len(mids)} CPU segment(s) between them"
                              if mids else ""),
             *(["CPU head"] if "head" in runners else [])]
    head = f"{'PASS' if passed else verdict}: {', '.join(parts)} in order"
    return VerifyResult(passed, head + "\n  " + "\n  ".join(lines), data, verdict)


def _runs(io: str, runners: dict, outcome, counts: list[int], copy: Path
          ) -> tuple[bool, str]:
    """The accelerator's runs with the CPU segments between them, on the machine the
    first run (stopped after its last layer) left; then the project's known answer."""
    from ai8xsim.engine import decode, register_order, run_layer

    m = outcome.machine
    if m is None or outcome.error or outcome.unmodelled:
        return False, outcome.error or outcome.unmodelled or "the first run did not start"
    ran = len(outcome.layers)
    for k, count in enumerate(counts[1:]):
        runner = runners.get(f"between{k}")
        reads = _runs_of(io, f"cpu_b{k}_reads")
        if runner is None or not reads:
            raise _bad(copy, f"no CPU segment {k} between the accelerator's runs")
        x = _read(m, reads, runner[2])
        y = _run(runner, x)
        if y.size != runner[3]:
            return False, f"FAIL: CPU segment {k} (host-compiled) stopped or gave no output"
        # where cpu_io.c writes the result back (its own table when the segment
        # reorders the axes)
        for value, n, addr, step, lane in _runs_of(io, f"cpu_b{k}_writes") or reads:
            for i in range(n):
                a = addr + i * step
                w = m.read(a) & ~(0xFF << (8 * lane))
                m.write(a, w | (int(y[value + i]) & 0xFF) << (8 * lane))
        start, last = count >> 8, count & 0xFF
        for layer in register_order(m, start):
            if layer > last:
                break
            run_layer(m, decode(m, layer))
            ran += 1
    expected = _ints(re.search(r"#define SAMPLE_OUTPUT \{(.*?)\}",
                               (copy / "sampleoutput.h").read_text(), re.S).group(1))
    k = checked = 0
    while k < len(expected) and expected[k] != 0:
        addr, mask, n = expected[k:k + 3]
        for i in range(n):
            got = m.read(addr + 4 * i) & mask
            if got != expected[k + 3 + i]:
                return False, (f"FAIL: data mismatch at 0x{addr + 4 * i:08x}: expected "
                               f"0x{expected[k + 3 + i]:08x}, read 0x{got:08x}")
            checked += 1
        k += 3 + n
    return True, (f"PASS: {outcome.device}, {ran} layers in {len(counts)} runs, "
                  f"{checked} known-answer words equal")


def _runs_of(io: str, name: str) -> list[list[int]]:
    return _rows(io, name, 5)


def _chunks(vals: list[int], width: int) -> list[list[int]]:
    return [vals[i:i + width] for i in range(0, len(vals), width)]


def _read(m, reads: list[list[int]], size: int) -> np.ndarray:
    x = np.zeros(size, np.int64)
    for value, count, addr, step, lane in reads:
        for i in range(count):
            b = (m.read(addr + i * step) >> (8 * lane)) & 0xFF
            x[value + i] = b - 256 if b > 127 else b
    return x


def _head(io: str, runner, machine, project: Path) -> tuple[bool, str]:
    expected = _table(io, "cpu_expected")
    reads = _rows(io, "cpu_reads", 5)
    if expected is None or not reads:
        raise _bad(project, "cpu_io.c holds no head tables")
    x = _read(machine, reads, runner[2])
    got = _run(runner, x)
    want = np.array(expected, np.int64)
    if got.shape == want.shape and np.array_equal(got, want):
        return True, (f"CPU head (host-compiled cpu_layers.c) on the simulated output: "
                      f"{want.size} values equal the known answer")
    bad = int(np.argmax(got != want)) if got.shape == want.shape else 0
    return False, (f"CPU head output {bad}: expected {want[bad] if want.size else '-'}, "
                   f"got {got[bad] if got.size > bad else '-'}")


__all__ = ["is_split", "verify_split"]

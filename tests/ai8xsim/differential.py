"""The random differential (issue 26): one generated configuration through the vendor's
synthesis tool and through onnx2ai8x, judged by `verify` and by c2trace.

For each configuration (tests/ai8xsim/random_nets.py):

1. the vendor tool writes its C project (it may refuse a configuration: that is a
   statement about the generator, counted apart, never a verdict);
2. `verify` executes the vendor's project: it must PASS (its known answer is the
   vendor's own model of the network);
3. onnx2ai8x imports the sidecar and checkpoint (import-izer) and converts with the
   sidecar; its project must be register-exact with the vendor's (c2trace compare:
   registers, kernels, bias, input, known answer, unload) and PASS.

Every disagreement is a bug in one of the three until classified in
tests/ai8xsim/exceptions.py (RANDOM_CLASSES): the model, the converter or the vendor.

Run the sweep (niced, resumable: finished configurations in OUT/results.jsonl are kept):

    python -m tests.ai8xsim.differential --device MAX78000 --count 1000 --out DIR

The vendor tool is found as in test_vendor_projects.py (ONNX2AI8X_VENDOR_SYNTH,
ONNX2AI8X_VENDOR_PYTHON); ONNX2AI8X_VENDOR_PYTHONPATH is put first on its PYTHONPATH.
The tool pins numpy 1.26: under numpy 2 its kernel writer stops on every network with
weights ("Python integer 4294967295 out of bounds for uint8", izer/apbaccess.py), so a
vendor environment with numpy 2 needs a numpy 1.26 overlay there, e.g.
`pip install --target DIR numpy==1.26.4` and ONNX2AI8X_VENDOR_PYTHONPATH=DIR.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ai8xsim.verify import PASS, execute, render
from tests.ai8xsim.random_nets import DEVICES, Config, generate, write

SYNTH = Path(os.environ.get("ONNX2AI8X_VENDOR_SYNTH", "/tmp/vendor/synth"))
PYTHON = Path(os.environ.get("ONNX2AI8X_VENDOR_PYTHON", "/tmp/vendor/venv/bin/python"))
C2TRACE = Path(__file__).resolve().parents[3] / "shared" / "tools" / "c2trace.py"


def vendor_available() -> bool:
    return (SYNTH / "ai8xize.py").is_file() and PYTHON.is_file() and C2TRACE.is_file()


def _vendor_env(work: Path) -> dict[str, str]:
    """The vendor tool's environment. Its version check imports PyGithub even when
    --no-version-check skips the check; where that package is missing, an empty
    stand-in module on PYTHONPATH lets the tool start (the check never runs)."""
    env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    paths = [p for p in os.environ.get("ONNX2AI8X_VENDOR_PYTHONPATH", "").split(":") if p]
    probe = subprocess.run([str(PYTHON), "-c", "import github"], capture_output=True)
    if probe.returncode != 0:
        shim = work / "shim" / "github"
        shim.mkdir(parents=True, exist_ok=True)
        (shim / "__init__.py").write_text("")
        paths.append(str(work / "shim"))
    if paths:
        env["PYTHONPATH"] = ":".join(paths)
    return env


def vendor_project(files: tuple[Path, Path, Path], device: str, out: Path,
                   options: tuple[str, ...] = ()) -> tuple[Path | None, str]:
    """The vendor tool's project for (sidecar, checkpoint, sample), or None and why."""
    yaml, ckpt, sample = files
    cmd = [str(PYTHON), "ai8xize.py", "--test-dir", str(out), "--prefix", "p",
           "--checkpoint-file", str(ckpt), "--config-file", str(yaml), "--sample-input",
           str(sample), "--device", device, "--no-version-check", "--overwrite", *options]
    proc = subprocess.run(cmd, cwd=SYNTH, env=_vendor_env(out), capture_output=True,
                          text=True, timeout=900)
    project = out / "p"
    if proc.returncode != 0 or not (project / "cnn.c").is_file():
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines()
                 if "ERROR" in ln or "Error" in ln or "error" in ln]
        return None, (lines[-1] if lines else (proc.stdout + proc.stderr)[-300:]).strip()
    return project, ""


def vendor_suite_project(name: str, device: str, out: Path, options: tuple[str, ...] = ()
                         ) -> tuple[Path | None, str]:
    """The vendor tool's project for its own suite configuration tests/test-NAME.yaml,
    run with the suite's sample data and weights (no checkpoint)."""
    cmd = [str(PYTHON), "ai8xize.py", "--test-dir", str(out), "--prefix", "p",
           "--config-file", f"tests/test-{name}.yaml", "--device", device,
           "--no-version-check", "--overwrite", *options]
    proc = subprocess.run(cmd, cwd=SYNTH, env=_vendor_env(out), capture_output=True,
                          text=True, timeout=900)
    project = out / "p"
    if proc.returncode != 0 or not (project / "cnn.c").is_file():
        return None, (proc.stdout + proc.stderr)[-300:]
    return project, ""


def our_project(files: tuple[Path, Path, Path], device: str, out: Path,
                options: tuple[str, ...] = ()) -> tuple[Path | None, str]:
    """onnx2ai8x's project for the same files (import-izer, then convert with the
    sidecar), run as a user does: separate processes."""
    yaml, ckpt, sample = files
    model = out.parent / "model.onnx"
    steps = [
        ["import-izer", "--config-file", str(yaml), "--checkpoint-file", str(ckpt),
         "--sample", str(sample), "--device", device, "-o", str(model), "--overwrite"],
        [str(model), "--device", device, "--sidecar", str(yaml), "--sample-input",
         str(sample), "-o", str(out), "--quiet", *options],
    ]
    for args in steps:
        proc = subprocess.run([sys.executable, "-m", "onnx2ai8x.cli", *args],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            return None, (proc.stderr or proc.stdout).strip().splitlines()[0][:300]
    return out, ""


def same_registers(ours: Path, vendor: Path) -> tuple[bool, str]:
    proc = subprocess.run([sys.executable, str(C2TRACE), "compare", str(ours), str(vendor)],
                          capture_output=True, text=True, timeout=600)
    first = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    return proc.returncode == 0, "" if proc.returncode == 0 else " | ".join(first[:3])[:400]


@dataclass(frozen=True)
class Result:
    """What happened to one configuration (one JSON line of the sweep's record)."""

    name: str
    seed: int
    device: str
    kinds: tuple[str, ...]
    vendor: str  # PASS / FAIL / NOT MODELLED / ERROR, or "refused" (no project)
    ours: str  # the same, or "refused"
    same: bool | None  # register-exact with the vendor (None: one of the two is missing)
    detail: str

    def line(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


def _verdict(project: Path | None) -> tuple[str, str]:
    if project is None:
        return "refused", ""
    outcome = execute(project)
    return outcome.verdict, "" if outcome.verdict == PASS else render(outcome)[:400]


def run_config(config: Config, work: Path, vendor: bool = True) -> Result:
    """One configuration through both tools (`vendor` False: ours only)."""
    files = write(config, work / "in")
    theirs, why = vendor_project(files, config.device, work / "vendor",
                                 config.options) if vendor else (None, "not run")
    v_verdict, v_detail = _verdict(theirs)
    ours, our_why = our_project(files, config.device, work / "ours", config.options)
    o_verdict, o_detail = _verdict(ours)
    same = None
    cmp_detail = ""
    if ours is not None and theirs is not None:
        same, cmp_detail = same_registers(ours, theirs)
    detail = "; ".join(d for d in (why if theirs is None else "", v_detail, our_why,
                                   o_detail, cmp_detail) if d)
    return Result(config.name, config.seed, config.device, config.kinds,
                  v_verdict if vendor else "not run", o_verdict, same, detail)


def agrees(r: Result) -> bool:
    """The differential's claim for one configuration."""
    if r.vendor == "refused":
        return r.ours in (PASS, "refused")  # nothing to compare; ours must still pass
    return r.vendor == PASS and r.ours == PASS and r.same is True


def sweep(devices: tuple[str, ...], count: int, out: Path, start: int = 0) -> None:
    """`count` configurations per device from seed `start`, the devices taking turns;
    each result is appended to OUT/results.jsonl as it comes (a rerun skips those)."""
    out.mkdir(parents=True, exist_ok=True)
    record = out / "results.jsonl"
    done = set()
    if record.is_file():
        done = {(r["device"], r["seed"]) for r in map(json.loads, record.read_text()
                                                      .splitlines()) if r}
    for seed, device in ((s, d) for s in range(start, start + count) for d in devices):
        if (device, seed) in done:
            continue
        began = time.time()
        work = Path(tempfile.mkdtemp(prefix=f"rnd{seed}-", dir=out))
        try:
            result = run_config(generate(seed, device), work)
        except Exception as exc:  # a crash in either tool is a finding, not a stop
            result = Result(generate(seed, device).name, seed, device, (), "ERROR",
                            "ERROR", None, f"{type(exc).__name__}: {exc}"[:400])
        with record.open("a") as handle:
            handle.write(result.line() + "\n")
        from tests.ai8xsim.exceptions import random_class

        known = random_class(generate(seed, device), result)
        mark = "ok " if agrees(result) else f"CLS[{known.name}]" if known else "BAD"
        print(f"{mark} {result.name} vendor={result.vendor} ours={result.ours} "
              f"same={result.same} {time.time() - began:.0f}s {result.detail[:200]}",
              flush=True)
        if agrees(result) or known:
            shutil.rmtree(work, ignore_errors=True)


def summary(record: Path) -> str:
    """The sweep's figures per device from its record: configurations, vendor refusals,
    vendor C PASS, ours register-exact and PASS, disagreements by class."""
    from collections import Counter

    from tests.ai8xsim.exceptions import random_class

    rows = [Result(**{**r, "kinds": tuple(r["kinds"])})
            for r in map(json.loads, record.read_text().splitlines()) if r]
    lines = []
    for device in DEVICES:
        mine = [r for r in rows if r.device == device]
        if not mine:
            continue
        judged = [r for r in mine if r.vendor != "refused"]
        classes: Counter[str] = Counter()
        for r in mine:
            if not agrees(r):
                known = random_class(generate(r.seed, device), r)
                classes[known.name if known else f"UNEXPLAINED {r.name}"] += 1
        lines.append(
            f"{device}: {len(mine)} configurations; vendor refused {len(mine) - len(judged)}"
            f"; vendor C PASS {sum(r.vendor == PASS for r in judged)}/{len(judged)}; ours "
            f"register-exact and PASS {sum(agrees(r) for r in judged)}/{len(judged)}; "
            f"ours PASS where the vendor refused "
            f"{sum(r.ours == PASS for r in mine if r.vendor == 'refused')}"
            f"/{len(mine) - len(judged)}; disagreements: "
            + (", ".join(f"{k} x{n}" for k, n in sorted(classes.items())) or "none"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=DEVICES, action="append")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--summary", action="store_true",
                        help="print the figures of the sweep recorded in OUT and stop")
    args = parser.parse_args(argv)
    if args.summary:
        print(summary(args.out / "results.jsonl"))
        return 0
    if not vendor_available():
        print(f"vendor tool absent ({SYNTH}, {PYTHON}) or c2trace missing ({C2TRACE})")
        return 2
    sweep(tuple(args.device or DEVICES), args.count, args.out, args.start)
    return 0


if __name__ == "__main__":
    sys.exit(main())

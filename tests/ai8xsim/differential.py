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

Run the sweep (resumable: finished configurations in OUT/results.jsonl are kept):

    python -m tests.ai8xsim.differential --device MAX78000 --count 1000 --out DIR

Each program runs in a child forked from a server that imported it once (about 1 s a
configuration instead of 5-6 s); `--subprocess` starts a new interpreter for each run
instead. `--seeds 3,7,10-12` reruns those configurations (the new line replaces the
old in `--summary`); each line records the commit that judged it. A long sweep is best
run from an exported copy of a commit (`git archive`), so that the tree can change
under it: ONNX2AI8X_SWEEP_COMMIT names the commit and ONNX2AI8X_C2TRACE the c2trace.py
there.

The vendor tool is found as in test_vendor_projects.py (ONNX2AI8X_VENDOR_SYNTH,
ONNX2AI8X_VENDOR_PYTHON); ONNX2AI8X_VENDOR_PYTHONPATH is put first on its PYTHONPATH.
The tool pins numpy 1.26: under numpy 2 its kernel writer stops on every network with
weights ("Python integer 4294967295 out of bounds for uint8", izer/apbaccess.py), so a
vendor environment with numpy 2 needs a numpy 1.26 overlay there, e.g.
`pip install --target DIR numpy==1.26.4` and ONNX2AI8X_VENDOR_PYTHONPATH=DIR.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import select
import shutil
import signal
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
C2TRACE = Path(os.environ.get("ONNX2AI8X_C2TRACE", "")
               or Path(__file__).resolve().parents[3] / "shared" / "tools" / "c2trace.py")


def vendor_available() -> bool:
    return (SYNTH / "ai8xize.py").is_file() and PYTHON.is_file() and C2TRACE.is_file()


@functools.cache
def _vendor_has_github() -> bool:
    return subprocess.run([str(PYTHON), "-c", "import github"],
                          capture_output=True).returncode == 0


def _vendor_env(work: Path) -> dict[str, str]:
    """The vendor tool's environment. Its version check imports PyGithub even when
    --no-version-check skips the check; where that package is missing, an empty
    stand-in module on PYTHONPATH lets the tool start (the check never runs)."""
    env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    paths = [p for p in os.environ.get("ONNX2AI8X_VENDOR_PYTHONPATH", "").split(":") if p]
    if not _vendor_has_github():
        shim = work / "shim" / "github"
        shim.mkdir(parents=True, exist_ok=True)
        (shim / "__init__.py").write_text("")
        paths.append(str(work / "shim"))
    if paths:
        env["PYTHONPATH"] = ":".join(paths)
    return env


@dataclass(frozen=True)
class Tool:
    """How one of the three programs is started: `python SCRIPT` or `python -m MODULE`
    from `cwd`, and the modules a fork server imports for it once."""

    python: str
    script: str | None
    module: str | None
    cwd: str
    preload: tuple[str, ...]


def _tools() -> dict[str, Tool]:
    here = os.getcwd()
    return {
        # (izer.izer is what ai8xize.py imports: torch, numpy and the tool's modules)
        "vendor": Tool(str(PYTHON), str(SYNTH / "ai8xize.py"), None, str(SYNTH),
                       ("izer.izer",)),
        "ours": Tool(sys.executable, None, "onnx2ai8x.cli", here, _OUR_PRELOAD),
        "c2trace": Tool(sys.executable, str(C2TRACE), None, here, ()),
    }


# What a conversion imports (onnx2ai8x.cli pulls the rest in lazily): loaded once by
# the fork server; a child still runs onnx2ai8x.cli afresh as __main__.
_OUR_PRELOAD = ("onnx2ai8x.cli", "torch", "onnx", "numpy")


class Subprocess:
    """Each run a new interpreter (the reference way; `--subprocess`)."""

    def __init__(self, work: Path) -> None:
        self.work = work

    def run(self, tool: str, argv: list[str], timeout: float = 900
            ) -> tuple[int, str, str]:
        t = _tools()[tool]
        head = [t.script] if t.script else ["-m", t.module]
        env = _vendor_env(self.work) if tool == "vendor" else None
        proc = subprocess.run([t.python, *head, *argv], cwd=t.cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr

    def close(self) -> None:
        pass


class ForkServers:
    """Each run a child forked from a long-lived server per program that imported the
    program's modules once (tests/ai8xsim/forkserver.py): the same program, argv and
    working directory as Subprocess, from the same (never-run) module state."""

    SERVER = Path(__file__).with_name("forkserver.py")

    def __init__(self, work: Path) -> None:
        self.work = work
        self.servers: dict[str, subprocess.Popen] = {}
        self.pending: dict[str, bytes] = {}

    def _server(self, tool: str) -> subprocess.Popen:
        server = self.servers.get(tool)
        if server is not None and server.poll() is None:
            return server
        t = _tools()[tool]
        args = [t.python, str(self.SERVER), "--path",
                str(Path(t.script).parent) if t.script else t.cwd]
        for name in t.preload:
            args += ["--preload", name]
        env = _vendor_env(self.work) if tool == "vendor" else None
        server = subprocess.Popen(args, cwd=t.cwd, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, bufsize=0)
        self.servers[tool] = server
        self.pending[tool] = b""
        return server

    def _answer(self, tool: str, timeout: float | None) -> dict | None:
        """The server's next answer line, or None after `timeout` seconds."""
        server = self.servers[tool]
        fd = server.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.pending[tool]:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the {tool} fork server ended")
            self.pending[tool] += chunk
        line, _, self.pending[tool] = self.pending[tool].partition(b"\n")
        return json.loads(line)

    def run(self, tool: str, argv: list[str], timeout: float = 900
            ) -> tuple[int, str, str]:
        t = _tools()[tool]
        server = self._server(tool)
        with tempfile.TemporaryDirectory(dir=self.work) as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            argv0 = t.script if t.script else t.module
            request = {"argv": [argv0, *argv], "script": t.script, "module": t.module,
                       "cwd": t.cwd, "stdout": str(out), "stderr": str(err)}
            server.stdin.write((json.dumps(request) + "\n").encode())
            pid = self._answer(tool, None)["pid"]
            answer = self._answer(tool, timeout)
            if answer is None:
                os.kill(pid, signal.SIGKILL)
                self._answer(tool, None)
                raise subprocess.TimeoutExpired(argv, timeout)
            return (answer["rc"], out.read_text(errors="replace"),
                    err.read_text(errors="replace"))

    def close(self) -> None:
        for server in self.servers.values():
            server.stdin.close()
            server.wait(timeout=60)
        self.servers.clear()


# How the programs are started; the sweep's main() sets the fork servers unless
# --subprocess (tests keep the subprocess default: no server outlives them).
RUNNER: Subprocess | ForkServers = Subprocess(Path(tempfile.gettempdir()))


def vendor_project(files: tuple[Path, Path, Path], device: str, out: Path,
                   options: tuple[str, ...] = ()) -> tuple[Path | None, str]:
    """The vendor tool's project for (sidecar, checkpoint, sample), or None and why."""
    yaml, ckpt, sample = files
    argv = ["--test-dir", str(out), "--prefix", "p",
            "--checkpoint-file", str(ckpt), "--config-file", str(yaml), "--sample-input",
            str(sample), "--device", device, "--no-version-check", "--overwrite", *options]
    rc, stdout, stderr = RUNNER.run("vendor", argv)
    project = out / "p"
    if rc != 0 or not (project / "cnn.c").is_file():
        lines = [ln for ln in (stdout + stderr).splitlines()
                 if "ERROR" in ln or "Error" in ln or "error" in ln]
        return None, (lines[-1] if lines else (stdout + stderr)[-300:]).strip()
    return project, ""


def vendor_suite_project(name: str, device: str, out: Path, options: tuple[str, ...] = ()
                         ) -> tuple[Path | None, str]:
    """The vendor tool's project for its own suite configuration tests/test-NAME.yaml,
    run with the suite's sample data and weights (no checkpoint)."""
    argv = ["--test-dir", str(out), "--prefix", "p",
            "--config-file", f"tests/test-{name}.yaml", "--device", device,
            "--no-version-check", "--overwrite", *options]
    rc, stdout, stderr = RUNNER.run("vendor", argv)
    project = out / "p"
    if rc != 0 or not (project / "cnn.c").is_file():
        return None, (stdout + stderr)[-300:]
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
        rc, stdout, stderr = RUNNER.run("ours", args)
        if rc != 0:
            return None, ((stderr or stdout).strip().splitlines() or [""])[0][:300]
    return out, ""


def same_registers(ours: Path, vendor: Path) -> tuple[bool, str]:
    rc, stdout, _ = RUNNER.run("c2trace", ["compare", str(ours), str(vendor)], 600)
    first = [ln for ln in stdout.splitlines() if ln.strip()]
    return rc == 0, "" if rc == 0 else " | ".join(first[:3])[:400]


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
    commit: str = ""  # the git commit of the code that judged it (the sweep's record)
    seconds: float = 0.0

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


def _commit() -> str:
    """The checked-out commit of this tree (with "+" when it has uncommitted changes), or
    ONNX2AI8X_SWEEP_COMMIT (a sweep run from an exported copy of a commit)."""
    if os.environ.get("ONNX2AI8X_SWEEP_COMMIT"):
        return os.environ["ONNX2AI8X_SWEEP_COMMIT"]
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=root,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
    return head + ("+" if dirty else "")


def _records(record: Path) -> dict[tuple[str, int], dict]:
    """The record's results by (device, seed); a later line (a rerun) replaces an
    earlier one."""
    if not record.is_file():
        return {}
    rows = [json.loads(line) for line in record.read_text().splitlines() if line]
    return {(r["device"], r["seed"]): r for r in rows}


def sweep(devices: tuple[str, ...], seeds: list[int], out: Path, rerun: bool = False
          ) -> None:
    """The configurations `seeds` for each device, the devices taking turns; each
    result is appended to OUT/results.jsonl as it comes (a rerun skips those, unless
    `rerun`: then its new line replaces the old one in the summary)."""
    from tests.ai8xsim.exceptions import random_class

    out.mkdir(parents=True, exist_ok=True)
    record = out / "results.jsonl"
    done = set() if rerun else set(_records(record))
    commit = _commit()
    for seed, device in ((s, d) for s in seeds for d in devices):
        if (device, seed) in done:
            continue
        began = time.time()
        work = Path(tempfile.mkdtemp(prefix=f"rnd{seed}-", dir=out))
        config = generate(seed, device)
        try:
            result = run_config(config, work)
        except Exception as exc:  # a crash in either tool is a finding, not a stop
            result = Result(config.name, seed, device, config.kinds, "ERROR", "ERROR",
                            None, f"{type(exc).__name__}: {exc}"[:400])
        result = dataclasses.replace(result, commit=commit,
                                     seconds=round(time.time() - began, 2))
        with record.open("a") as handle:
            handle.write(result.line() + "\n")
        known = random_class(config, result)
        mark = "ok " if agrees(result) else f"CLS[{known.name}]" if known else "BAD"
        print(f"{mark} {result.name} vendor={result.vendor} ours={result.ours} "
              f"same={result.same} {result.seconds:.1f}s {result.detail[:200]}",
              flush=True)
        if agrees(result) or known:
            shutil.rmtree(work, ignore_errors=True)


def summary(record: Path) -> str:
    """The sweep's figures per device from its record: configurations, vendor refusals,
    vendor C PASS, ours register-exact and PASS, disagreements by class, the commits
    that judged them."""
    from collections import Counter

    from tests.ai8xsim.exceptions import random_class

    rows = [Result(**{**r, "kinds": tuple(r["kinds"])}) for r in _records(record).values()]
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
        commits = Counter(r.commit or "?" for r in mine)
        lines.append(
            f"{device}: {len(mine)} configurations; vendor refused {len(mine) - len(judged)}"
            f"; vendor C PASS {sum(r.vendor == PASS for r in judged)}/{len(judged)}; ours "
            f"register-exact and PASS {sum(agrees(r) for r in judged)}/{len(judged)}; "
            f"where the vendor refused, ours: " + (", ".join(
                f"{k} {n}" for k, n in sorted(Counter(
                    r.ours for r in mine if r.vendor == "refused").items())) or "-")
            + "; disagreements: "
            + (", ".join(f"{k} x{n}" for k, n in sorted(classes.items())) or "none")
            + "; judged by commits " + ", ".join(f"{c} x{n}" for c, n in
                                                 sorted(commits.items())))
    return "\n".join(lines)


def _seeds(text: str) -> list[int]:
    """"3,7,10-12" -> [3, 7, 10, 11, 12]."""
    seeds: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        seeds += range(int(lo), int(hi or lo) + 1)
    return seeds


def main(argv: list[str] | None = None) -> int:
    global RUNNER
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=DEVICES, action="append")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--seeds", type=_seeds,
                        help="these seeds (e.g. 3,7,10-12) instead of --start/--count, "
                             "run again even if recorded (the new line replaces the old)")
    parser.add_argument("--disagreements", action="store_true",
                        help="run again every recorded configuration that disagrees "
                             "(on this code; the new line replaces the old)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--subprocess", action="store_true",
                        help="start each program as a new interpreter instead of forking "
                             "it from a server that imported its modules once")
    parser.add_argument("--summary", action="store_true",
                        help="print the figures of the sweep recorded in OUT and stop")
    args = parser.parse_args(argv)
    if args.summary:
        print(summary(args.out / "results.jsonl"))
        return 0
    if not vendor_available():
        print(f"vendor tool absent ({SYNTH}, {PYTHON}) or c2trace missing ({C2TRACE})")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    RUNNER = Subprocess(args.out) if args.subprocess else ForkServers(args.out)
    try:
        devices = tuple(args.device or DEVICES)
        seeds = args.seeds or list(range(args.start, args.start + args.count))
        if args.disagreements:
            seeds = sorted({seed for (device, seed), r in
                            _records(args.out / "results.jsonl").items()
                            if device in devices and
                            not agrees(Result(**{**r, "kinds": tuple(r["kinds"])}))})
        sweep(devices, seeds, args.out, rerun=bool(args.seeds or args.disagreements))
    finally:
        RUNNER.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

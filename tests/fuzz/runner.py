"""Run one command line of the CLI on hostile input and judge the outcome.

Each case runs in a forked child of the test process (the converter, numpy, onnxruntime
and torch are imported once, in the parent, so a case costs what its conversion costs,
not a Python start-up), in its own directory holding its input files and a file the user
cares about, with HOME pointing into that directory. The child's outcome is judged:

- crash: the child died of a signal (segmentation fault, abort) or its memory limit;
- hang: it ran longer than the time limit (it is killed);
- traceback: the exit code is not 0, 1 or 2, or stderr holds a Python traceback or the
  CLI's "internal error" last line of defence;
- lost file: a file that existed before the run is missing or changed (inputs, the
  user's file), or a hidden temporary file was left behind;
- a Python repr of a numpy value in a message (`np.int64(8)`, `array([...])`).
"""
from __future__ import annotations

import hashlib
import os
import re
import resource
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

# A Python repr of a numpy value in a message (issue 24: `[np.int64(-1), np.int64(8)]`).
NUMPY_REPR = re.compile(r"np\.\w+\(|np\.(True|False)_|array\(\[|dtype=")

TIME_LIMIT_S = 60.0
# Far above any conversion of ours (~0.5 GB) and far below the machine: a reader that
# trusts a declared size dies here instead of taking the machine with it.
MEMORY_LIMIT_BYTES = 12 << 30


@dataclass(frozen=True)
class Case:
    """One hostile run: files to create (relative path -> bytes; a value of None makes a
    directory) and the command line, with paths relative to the case directory."""

    kind: str
    name: str
    argv: tuple[str, ...]
    files: dict = field(default_factory=dict)
    symlinks: dict = field(default_factory=dict)  # relative path -> link target
    outputs: tuple[str, ...] = ()  # paths the command may legitimately create/replace
    # --json: stdout must be exactly one JSON document, an error one with its codes
    # (issue 35: every outcome, errors included)
    json_out: bool = False


@dataclass(frozen=True)
class Outcome:
    case: Case
    code: int | None
    signal: int | None
    seconds: float
    stderr: str
    problems: tuple[str, ...]


PRECIOUS = "users-notes.txt"


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames
                                 if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = "link:" + os.readlink(path)
                continue
            try:
                with open(path, "rb") as fh:
                    out[rel] = hashlib.sha256(fh.read()).hexdigest()
            except OSError:
                out[rel] = "unreadable"
    return out


def _prepare(case: Case, root: Path) -> None:
    root.mkdir(parents=True)
    (root / "home").mkdir()
    (root / PRECIOUS).write_text("the user's own file: no run may delete it\n")
    for rel, data in case.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if data is None:
            path.mkdir(exist_ok=True)
        else:
            path.write_bytes(data)
    for rel, target in case.symlinks.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / rel)


def _child(case: Case, root: Path, err_path: Path) -> None:
    try:
        os.chdir(root)
        os.environ["HOME"] = str(root / "home")
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
        fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(_out_path(err_path) if case.json_out else os.devnull,
                       os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 1)
        os.dup2(fd, 2)
        import sys

        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the child's whole life
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        from onnx2ai8x.cli import main

        code = main(list(case.argv))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    except SystemExit as exc:
        os._exit(exc.code if isinstance(exc.code, int) else 3)
    except BaseException:  # noqa: BLE001 - anything escaping main() is a traceback
        import traceback

        traceback.print_exc()
        os._exit(3)


def _out_path(err_path: Path) -> Path:
    return err_path.with_suffix(".stdout")


def json_problems(code: int | None, stdout: str, stderr: str) -> list[str]:
    """Under --json: stdout is one JSON document; a failure's says so with codes, and
    its errors are not printed a second time as text."""
    import json

    try:
        doc = json.loads(stdout)
    except ValueError:
        return [f"--json: stdout is not one JSON document: {stdout[:200]!r}"]
    if code in (None, 0) or not isinstance(doc, dict) or "verdict" in doc:
        return []  # a report, or verify's verdict document
    if "verify" in doc and doc.get("ok") is False and doc.get("exit_code") == code:
        return []  # convert --verify: the report with a verdict other than PASS
    errors = doc.get("errors")
    if doc.get("ok") is not False or doc.get("exit_code") != code or not errors \
            or not all(isinstance(e, dict) and e.get("code") for e in errors):
        return [f"--json: the error document lacks ok/exit_code/coded errors: {stdout[:200]!r}"]
    if "error[" in stderr:
        return ["--json: the error was printed as text too"]
    return []


def run_case(case: Case, workdir: Path, time_limit: float = TIME_LIMIT_S) -> Outcome:
    """Run `case` in a new directory under `workdir`; judge it (see the module doc)."""
    root = workdir / f"case-{case.kind}-{case.name}"
    _prepare(case, root)
    before = _snapshot(root)
    err_path = workdir / f"{root.name}.stderr"
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(case, root, err_path)
    status = None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - start > time_limit:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = None
            break
        time.sleep(0.005)
    seconds = time.monotonic() - start
    stderr = err_path.read_text(errors="replace") if err_path.exists() else ""
    problems = []
    code = sig = None
    if status is None:
        problems.append(f"hang: killed after {time_limit:.0f} s")
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        problems.append(f"crash: signal {sig}")
    else:
        code = os.WEXITSTATUS(status)
        # 3 is verify's own verdict (NOT MODELLED); an escaping exception exits 3 too,
        # and its traceback on stderr is caught below
        if code not in (0, 1, 2) and not (code == 3 and case.argv[:1] == ("verify",)):
            problems.append(f"traceback: exit code {code}")
    if case.json_out and status is not None and not os.WIFSIGNALED(status):
        out_path = _out_path(err_path)
        stdout = out_path.read_text(errors="replace") if out_path.exists() else ""
        problems += json_problems(code, stdout, stderr)
        if '"internal"' in stdout:
            problems.append("traceback: an internal error in the --json document")
    if "Traceback (most recent call last)" in stderr or "internal error" in stderr:
        lines = stderr.strip().splitlines()
        shown = [ln for ln in lines if "internal error" in ln or "Error" in ln] or lines
        problems.append("traceback: " + (shown[-1][:300] if shown else ""))
    repr_found = NUMPY_REPR.search(stderr)
    if repr_found:
        at = repr_found.start()
        problems.append(f"python repr in a message: {stderr[max(0, at - 80):at + 80]!r}")
    if len(stderr) > 20_000:
        problems.append(f"unbounded message: {len(stderr)} characters on stderr")
    after = _snapshot(root)
    allowed = tuple(case.outputs)
    for rel, digest in before.items():
        if rel.startswith(allowed) and allowed:
            continue
        if after.get(rel) != digest:
            problems.append(f"lost file: {rel} " + ("deleted" if rel not in after
                                                    else "changed"))
    for rel in after:
        parts = Path(rel).parts
        if parts[0] == "home":  # caches of the tools (onnxruntime, Jinja2), not outputs
            continue
        if rel not in before and any(part.startswith(".") and part != ".vscode"
                                     for part in parts):
            problems.append(f"temporary file left behind: {rel}")
    for entry in workdir.iterdir():  # siblings of the case directory
        if entry.name.startswith("."):
            problems.append(f"temporary file left behind: {entry.name}")
    return Outcome(case, code, sig, seconds, stderr, tuple(problems))

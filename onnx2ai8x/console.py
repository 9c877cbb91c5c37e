"""How the command line reports an outcome: one place for its conventions (issue 35).

- Errors: `error[code] where: message` and a hint on stderr; under `--json` one JSON
  document on stdout instead (`{"ok": false, "exit_code": N, "errors": [...]}`), for
  every outcome: a refused model, a bad command line, an interrupt, an internal error.
- `--quiet`: errors only (no summary, no warnings, no notes).
- Every warning and note carries a code (`warning[code]`, `note[code]`).
- A mistyped subcommand is named with the command it resembles, never taken for a
  model file.
- An internal error (a bug) prints one line; `--debug` or ONNX2AI8X_DEBUG=1 adds its
  traceback.
- Ctrl-C prints `interrupted` and exits 130, whatever the interrupt broke on its way
  out (an import it cut short raises ImportError, not KeyboardInterrupt).
- A step that takes longer than a couple of seconds says it is still running.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import EXIT_USAGE, Ai8xError, Diagnostic

EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shells' convention
DEBUG_FLAG = "--debug"
DEBUG_ENV = "ONNX2AI8X_DEBUG"
INTERNAL_HINT = ("this is a bug in onnx2ai8x; please report it with the model and "
                 f"command line (rerun with {DEBUG_FLAG} or {DEBUG_ENV}=1 for the traceback)")

# `warning[code] where: ...` / `note[code] ...`: what every warning line starts with
_CODED = re.compile(r"^(warning|note)\[([\w.-]+)\]\s*(.*)$", re.S)


@dataclass(frozen=True)
class Conventions:
    """What the command line asked of its output: JSON documents, errors only, a
    traceback for internal errors."""

    json: bool = False
    quiet: bool = False
    debug: bool = False


def take_debug(argv: list[str]) -> tuple[list[str], bool]:
    """`argv` without `--debug` (accepted anywhere before `--`), and whether a traceback
    was asked for (the flag, or ONNX2AI8X_DEBUG set to anything but 0 or empty)."""
    end = argv.index("--") if "--" in argv else len(argv)
    debug = DEBUG_FLAG in argv[:end]
    rest = [a for i, a in enumerate(argv) if not (i < end and a == DEBUG_FLAG)]
    env = os.environ.get(DEBUG_ENV, "").strip()
    return rest, debug or env not in ("", "0")


def conventions(argv: list[str], debug: bool) -> Conventions:
    """The output conventions the command line asks for (before it is parsed: a line
    the parser refuses is reported in the asked form too)."""
    end = argv.index("--") if "--" in argv else len(argv)
    given = set(argv[:end])
    return Conventions(json="--json" in given, quiet=bool(given & {"--quiet", "-q"}),
                       debug=debug)


def mistyped_command(argv: list[str], commands: tuple[str, ...]) -> Ai8xError | None:
    """A first word that is neither a command nor a file but resembles a command (or
    `--version`, `--help`): the user mistyped it, and it must not be read as a model
    file to convert (`onnx2ai8x verfy proj/`)."""
    if not argv or argv[0].startswith("-") or argv[0] in commands:
        return None
    import difflib

    word = argv[0]
    if "/" in word or "\\" in word or "." in word or Path(word).exists():
        return None
    close = difflib.get_close_matches(word.lower(), [*commands, "--version", "--help"],
                                      n=1, cutoff=0.6)
    if not close:
        return None
    return Ai8xError("usage.command", word, "not a command, nor a model file",
                     f"did you mean `onnx2ai8x {close[0]}`? (commands: "
                     f"{', '.join(commands)})", exit_code=EXIT_USAGE)


def error_document(diagnostics: tuple[Diagnostic, ...], exit_code: int) -> str:
    """An error outcome as the JSON document `--json` prints on stdout."""
    return json.dumps({"ok": False, "exit_code": exit_code,
                       "errors": [{"code": d.code, "where": d.where, "message": d.message,
                                   "hint": d.hint} for d in diagnostics]},
                      indent=2, sort_keys=True)


def report_error(conv: Conventions, err: Ai8xError) -> int:
    """Print `err` as the conventions say; its exit code."""
    if conv.json:
        print(error_document(err.diagnostics, err.exit_code), flush=True)
    else:
        print(err.render(), file=sys.stderr, flush=True)
    return err.exit_code


def report_usage(conv: Conventions, message: str, show) -> int:
    """A command line the parser refused (exit 2): its own text, or under `--json` the
    document (code usage.command-line)."""
    if conv.json:
        diag = Diagnostic("usage.command-line", "command line", message,
                          "see onnx2ai8x --help")
        print(error_document((diag,), EXIT_USAGE), flush=True)
    elif show is not None:
        show()
    else:
        print(message, file=sys.stderr, flush=True)
    return EXIT_USAGE


def report_interrupt(conv: Conventions) -> int:
    print("interrupted", file=sys.stderr, flush=True)
    if conv.json:
        diag = Diagnostic("interrupted", "command", "interrupted (Ctrl-C)")
        print(error_document((diag,), EXIT_INTERRUPTED), flush=True)
    return EXIT_INTERRUPTED


def report_internal(conv: Conventions, exc: BaseException, exit_code: int) -> int:
    """A bug: one line (and under --debug the traceback, on stderr)."""
    if conv.debug:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    err = Ai8xError("internal", type(exc).__name__, str(exc) or type(exc).__name__,
                    INTERNAL_HINT, exit_code=exit_code)
    if conv.json:
        print(error_document(err.diagnostics, exit_code), flush=True)
    else:
        print(f"internal error: {type(exc).__name__}: {err.diagnostics[0].message}\n"
              f"  hint: {INTERNAL_HINT}", file=sys.stderr, flush=True)
    return exit_code


def coded(line: str) -> bool:
    """Whether a warning or note line carries its code."""
    return _CODED.match(line) is not None


def warning_fields(line: str) -> dict:
    """A warning line as JSON fields: kind (warning or note), code, text."""
    m = _CODED.match(line)
    if m is None:  # every warning has a code; this keeps a stray one readable
        return {"kind": "warning", "code": "", "text": line}
    return {"kind": m.group(1), "code": m.group(2), "text": m.group(3)}


@dataclass
class Interrupts:
    """Ctrl-C while the command runs: whether it came. A KeyboardInterrupt that cuts an
    import short leaves an ImportError (numpy: "initialization failed"), a worker's
    exception or Click's Abort behind it; what broke after an interrupt is the
    interrupt's doing, not a bug."""

    seen: bool = False
    _previous: object = field(default=None, repr=False)

    def _handler(self, signum, frame) -> None:  # noqa: ARG002 - the signal API
        self.seen = True
        raise KeyboardInterrupt

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


HEARTBEAT_AFTER_S = 2.0  # a step quieter than this needs no word
HEARTBEAT_EVERY_S = 10.0


@contextlib.contextmanager
def heartbeat(what: str, enabled: bool, *, after: float = HEARTBEAT_AFTER_S,
              every: float = HEARTBEAT_EVERY_S) -> Iterator[None]:
    """While the block runs longer than `after` seconds, say on stderr that `what` is
    still running, and then every `every` seconds with the time taken (a silent
    20-40 s `--build` reads like a hang)."""
    if not enabled:
        yield
        return
    done = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        wait = after
        while not done.wait(wait):
            print(f"{what}... ({time.monotonic() - start:.0f} s)", file=sys.stderr,
                  flush=True)
            wait = every

    worker = threading.Thread(target=beat, name="heartbeat", daemon=True)
    worker.start()
    try:
        yield
    finally:
        done.set()
        worker.join()


@contextlib.contextmanager
def foreign_stderr_silenced() -> Iterator[None]:
    """A third-party library's own stderr output (onnxsim's C++ core prints `WARNING:
    failed to run "MaxPool" op ... Traceback (most recent call last)` for a node it
    cannot fold, then goes on) kept from the user: what it could not do, the converter
    says in its own words. File descriptor 2 goes to a scratch file for the block."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as scratch:
            os.dup2(scratch.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)

"""The `onnx2ai8x` command's entry point: Ctrl-C is answered from the first moment.

Importing the command line (Typer, Click) and later numpy and onnxruntime takes a good
part of a second; an interrupt in that time would otherwise end in Python's own
KeyboardInterrupt traceback, or in an ImportError from an extension whose
initialization it cut short. This module imports nothing heavy: it takes SIGINT, then
imports and runs the command line, which takes it over for the command's run
(console.Interrupts).
"""
# the signal module's C core: `signal` itself imports enum (about 10 ms), time in which
# an interrupt would still meet Python's default handler
import _signal
import os
import sys

EXIT_INTERRUPTED = 130


def run() -> None:
    interrupted = []

    def on_interrupt(signum, frame) -> None:  # noqa: ARG001 - the signal API
        interrupted.append(signum)
        raise KeyboardInterrupt

    _signal.signal(_signal.SIGINT, on_interrupt)
    try:
        from .cli import run as run_cli

        run_cli()
    except BaseException as exc:  # noqa: BLE001 - an interrupt before or around main()
        if not (interrupted or isinstance(exc, KeyboardInterrupt)):
            raise
        try:
            sys.stderr.write("interrupted\n")
            sys.stderr.flush()
        finally:
            os._exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    run()

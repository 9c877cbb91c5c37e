"""A fork server for the random differential (tests/ai8xsim/differential.py): one
long-lived interpreter imports a tool's modules once, then forks a child per run, which
executes the tool's entry point as `python SCRIPT ARGS` or `python -m MODULE ARGS`
would.

Why: most of a run of the vendor synthesis tool, or of an onnx2ai8x step, is the
interpreter importing torch, numpy and onnx; the work itself is a fraction. A child
forked from a server that only imported (and never ran a tool) starts from the same
module state as a fresh process, so each run is still independent of every other.

Standard library only: it runs under the vendor tool's interpreter as well as ours.
Protocol (one JSON object a line): the caller writes a request {"argv": [...],
"script": PATH or "module": NAME, "cwd": DIR, "stdout": FILE, "stderr": FILE}; the
server answers {"pid": N} when the child is started and {"rc": N} when it ended.

    python forkserver.py [--path DIR] [--preload MODULE ...]

`--path` becomes sys.path[0] (as the script's directory or the working directory is
for a fresh run); each `--preload` module is imported before the first fork.
"""
from __future__ import annotations

import importlib
import json
import os
import runpy
import sys
import traceback


def _child(request: dict) -> int:
    """Run one request in this (forked) process; its exit code."""
    os.chdir(request["cwd"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, key in ((1, "stdout"), (2, "stderr")):
        target = os.open(request[key], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = list(request["argv"])
    try:
        if request.get("script"):
            runpy.run_path(request["script"], run_name="__main__")
        else:
            name = request["module"]
            # `python -m NAME` runs the module as __main__ and never imports NAME itself:
            # drop the preloaded copy so that the run sees what a fresh process sees
            sys.modules.pop(name, None)
            package, _, leaf = name.rpartition(".")
            if package in sys.modules and hasattr(sys.modules[package], leaf):
                delattr(sys.modules[package], leaf)
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - as the interpreter does: traceback, exit 1
        traceback.print_exc()
        code = 1
    return code


def _serve(channel_in, channel_out) -> None:
    for line in channel_in:
        request = json.loads(line)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(request)
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except (OSError, ValueError):
                        pass
                os._exit(code)
        channel_out.write(json.dumps({"pid": pid}) + "\n")
        channel_out.flush()
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        channel_out.write(json.dumps({"rc": rc}) + "\n")
        channel_out.flush()


def main(argv: list[str]) -> int:
    preload = []
    path = None
    args = iter(argv)
    for arg in args:
        if arg == "--path":
            path = next(args)
        elif arg == "--preload":
            preload.append(next(args))
        else:
            print(f"forkserver: unknown argument {arg}", file=sys.stderr)
            return 2
    sys.path[0] = path or os.getcwd()
    for name in preload:
        importlib.import_module(name)
    # the protocol uses its own descriptors: the children's standard streams are files
    channel_in = os.fdopen(os.dup(0), "r")
    channel_out = os.fdopen(os.dup(1), "w")
    _serve(channel_in, channel_out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

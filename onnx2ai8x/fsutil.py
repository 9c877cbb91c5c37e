"""Atomic file and directory writes: a failed run leaves nothing half-written."""
from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .errors import EXIT_USAGE, Ai8xError


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def save_arrays_atomic(path: Path, names: list[str], arrays: list[np.ndarray]) -> None:
    """`.npy` for one array; `.npz` (one array per name, in order) for several."""
    path = Path(path)
    if len(arrays) > 1 and path.suffix != ".npz":
        raise Ai8xError("usage.output-kind", str(path),
                        f"the model has {len(arrays)} outputs; they need an .npz file",
                        f"use -o {path.with_suffix('.npz')}", exit_code=EXIT_USAGE)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        if path.suffix == ".npz":
            np.savez(tmp, **dict(zip(names, arrays, strict=True)))
        else:
            np.save(tmp, arrays[0], allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _sibling_dir(target: Path) -> Path:
    """A new, empty directory next to `target` that becomes `target` when complete.

    Unlike tempfile.mkdtemp (mode 0700) it is created with the user's umask, so the
    finished project has the permissions any other new directory would have.
    """
    for _ in range(100):
        tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}"
        try:
            tmp.mkdir(mode=0o777)
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"no free temporary name next to {target}")


def write_dir_atomic(target: Path, fill: Callable[[Path], None], overwrite: bool) -> None:
    """Create directory `target` by filling a temporary sibling, then renaming it.

    An existing `target` is replaced only with `overwrite`; if `fill` raises, nothing
    is left behind and an existing directory is untouched.
    """
    target = Path(target)
    if target.exists() and not overwrite:
        raise Ai8xError("usage.output-exists", str(target),
                        "the output directory already exists",
                        "pass --overwrite to replace it, or choose another --output",
                        exit_code=EXIT_USAGE)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling_dir(target)
    try:
        fill(tmp)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            os.replace(target, old / target.name)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

"""Atomic file and directory writes: a failed run leaves nothing half-written.

Every write goes to a temporary sibling that is renamed over the target when complete,
so an interrupted or failing run leaves the old target (or nothing) and no temporary.
`check_output` refuses, before any work, an output that would destroy what the user
gave us or owns: an input file, a directory holding one, `/`, the home directory, the
current directory (issue 15: `-o` on the model's folder with --overwrite deleted the
user's files). Every OS error while writing becomes one message naming the path.
"""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from .errors import EXIT_USAGE, Ai8xError

# What to do about the OS errors a write meets (errno -> hint).
_OS_HINTS = {
    errno.ENOSPC: "free disk space, or write to another disk",
    errno.EDQUOT: "free space within your disk quota, or write elsewhere",
    errno.EACCES: "choose a directory you may write to",
    errno.EPERM: "choose a directory you may write to",
    errno.EROFS: "the file system is read-only; choose another output",
    errno.ENAMETOOLONG: "choose a shorter output name",
    errno.ENOTDIR: "a part of the output path is a file, not a directory",
    errno.EISDIR: "the output is a directory; give a file name",
    errno.ENOENT: "check that the output's parent directory can exist",
    errno.EXDEV: "choose an output on the same file system as its directory",
    errno.ELOOP: "the output path loops through symbolic links",
}


def os_error(exc: OSError, path: Path | str, what: str = "write") -> Ai8xError:
    """The user's message for an OS error met while writing `path`."""
    reason = exc.strerror or type(exc).__name__
    return Ai8xError("output.os-error", str(path), f"cannot {what} the output: {reason}",
                     _OS_HINTS.get(exc.errno or 0, "choose another output path"),
                     exit_code=EXIT_USAGE)


def _refuse(path: Path | str, message: str, hint: str) -> Ai8xError:
    return Ai8xError("usage.output-path", str(path), message, hint, exit_code=EXIT_USAGE)


def _resolved(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return Path(os.path.abspath(path))


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_output(output: Path | str, inputs: Iterable[Path | str | None], *,
                 directory: bool, overwrite: bool = False) -> Path:
    """Refuse an output that would destroy an input or a directory the user owns.

    `directory`: the output is a project directory (convert), else a single file. An
    existing output is replaced only with `overwrite`, and only if it is of the same
    kind (a directory is never replaced by a file, nor a file by a directory).
    """
    text = str(output)
    if text.strip() == "" or "\x00" in text:
        raise _refuse(repr(text), "the output path is empty or not a path",
                      "give a file or directory name with -o")
    out = Path(output)
    real = _resolved(out)
    home = _resolved(Path(os.path.expanduser("~")))
    cwd = _resolved(Path.cwd())
    for name, special in (("the root directory", Path(real.anchor or "/")),
                          ("your home directory", home),
                          ("the current directory", cwd)):
        if _within(special, real):
            what = "is" if real == special else "contains"
            raise _refuse(out, f"the output {what} {name}; writing it would replace "
                          "its contents", "give a new directory name with -o")
    for given in inputs:
        if given is None:
            continue
        src = _resolved(Path(given))
        if _within(src, real):
            what = "is" if src == real else "contains"
            raise _refuse(out, f"the output {what} the input {given}; writing it would "
                          "destroy the input", "choose an output apart from the inputs")
        if _within(real, src):
            raise _refuse(out, f"the output lies inside the input {given}",
                          "choose an output apart from the inputs")
    for parent in out.absolute().parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                raise _refuse(out, f"{parent} is a file, so nothing can be written "
                              "inside it", "choose an output in a directory")
            break
    if os.path.lexists(out) and not out.exists():  # a symbolic link to nothing
        if not overwrite:
            raise Ai8xError("usage.output-exists", str(out),
                            "the output already exists (a symbolic link to nothing)",
                            "pass --overwrite to replace the link, or choose another "
                            "--output", exit_code=EXIT_USAGE)
    elif os.path.lexists(out):
        if directory and not out.is_dir():
            raise _refuse(out, "the output exists and is a file, not a project directory",
                          "choose a new directory name with -o")
        if not directory and out.is_dir():
            raise _refuse(out, "the output is an existing directory; a file is written "
                          "here", "give a file name with -o")
        if not overwrite:
            kind = "directory" if directory else "file"
            raise Ai8xError("usage.output-exists", str(out),
                            f"the output {kind} already exists",
                            "pass --overwrite to replace it, or choose another --output",
                            exit_code=EXIT_USAGE)
    return out


def _mkdir_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise os_error(exc, path.parent, "create the directory of") from None


def _write_file_atomic(path: Path, write: Callable[[object], None]) -> None:
    """Write `path` through a temporary sibling filled by `write(handle)`."""
    path = Path(path)
    _mkdir_parent(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", dir=path.parent)
    except OSError as exc:
        raise os_error(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        # mkstemp creates the file 0600; the user's files get the mode any program's
        # new file gets (0666 less the umask), like the output directories (_sibling_dir)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise os_error(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory."""
    _write_file_atomic(Path(path), lambda handle: handle.write(data))


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def check_array_output(path: Path) -> None:
    """An array output is an .npy or .npz file (numpy would append `.npy` to any other
    name, leaving the named file empty)."""
    path = Path(path)
    if path.suffix not in (".npy", ".npz"):
        raise Ai8xError("usage.output-kind", str(path),
                        "the result is written as a numpy file: the name must end in .npy "
                        "(one output) or .npz", f"use -o {path.with_suffix('.npy')}",
                        exit_code=EXIT_USAGE)


def save_arrays_atomic(path: Path, names: list[str], arrays: list) -> None:
    """`.npy` for one array; `.npz` (one array per name, in order) for several."""
    import numpy as np  # not at import time: the CLI imports this module for every run

    path = Path(path)
    check_array_output(path)
    if len(arrays) > 1 and path.suffix != ".npz":
        raise Ai8xError("usage.output-kind", str(path),
                        f"the model has {len(arrays)} outputs; they need an .npz file",
                        f"use -o {path.with_suffix('.npz')}", exit_code=EXIT_USAGE)

    def write(handle) -> None:
        # Into the open handle: given a name, numpy would append `.npy` to it.
        if path.suffix == ".npz":
            np.savez(handle, **dict(zip(names, arrays, strict=True)))
        else:
            np.save(handle, arrays[0], allow_pickle=False)

    _write_file_atomic(path, write)


def _sibling_dir(target: Path) -> Path:
    """A new, empty directory next to `target` that becomes `target` when complete.

    Unlike tempfile.mkdtemp (mode 0700) it is created with the user's umask, so the
    finished project has the permissions any other new directory would have.
    """
    for _ in range(100):
        # os.urandom, not the secrets module: that imports base64, hashlib and random
        # (~15 ms of every run's start-up) for the same four random bytes
        tmp = target.parent / f".{target.name[:100]}.{os.urandom(4).hex()}"
        try:
            tmp.mkdir(mode=0o777)
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(errno.EEXIST, f"no free temporary name next to {target}")


def write_dir_atomic(target: Path, fill: Callable[[Path], None], overwrite: bool) -> None:
    """Create directory `target` by filling a temporary sibling, then renaming it.

    An existing `target` is replaced only with `overwrite`; if `fill` raises, nothing
    is left behind and an existing directory is untouched.
    """
    target = Path(target)
    if os.path.lexists(target) and not overwrite:
        raise Ai8xError("usage.output-exists", str(target),
                        "the output directory already exists",
                        "pass --overwrite to replace it, or choose another --output",
                        exit_code=EXIT_USAGE)
    if os.path.lexists(target) and not target.is_dir():
        raise _refuse(target, "the output exists and is a file, not a project directory",
                      "choose a new directory name with -o")
    _mkdir_parent(target)
    try:
        tmp = _sibling_dir(target)
    except OSError as exc:
        raise os_error(exc, target, "create") from None
    try:
        fill(tmp)
        if os.path.lexists(target):
            old = Path(tempfile.mkdtemp(prefix=f".{target.name[:100]}.old.",
                                        dir=target.parent))
            try:
                os.replace(target, old / target.name)
            except OSError:
                shutil.rmtree(old, ignore_errors=True)
                raise
            try:
                os.replace(tmp, target)
            except OSError as exc:
                try:
                    os.replace(old / target.name, target)  # the previous output, back
                except OSError:
                    # Never delete the only copy of the previous output: say where it is.
                    raise Ai8xError("output.os-error", str(target),
                                    f"cannot replace the output ({exc.strerror}), nor put "
                                    f"the previous one back; it is kept in {old}",
                                    "move it back by hand", exit_code=EXIT_USAGE) from None
                shutil.rmtree(old, ignore_errors=True)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise os_error(exc, target) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

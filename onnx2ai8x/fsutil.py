"""Atomic file and directory writes: a failed run leaves nothing half-written.

Every write goes to a temporary sibling that is renamed over the target when complete,
so an interrupted or failing run leaves the old target (or nothing) and no temporary.
`check_output` refuses, before any work, an output that would destroy what the user
gave us or owns: an input file, a directory holding one, `/`, the home directory, the
current directory (issue 15: `-o` on the model's folder with --overwrite deleted the
user's files), a symbolic link, and a directory onnx2ai8x did not write (issue 35: a
project directory carries a manifest of the files written there; replacing it keeps
every other file). Every OS error while writing becomes one message naming the path.
"""
from __future__ import annotations

import contextlib
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


# How a file onnx2ai8x writes begins (kind -> (what it is, test of its first bytes)):
# `--overwrite` replaces an existing file only when it is one of these, so a file of the
# user's named by mistake (`-o thesis.tex`) is never replaced (issue 35).
FILE_KINDS: dict[str, tuple[str, Callable[[bytes], bool]]] = {
    # ModelProto: ir_version (field 1), then producer_name (field 2) = "onnx2ai8x..."
    "onnx": ("an ai8x-ONNX model onnx2ai8x wrote",
             lambda head: head[:1] == b"\x08" and b"\x12\x09onnx2ai8x" in head[:16]),
    "sidecar": ("a sidecar onnx2ai8x wrote (its `# Network ... placed on` header)",
                lambda head: head.startswith(b"---\n# Network `")
                and b" placed on MAX" in head),
    "array": ("a numpy file (.npy or .npz)",
              lambda head: head.startswith((b"\x93NUMPY", b"PK\x03\x04"))),
    "report": ("a quantization report onnx2ai8x wrote",
               lambda head: head.startswith(b"{\n  \"calibration_samples\"")),
}


def _check_kind(out: Path, kind: str) -> None:
    what, test = FILE_KINDS[kind]
    try:
        with open(out, "rb") as handle:
            head = handle.read(512)
    except OSError as exc:
        raise os_error(exc, out, "read") from None
    if not test(head):
        raise _refuse(out, f"the output file exists and is not {what}; --overwrite "
                      "replaces only a file of the kind this command writes",
                      "choose another output name with -o (or move the file away)")


def check_output(output: Path | str, inputs: Iterable[Path | str | None], *,
                 directory: bool, overwrite: bool = False, kind: str | None = None
                 ) -> Path:
    """Refuse an output that would destroy an input or a directory the user owns.

    `directory`: the output is a project directory (convert), else a single file. An
    existing output is replaced only with `overwrite`, and only if it is of the same
    kind (a directory is never replaced by a file, nor a file by a directory): a
    directory only when onnx2ai8x wrote it (`replaceable`), a file only when it is of
    the `kind` the command writes (FILE_KINDS; None: any file).
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
    if directory:
        replaceable(out, overwrite)  # a project it wrote, or refused naming what is there
    elif os.path.islink(out):
        raise _refuse(out, f"the output is a symbolic link (to {os.readlink(out)}); "
                      "onnx2ai8x replaces only a real file, so the link and what it "
                      "points to stay as they are", "give a new file name with -o")
    elif os.path.lexists(out):
        if out.is_dir():
            raise _refuse(out, "the output is an existing directory; a file is written "
                          "here", "give a file name with -o")
        if kind is not None:
            _check_kind(out, kind)
        if not overwrite:
            raise Ai8xError("usage.output-exists", str(out),
                            "the output file already exists",
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


# ---------------------------------------------------------------- project directories
#
# Issue 35: `--overwrite` used to replace whatever directory -o named, with everything in
# it (a thesis, or the app/ folder the generated project.mk invites). A directory the
# tool writes now carries a manifest: the files it wrote there, each with its SHA-256 (in
# `sha256sum`'s line format). An existing directory is replaced only when it is empty or
# holds a manifest, and then only the files the manifest lists, unchanged, are replaced:
# every other file and folder in it is carried into the new directory (hard links, so
# nothing is copied twice), and a listed file changed since it was written stops the run.

MANIFEST = "onnx2ai8x-manifest.txt"
_MANIFEST_HEAD = ("# onnx2ai8x wrote the files below (SHA-256, path). --overwrite replaces "
                  "exactly these;\n# every other file and folder here is kept.\n")
_SHOWN = 5  # the user's entries a refusal names


def _digest(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _raise(exc: OSError) -> None:
    raise exc  # os.walk's onerror: an unreadable folder must stop the survey, not hide


def _walk(root: Path):
    """os.walk over `root` that fails on an unreadable folder (a folder skipped would be
    a folder lost), in sorted order."""
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise):
        dirnames.sort()
        rel = Path(dirpath).relative_to(root).as_posix()
        yield ("" if rel == "." else rel + "/"), dirpath, dirnames, sorted(filenames)


def manifest_text(root: Path) -> str:
    """The manifest of the files under `root` (deterministic: sorted paths, contents'
    digests)."""
    lines = [f"{_digest(Path(dirpath) / name)}  {prefix}{name}\n"
             for prefix, dirpath, _, names in _walk(root) for name in names
             if f"{prefix}{name}" != MANIFEST]
    return _MANIFEST_HEAD + "".join(lines)


def read_manifest(directory: Path) -> dict[str, str] | None:
    """path -> SHA-256 of the files onnx2ai8x wrote in `directory`; None when it holds
    no manifest (a directory onnx2ai8x did not write)."""
    path = Path(directory) / MANIFEST
    if path.is_symlink() or not path.is_file():
        return None
    listed: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                  .splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or not rel:
            raise _refuse(f"{path}:{number}", "the project's manifest is damaged, so what "
                          "onnx2ai8x wrote here is not known",
                          "choose a new directory name with -o")
        listed[rel] = digest
    return listed


def _names(entries: list[str]) -> str:
    shown = ", ".join(entries[:_SHOWN])
    return shown + (f" and {len(entries) - _SHOWN} more" if len(entries) > _SHOWN else "")


def _survey(root: Path, listed: dict[str, str]) -> tuple[list[str], list[str]]:
    """(the user's entries in the project `root`: files, links and whole folders the
    manifest does not list; the listed files changed since they were written)."""
    owned = {parent.as_posix() for rel in listed for parent in Path(rel).parents}
    keep: list[str] = []
    changed: list[str] = []
    for prefix, dirpath, dirnames, filenames in _walk(root):
        for name in list(dirnames):
            rel = prefix + name
            if rel in listed:  # a folder where onnx2ai8x wrote a file
                changed.append(rel)
                dirnames.remove(name)
            elif os.path.islink(Path(dirpath) / name) or rel not in owned:
                keep.append(rel)
                dirnames.remove(name)
        for name in filenames:
            rel, full = prefix + name, Path(dirpath) / name
            if rel == MANIFEST:
                continue
            if rel not in listed:
                keep.append(rel)
            elif full.is_symlink() or not full.is_file() or _digest(full) != listed[rel]:
                changed.append(rel)
    return keep, changed


def replaceable(target: Path, overwrite: bool) -> tuple[str, ...]:
    """Check that writing the project directory `target` destroys nothing of the user's;
    return the user's entries in it (relative paths) to carry into the new one.

    A new target is fine. An existing one needs `overwrite`, and must be a real
    directory (not a link), writable, and empty or an onnx2ai8x project whose listed
    files are as written; anything else is refused, naming what is there.
    """
    target = Path(target)
    if not os.path.lexists(target):
        return ()
    if os.path.islink(target):
        raise _refuse(target, f"the output is a symbolic link (to {os.readlink(target)}); "
                      "onnx2ai8x replaces only a real directory, so the link and what it "
                      "points to stay as they are", "give a new directory name with -o")
    if not target.is_dir():
        raise _refuse(target, "the output exists and is a file, not a project directory",
                      "choose a new directory name with -o")
    try:
        entries = sorted(os.listdir(target))
        listed = read_manifest(target) if entries else {}
        if listed is None:
            raise _refuse(target, "the output directory holds files onnx2ai8x did not "
                          f"write ({_names(entries)}); it replaces only a directory it "
                          f"wrote (one with {MANIFEST})",
                          "choose a new directory name with -o (a project written before "
                          "the manifest existed: delete it yourself)")
        keep, changed = _survey(target, listed)
    except OSError as exc:
        raise os_error(exc, exc.filename or target, "read") from None
    if changed:
        raise _refuse(target, f"{_names(changed)} changed since onnx2ai8x wrote "
                      f"{'it' if len(changed) == 1 else 'them'}; replacing the project "
                      "would lose the changes",
                      "move the changed files out of the project (or delete them to have "
                      "them written anew); code of your own belongs in files of your own "
                      "(e.g. app/, which project.mk builds), which are kept")
    if not overwrite:
        raise Ai8xError("usage.output-exists", str(target),
                        "the output directory already exists",
                        "pass --overwrite to replace it (files you added are kept), or "
                        "choose another --output", exit_code=EXIT_USAGE)
    if not os.access(target, os.W_OK | os.X_OK):
        raise _refuse(target, "the output directory is read-only",
                      "make it writable (chmod u+w) or choose another --output")
    return tuple(keep)


@contextlib.contextmanager
def _signals_held():
    """SIGINT and SIGTERM wait while the output is swapped or a temporary removed: an
    interrupt lands before (the old output whole) or after (the new one whole), never
    half way, and leaves no temporary behind.

    The handlers are replaced (not the main thread's signal mask): the C-level handler
    may run in any thread (onnxruntime's pool), and Python then raises in the main
    thread wherever it is. A signal met meanwhile is handed to the previous handler
    afterwards. Outside the main thread (an API caller's worker) nothing is held.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, lambda signum, _frame: pending.append(signum))
        except (OSError, ValueError):  # not settable here
            pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in pending[:1]:
            handler = previous.get(sig)
            if callable(handler):
                handler(sig, None)  # Python's own SIGINT handler: KeyboardInterrupt
            elif handler == signal.SIG_DFL:
                signal.raise_signal(sig)


def _remove_tree(path: Path) -> None:
    """Remove a temporary tree, read-only folders inside it included (a user's folder
    carried over keeps its mode)."""
    def writable(func, name, _exc) -> None:
        try:
            os.chmod(os.path.dirname(name), 0o700)
            func(name)
        except OSError:
            pass

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=writable)


def _link_tree(src: Path, dst: Path) -> None:
    """`src` (a user's file, link or folder) at `dst`: files hard-linked (copied where
    the file system cannot link), links as links, folders rebuilt."""
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    elif src.is_dir():
        dst.mkdir()
        for name in sorted(os.listdir(src)):
            _link_tree(src / name, dst / name)
        shutil.copystat(src, dst)
    elif src.is_file():
        try:
            os.link(src, dst, follow_symlinks=False)
        except OSError:
            shutil.copy2(src, dst)
    else:
        raise _refuse(src, "a special file (a pipe, socket or device) sits in the project; "
                      "it cannot be carried into the new one", "move it out of the project")


def _carry_over(old: Path, new: Path, keep: tuple[str, ...]) -> None:
    """The user's entries of the project `old` into the new one being written."""
    for rel in keep:
        dst = new / rel
        taken = [p for p in (dst, *dst.parents) if _within(p, new) and p != new
                 and os.path.lexists(p) and (p == dst or not p.is_dir())]
        if taken:
            raise _refuse(old / rel, f"`{rel}` is yours (not in the project's manifest) "
                          "and the new project writes "
                          f"`{taken[-1].relative_to(new).as_posix()}`",
                          "move or rename your file, then run again")
        dst.parent.mkdir(parents=True, exist_ok=True)
        _link_tree(old / rel, dst)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one step (Linux renameat2 with RENAME_EXCHANGE), so there
    is no moment without the output. False where the system cannot (then two renames)."""
    try:
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                     ctypes.c_uint]
    at_cwd, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE (linux/fcntl.h, linux/fs.h)
    if call(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL):  # an old kernel, or a file system without it
        return False
    raise OSError(err, os.strerror(err), str(b))


def _replace_dir(tmp: Path, target: Path) -> None:
    """The finished `tmp` in place of the existing directory `target`; the old one is
    removed. On failure the old one stays (or, if it cannot be put back, is named)."""
    if _exchange(tmp, target):
        _remove_tree(tmp)  # it holds the old directory now
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name[:100]}.old.", dir=target.parent))
    try:
        os.replace(target, old / target.name)
    except OSError:
        _remove_tree(old)
        raise
    try:
        os.replace(tmp, target)
    except OSError as exc:
        try:
            os.replace(old / target.name, target)  # the previous output, back
        except OSError:
            # Never delete the only copy of the previous output: say where it is.
            raise Ai8xError("output.os-error", str(target),
                            f"cannot replace the output ({exc.strerror}), nor put the "
                            f"previous one back; it is kept in {old}",
                            "move it back by hand", exit_code=EXIT_USAGE) from None
        _remove_tree(old)
        raise
    _remove_tree(old)


def write_dir_atomic(target: Path, fill: Callable[[Path], None], overwrite: bool) -> None:
    """Create directory `target` by filling a temporary sibling, then swapping it in.

    `fill(directory)` writes the files; a manifest of them is added (MANIFEST). An
    existing `target` is replaced only with `overwrite` and only when it is empty or a
    project onnx2ai8x wrote (see `replaceable`); the files it holds that its manifest
    does not list are kept in the new one. If anything fails or the run is interrupted,
    nothing is left behind and an existing directory is untouched.
    """
    target = Path(target)
    keep = replaceable(target, overwrite)
    _mkdir_parent(target)
    try:
        tmp = _sibling_dir(target)
    except OSError as exc:
        raise os_error(exc, target, "create") from None
    try:
        fill(tmp)
        (tmp / MANIFEST).write_text(manifest_text(tmp), encoding="utf-8")
        if os.path.lexists(target):
            _carry_over(target, tmp, keep)
            shutil.copymode(target, tmp)
            with _signals_held():
                _replace_dir(tmp, target)
        else:
            with _signals_held():
                os.replace(tmp, target)
    except OSError as exc:
        with _signals_held():
            _remove_tree(tmp)
        raise os_error(exc, target) from None
    except BaseException:
        with _signals_held():
            _remove_tree(tmp)
        raise


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

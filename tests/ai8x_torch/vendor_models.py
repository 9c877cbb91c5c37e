"""Walk the vendor training repository's model files: build, quantize randomly, export.

The repository is read from AI8X_TRAINING (a checkout or a bare mirror; default: the
local mirror /work/.mirror/analogdevicesinc+ai8x-training/repo). Nothing of it is copied
into this project: each file is executed in memory with `ai8x` resolving to ai8x_torch.
Outcomes per model: "exported", "refused" (an Ai8xError naming the construct the
hardware cannot run), "unavailable" (the file needs a package or module this
environment lacks), "failed" (anything else: a bug here).
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

DEFAULT_MIRROR = Path("/work/.mirror/analogdevicesinc+ai8x-training/repo")


@dataclass(frozen=True)
class Outcome:
    file: str
    model: str
    result: str  # exported, refused, unavailable, failed
    detail: str


def repository() -> Path | None:
    path = Path(os.environ.get("AI8X_TRAINING", DEFAULT_MIRROR))
    return path if path.exists() else None


def model_files(repo: Path) -> dict[str, str]:
    """models/*.py of the repository: name -> source text."""
    if (repo / "models").is_dir():
        return {p.name: p.read_text() for p in sorted((repo / "models").glob("*.py"))}
    names = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "--name-only",
                            "HEAD", "models/"], capture_output=True, text=True,
                           check=True).stdout.split()
    return {Path(n).name: subprocess.run(["git", "--git-dir", str(repo), "show",
                                          f"HEAD:{n}"], capture_output=True, text=True,
                                         check=True).stdout
            for n in names if n.endswith(".py")}


def _helper_modules(repo: Path, tmp: Path) -> Path:
    """The repository's shared model code the model files import (`ai8x_blocks`,
    `utils/`), extracted into `tmp` (the repository's own `ai8x` is ai8x_torch here)."""
    out = tmp / "vendor-helpers"
    out.mkdir(parents=True, exist_ok=True)
    if (repo / "models").is_dir():
        for name in ("ai8x_blocks.py",):
            if (repo / name).is_file():
                (out / name).write_text((repo / name).read_text())
        if (repo / "utils").is_dir():
            import shutil

            shutil.copytree(repo / "utils", out / "utils", dirs_exist_ok=True)
        return out
    listing = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "-r", "--name-only",
                              "HEAD"], capture_output=True, text=True, check=True).stdout
    for name in listing.split():
        if name == "ai8x_blocks.py" or (name.startswith("utils/") and name.endswith(".py")):
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(subprocess.run(["git", "--git-dir", str(repo), "show",
                                               f"HEAD:{name}"], capture_output=True,
                                              check=True).stdout)
    return out


def export_all(tmp: Path) -> list[Outcome]:
    import ai8x_torch
    from onnx2ai8x.errors import Ai8xError
    from tests.ai8x_torch.helpers import randomize

    repo = repository()
    if repo is None:
        return []
    outcomes = []
    saved = sys.modules.get("ai8x")
    sys.modules["ai8x"] = ai8x_torch
    helpers = _helper_modules(repo, tmp)
    sys.path.insert(0, str(helpers))
    try:
        for fname, text in model_files(repo).items():
            mod = types.ModuleType(fname[:-3].replace("-", "_"))
            try:
                exec(compile(text, fname, "exec"), mod.__dict__)  # noqa: S102
            except (ImportError, AttributeError) as exc:
                outcomes.append(Outcome(fname, "-", "unavailable", str(exc)[:200]))
                continue
            for entry in getattr(mod, "models", []):
                name = entry["name"]
                factory = getattr(mod, name, None)
                if factory is None:
                    continue
                device = 87 if name.startswith("ai87") or "87" in fname else 85
                outcomes.append(_one(fname, name, factory, entry, device, tmp,
                                     ai8x_torch, Ai8xError, randomize))
    finally:
        sys.path.remove(str(helpers))
        for mod_name in [m for m in sys.modules if m in ("ai8x_blocks", "utils")
                         or m.startswith("utils.")]:
            del sys.modules[mod_name]
        if saved is None:
            sys.modules.pop("ai8x", None)
        else:
            sys.modules["ai8x"] = saved
    return outcomes


def _one(fname, name, factory, entry, device, tmp, ai8x_torch, error_type, randomize):
    try:
        ai8x_torch.set_device(device, simulate=False, round_avg=False, verbose=False)
        model = _build(factory, entry)
    except error_type as exc:
        return Outcome(fname, name, "refused", exc.render().splitlines()[0][:200])
    except (ImportError, NotImplementedError) as exc:
        return Outcome(fname, name, "unavailable", f"{type(exc).__name__}: {exc}"[:200])
    except Exception as exc:  # noqa: BLE001 - the model file's own constructor failed
        return Outcome(fname, name, "unavailable",
                       f"cannot build with defaults: {type(exc).__name__}: {exc}"[:200])
    refusal = None
    randomize(model, np.random.default_rng(15))
    model.eval()
    # The data set gives the input shape in the vendor's flow; here it is found by trying
    # the model's `dimensions` default and common sizes until the model runs on one.
    for shape in _input_shapes(model, entry):
        try:
            ai8x_torch.export_onnx(model, torch.zeros(shape), tmp / f"{name}.onnx",
                                   device=f"MAX7800{2 if device == 87 else 0}")
        except error_type as exc:
            refusal = exc.render().splitlines()[0][:200]
            if "cannot run this call on the example input" in refusal:
                continue
            return Outcome(fname, name, "refused", refusal)
        except Exception as exc:  # noqa: BLE001 - a bug in the export
            return Outcome(fname, name, "failed", f"{type(exc).__name__}: {exc}"[:300])
        return Outcome(fname, name, "exported", str(shape))
    return Outcome(fname, name, "refused", f"no input shape fits: {refusal}")


def _build(factory, entry):
    kwargs = {}
    params = inspect.signature(factory).parameters
    if "pretrained" in params:
        kwargs["pretrained"] = False
    return factory(**kwargs)


def _input_shapes(model, entry) -> list[tuple[int, ...]]:
    import ai8x_torch

    first = next((m for m in model.modules()
                  if isinstance(m, ai8x_torch.QuantizationAwareModule) and m.op is not None),
                 None)
    channels = getattr(first.op, "in_channels", None) if first is not None else None
    channels = channels or getattr(getattr(first, "op", None), "in_features", 3)
    dims = None
    for cls in type(model).__mro__:
        try:
            params = inspect.signature(cls.__init__).parameters
        except (TypeError, ValueError):
            continue
        default = params["dimensions"].default if "dimensions" in params else None
        if isinstance(default, tuple | list) and default:
            dims = tuple(int(d) for d in default)
            break
    if entry.get("dim", 2) == 1:
        lengths = ([dims[0]] if dims else []) + [128, 3, 1, 2, 4, 8, 16, 32, 64, 256]
        return [(1, channels, n) for n in dict.fromkeys(lengths)]
    sizes = ([dims] if dims and len(dims) == 2 else []) + [
        (32, 32), (28, 28), (64, 64), (128, 128), (112, 112), (160, 120), (224, 224)]
    return [(1, channels, h, w) for h, w in dict.fromkeys(sizes)]

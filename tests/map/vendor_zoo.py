"""The vendor training repository's model zoo, read from a local mirror, built with
ai8x_torch through the `ai8x` drop-in.

Nothing of the vendor repository is stored here: the model files, training scripts and
dataset declarations are read at test time from the bare mirror (`git show`), and the
tests that need it skip when it is absent. What is taken from them is what the
vendor's train.py takes:

* `models/*.py` each declare `models = [{'name': ..., 'dim': ...}, ...]`: the
  architectures, built by calling the module-level function of that name.
* `scripts/train_*.sh` (else `scripts/evaluate_*.sh`) pair an architecture with
  `--dataset`, `--device`, `--use-bias`, `--obj-detection` and `--qat-policy` (whose
  `weight_bits` and per-layer overrides give the random weights their widths).
* `datasets/*.py` declare `datasets = [{'name': ..., 'input': (C, H, W) or (C, L),
  'output': labels}, ...]`; read with `ast`, never imported.
* train.py's create_model passes num_classes (labels, plus a background class for
  object detection), num_channels, dimensions (a 1-D input gets a trailing 1), bias,
  weight_bits/bias_bits/quantize_activation (None/None/False without 8-bit activation
  mode) and, for object detection, the torch device.

An architecture no script trains is built for the dataset its name spells
(`..._cifar100`), else with its constructor's own defaults (num_classes, num_channels,
dimensions), read from the model file; with the constructor's default `bias`, on the
device its name implies (`ai87...`: MAX78002, else MAX78000).
"""
from __future__ import annotations

import ast
import contextlib
import os
import shlex
import subprocess
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MIRROR = Path(os.environ.get(
    "ONNX2AI8X_TRAINING_MIRROR",
    "/work/.mirror/analogdevicesinc+ai8x-training/repo"))
SYNTHESIS_MIRROR = Path(os.environ.get(
    "ONNX2AI8X_SYNTHESIS_MIRROR",
    "/work/.mirror/analogdevicesinc+ai8x-synthesis/repo"))


def available(repo: Path = MIRROR) -> bool:
    """The mirror is there and git can read it."""
    if not repo.is_dir():
        return False
    try:
        subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                       capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def show(path: str, repo: Path = MIRROR) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{path}"], check=True,
                          capture_output=True, text=True, timeout=60).stdout


def listing(folder: str, repo: Path = MIRROR) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "ls-tree", "--name-only", "HEAD",
                          f"{folder.rstrip('/')}/"], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    return sorted(line for line in out.splitlines() if line)


# --- datasets -------------------------------------------------------------------------
@dataclass(frozen=True)
class Dataset:
    name: str
    input: tuple[int, ...]  # (C, H, W), or (C, L) for 1-D data
    labels: int


def _class_constants(tree: ast.Module) -> dict[str, object]:
    """Class-level literal assignments (`KWS.dataset_dict`, `PascalVOC.voc_labels`)."""
    out: dict[str, object] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        attrs = {}
        for item in node.body:
            if isinstance(item, ast.Assign) and len(item.targets) == 1 \
                    and isinstance(item.targets[0], ast.Name):
                with contextlib.suppress(ValueError, TypeError, SyntaxError):
                    attrs[item.targets[0].id] = ast.literal_eval(item.value)
        out[node.name] = types.SimpleNamespace(**attrs)
    return out


def _labels(expr: ast.expr, constants: dict[str, object]) -> int:
    """The number of labels an `'output'` expression describes (a tuple or list of
    labels, a string whose characters are the outputs, `list(map(str, range(n)))`, a
    class constant)."""
    namespace = {"__builtins__": {}, "list": list, "map": map, "str": str, "range": range,
                 "tuple": tuple, **constants}
    value = eval(compile(ast.Expression(expr), "<labels>", "eval"), namespace)  # noqa: S307
    return len(value)


def datasets(repo: Path = MIRROR) -> dict[str, Dataset]:
    found: dict[str, Dataset] = {}
    for path in listing("datasets", repo):
        if not path.endswith(".py"):
            continue
        tree = ast.parse(show(path, repo))
        constants = _class_constants(tree)
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "datasets" for t in node.targets)):
                continue
            for entry in getattr(node.value, "elts", []):
                if not isinstance(entry, ast.Dict):
                    continue
                fields = {ast.literal_eval(k): v for k, v in zip(entry.keys, entry.values,
                                                                  strict=True)
                          if isinstance(k, ast.Constant)}
                try:
                    name = ast.literal_eval(fields["name"])
                    shape = tuple(ast.literal_eval(fields["input"]))
                    labels = _labels(fields["output"], constants)
                except (KeyError, ValueError, TypeError, NameError, AttributeError):
                    continue
                found[name] = Dataset(name, shape, labels)
    return found


# --- scripts --------------------------------------------------------------------------
@dataclass(frozen=True)
class Recipe:
    """How a script trains (or evaluates) one architecture."""

    script: str
    dataset: str
    device: str
    bias: bool
    obj_detection: bool
    qat_policy: str | None = None  # policies/<file>.yaml


def _options(words: list[str]) -> dict[str, str | bool]:
    out: dict[str, str | bool] = {}
    for k, word in enumerate(words):
        if word.startswith("--"):
            nxt = words[k + 1] if k + 1 < len(words) else ""
            out.setdefault(word[2:], nxt if nxt and not nxt.startswith("-") else True)
    return out


def recipes(repo: Path = MIRROR) -> dict[str, list[Recipe]]:
    """Per architecture, every training script run of train.py that builds it, in script
    order (evaluation scripts for an architecture no script trains). A script that runs
    train.py twice (a teacher, then the student) contributes each run."""
    found: dict[str, list[Recipe]] = {}
    # the NAS supernets' training scripts live in nas/scripts
    paths = listing("scripts", repo) + listing("nas/scripts", repo)
    for prefix in ("scripts/train_", "nas/scripts/train_", "scripts/evaluate_"):
        trained = set(found)  # evaluation scripts only for what no script trains
        for path in paths:
            if not (path.startswith(prefix) and path.endswith(".sh")):
                continue
            for line in show(path, repo).splitlines():
                if "train.py" not in line:
                    continue
                try:
                    words = shlex.split(line.split("train.py", 1)[1], comments=True)
                except ValueError:
                    continue
                opts = _options(words)
                model, dataset = opts.get("model"), opts.get("dataset")
                if not isinstance(model, str) or not isinstance(dataset, str) \
                        or model in trained:
                    continue
                device = opts.get("device")
                policy = opts.get("qat-policy")
                found.setdefault(model, []).append(Recipe(
                    path, dataset, device if isinstance(device, str) else "MAX78000",
                    bool(opts.get("use-bias")), bool(opts.get("obj-detection")),
                    policy if isinstance(policy, str) and policy != "None" else None))
    return found


# --- architectures --------------------------------------------------------------------
@dataclass(frozen=True)
class Architecture:
    """One entry of a model file's `models` list, with what train.py would pass."""

    file: str  # models/<file>.py
    name: str
    dim: int
    device: str
    input_shape: tuple[int, ...]  # what the model reads, without the batch
    kwargs: tuple[tuple[str, object], ...]
    source: str  # the script, "named dataset" or "constructor defaults"
    dataset: str
    variant: int = 1  # the n-th distinct build of this architecture
    # weight bits of the script's QAT policy: (default, ((layer, bits), ...))
    weight_bits: tuple[int, tuple[tuple[str, int], ...]] = (8, ())

    @property
    def id(self) -> str:
        base = f"{Path(self.file).stem}:{self.name}"
        return base if self.variant == 1 else f"{base}:{self.dataset}"

    @property
    def device_code(self) -> int:
        return 87 if self.device == "MAX78002" else 85


def _models_list(tree: ast.Module) -> list[dict]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "models" for t in node.targets):
            with contextlib.suppress(ValueError, TypeError):
                return list(ast.literal_eval(node.value))
    return []


def _constructor_defaults(tree: ast.Module, name: str) -> dict[str, object]:
    """num_classes/num_channels/dimensions defaults of the class the factory `name`
    returns (the first `return Cls(...)` in it), or of its own signature."""
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    wanted = ("num_classes", "num_channels", "dimensions", "bias")
    out: dict[str, object] = {}

    def from_args(args: ast.arguments) -> None:
        pos = args.args[len(args.args) - len(args.defaults):]
        pairs = list(zip(pos, args.defaults, strict=True))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                  if d is not None]
        for arg, default in pairs:
            if arg.arg in wanted and arg.arg not in out:
                with contextlib.suppress(ValueError, TypeError):
                    value = ast.literal_eval(default)
                    if value is not None:
                        out[arg.arg] = value

    func = funcs.get(name)
    if func is None:
        return out
    for node in ast.walk(func):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg in wanted and kw.arg not in out:
                    with contextlib.suppress(ValueError, TypeError):
                        value = ast.literal_eval(kw.value)
                        if value is not None:
                            out[kw.arg] = value
            callee = getattr(node.func, "id", None)
            if callee in classes:
                for item in classes[callee].body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        from_args(item.args)
    from_args(func.args)
    return out


def _weight_bits(policy: str | None, repo: Path) -> tuple[int, tuple[tuple[str, int], ...]]:
    """The weight bits a QAT policy file trains with: the default and per-layer
    overrides (8 bits when the script names no policy)."""
    if policy is None:
        return 8, ()
    import yaml

    try:
        data = yaml.safe_load(show(policy, repo))
    except (subprocess.SubprocessError, yaml.YAMLError):
        return 8, ()
    if not isinstance(data, dict):
        return 8, ()
    overrides = data.get("overrides") or {}
    return int(data.get("weight_bits", 8)), tuple(sorted(
        (str(k), int(v["weight_bits"])) for k, v in overrides.items()
        if isinstance(v, dict) and "weight_bits" in v))


def _name_dataset(name: str, data: dict[str, Dataset]) -> Dataset | None:
    """The dataset an architecture's name spells (`..._cifar100`, `..._kws20`): the
    longest dataset name contained in it, ignoring case and underscores."""
    flat = name.replace("_", "").lower()
    hits = [d for d in data.values() if d.name.replace("_", "").lower() in flat]
    return max(hits, key=lambda d: (len(d.name), d.name)) if hits else None


def architectures(repo: Path = MIRROR) -> list[Architecture]:
    """Every architecture of every model file, once per distinct way a script builds it
    (input shape, class count, device, bias, object detection)."""
    data = datasets(repo)
    scripts = recipes(repo)
    out = []
    for path in listing("models", repo):
        if not path.endswith(".py"):
            continue
        tree = ast.parse(show(path, repo))
        for entry in _models_list(tree):
            name, dim = entry["name"], int(entry.get("dim", 2))
            variants = []
            for recipe in scripts.get(name, []):
                ds = data.get(recipe.dataset)
                if ds is None:
                    continue
                kwargs: dict[str, object] = {"bias": recipe.bias}
                if recipe.obj_detection:
                    kwargs["device"] = "cpu"
                variants.append((ds.input, ds.labels + (1 if recipe.obj_detection else 0),
                                 recipe.device, kwargs, Path(recipe.script).name, ds.name,
                                 _weight_bits(recipe.qat_policy, repo)))
            if not variants:
                device = "MAX78002" if name.startswith("ai87") else "MAX78000"
                ds = _name_dataset(name, data)
                defaults = _constructor_defaults(tree, name)
                bias = {"bias": bool(defaults.get("bias", False))}
                if ds is not None:
                    variants.append((ds.input, ds.labels, device, bias, "named dataset",
                                     ds.name, (8, ())))
                else:
                    channels = int(defaults.get("num_channels", 3))
                    dims = tuple(defaults.get("dimensions", (28, 28)))
                    shape = (channels, dims[0]) if dim == 1 else (channels, *dims[:2])
                    variants.append((shape, int(defaults.get("num_classes", 10)), device,
                                     bias, "constructor defaults", "-", (8, ())))
            seen = set()
            for shape, classes, device, kwargs, source, dataset, bits in variants:
                key = (tuple(shape), classes, device, tuple(sorted(kwargs.items())), bits)
                if key in seen:
                    continue
                seen.add(key)
                dims = tuple(shape[1:]) + ((1,) if len(shape) == 2 else ())
                kwargs = {**kwargs, "pretrained": False, "num_classes": classes,
                          "num_channels": shape[0], "dimensions": dims[:2],
                          "weight_bits": None, "bias_bits": None,
                          "quantize_activation": False}
                out.append(Architecture(path, name, dim, device, tuple(shape),
                                        tuple(sorted(kwargs.items())), source, dataset,
                                        len(seen), bits))
    return out


# --- loading --------------------------------------------------------------------------
_HELPERS = {
    # vendor helper modules model files import next to `ai8x`, loaded from the mirror
    "ai8x_nas": "ai8x_nas.py",
    "utils.object_detection_utils": "utils/object_detection_utils.py",
}


@contextlib.contextmanager
def vendor_imports(repo: Path = MIRROR) -> Iterator[None]:
    """`import ai8x` (and `ai8x_blocks`) resolve to ai8x_torch; the vendor's own helper
    modules load from the mirror. sys.modules is restored afterwards."""
    import ai8x_torch
    import ai8x_torch.blocks

    saved = {k: sys.modules.get(k) for k in ("ai8x", "ai8x_blocks", "utils", *_HELPERS)}
    try:
        sys.modules["ai8x"] = ai8x_torch
        sys.modules["ai8x_blocks"] = ai8x_torch.blocks
        utils = types.ModuleType("utils")
        utils.__path__ = []  # a namespace for utils.object_detection_utils only
        sys.modules["utils"] = utils
        for name, path in _HELPERS.items():
            mod = types.ModuleType(name)
            mod.__file__ = path
            try:
                code = compile(show(path, repo), path, "exec")
                exec(code, mod.__dict__)  # noqa: S102
            except Exception:  # noqa: BLE001 - a helper that does not load: the model
                continue       # files that need it fail to load and are reported
            sys.modules[name] = mod
            if "." in name:
                setattr(utils, name.split(".", 1)[1], mod)
        yield
    finally:
        for key, mod in saved.items():
            if mod is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = mod


def load_module(file: str, repo: Path = MIRROR) -> types.ModuleType:
    """A model file executed as a module (call inside vendor_imports)."""
    mod = types.ModuleType(Path(file).stem.replace("-", "_"))
    mod.__file__ = file
    exec(compile(show(file, repo), file, "exec"), mod.__dict__)  # noqa: S102
    return mod


def accelerator_part(model, input_shape: tuple[int, ...] | None = None):
    """The model without its host-side tail, and whether anything was cut.

    Detector heads end in `permute`/`view`/`torch.cat` that reorder the head outputs
    for the loss and box decoding on the host; a trailing plain `nn.Linear` runs in
    software too. The vendor tool describes only the accelerator's layers, whose
    outputs the host then reads. This traces the model (ai8x modules as leaves), walks
    back from its output through everything that is not an ai8x module, and returns a
    module whose outputs are the ai8x module results reached, in the model's order (the
    model itself when its outputs already are ai8x module results)."""
    from torch import fx

    import ai8x_torch
    from ai8x_torch.export import _Tracer

    leaf_types = (ai8x_torch.QuantizationAwareModule, ai8x_torch.Eltwise)
    # the exporter's tracer: ai8x modules are leaves, conditions on the input's shape
    # (`input_shape`, with the batch dimension) are decided for it
    graph = _Tracer(input_shape).trace(model)
    modules = dict(model.named_modules())
    output = next(n for n in graph.nodes if n.op == "output")

    def is_hardware(node: fx.Node) -> bool:
        return node.op == "call_module" and isinstance(modules.get(node.target), leaf_types)

    direct = output.args[0]
    direct = list(direct) if isinstance(direct, (tuple, list)) else [direct]
    if all(isinstance(n, fx.Node) and is_hardware(n) for n in direct):
        return model, False
    found: set[fx.Node] = set()
    seen: set[fx.Node] = set()
    todo = list(output.all_input_nodes)
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        if is_hardware(node):
            found.add(node)
        elif node.op == "call_method" and node.target in ("size", "dim") \
                or node.op == "call_function" and getattr(node.target, "__name__", "") \
                == "getattr":
            continue  # reads a shape, not the values
        elif node.op != "placeholder":
            todo.extend(node.all_input_nodes)
    order = [n for n in graph.nodes if n in found]
    graph.erase_node(output)
    graph.output(tuple(order) if len(order) > 1 else order[0])
    part = fx.GraphModule(model, graph)
    part.graph.eliminate_dead_code()
    part.recompile()
    return part, True


def build(arch: Architecture, repo: Path = MIRROR):
    """The architecture's model, constructed as train.py would (inside vendor_imports,
    under the architecture's device).

    An architecture no script trains is built with its constructor's `bias`; when that
    leaves a BatchNorm without a bias, which ai8x refuses (the vendor's too, telling the
    user to pass --use-bias), it is built again with bias=True, as the user would."""
    from onnx2ai8x.errors import Ai8xError

    mod = load_module(arch.file, repo)
    kwargs = dict(arch.kwargs)
    try:
        return getattr(mod, arch.name)(**kwargs)
    except Ai8xError as err:
        scripted = arch.source not in ("named dataset", "constructor defaults")
        if scripted or kwargs.get("bias") or err.code != "ai8x_torch.layer" \
                or not err.diagnostics[0].where.endswith("batchnorm"):
            raise
    return getattr(mod, arch.name)(**{**kwargs, "bias": True})

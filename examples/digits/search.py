"""An architecture search over the digits model family with Optuna, choosing by
accuracy, latency and fit.

    python examples/digits/search.py --trials 3 --epochs 2          # seconds
    python examples/digits/search.py --trials 40 --epochs 30 --workers 2

The family is train.py's network with its widths and depth free: the first convolution
has `width1` channels, the pooled ones `width2`, there are `convs` of them in all (2: the
classifier sees 4x4 pixels, 3: 2x2). Each round asks Optuna for `--batch` candidates,
checks them all with `onnx2ai8x.api.check_many` (fan-out on a process pool with
`--workers`): the check needs only the shapes, so a candidate that does not fit the
MAX78000 costs milliseconds and is never trained. The ones that fit are trained (float
epochs, then QAT, then quantized, as train.py does but shorter) and measured with the
bit-exact onnxruntime reference. The two objectives are held-out accuracy (maximized)
and the converter's cycle estimate (minimized, the report's total cycles); fit is a
constraint (`Trial.set_constraint`, which NSGA-II honours), so Optuna's Pareto front
holds only networks that fit. The choice printed is the fastest network within
`--tolerance` of the best accuracy on that front.
"""
from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# 512 pooled channels need more weight memory than the MAX78000 has: the search meets
# candidates that do not fit.
SPACE = {"width1": (8, 16, 32, 64, 128), "width2": (8, 16, 32, 64, 128, 256, 512),
         "convs": (2, 3)}


@dataclass(frozen=True)
class Shape:
    """One point of the family."""

    width1: int
    width2: int
    convs: int

    @property
    def label(self) -> str:
        return f"{self.width1}-{self.width2}x{self.convs - 1}"


def build(shape: Shape):
    """The torch module of `shape` (the digits network with these widths)."""
    from torch import nn

    import ai8x_torch as ai8x

    side = 8 // 2 ** (shape.convs - 1)

    class Candidate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            body = [ai8x.FusedConv2dReLU(1, shape.width1, 3, padding=1)]
            width = shape.width1
            for _ in range(shape.convs - 1):
                body.append(ai8x.FusedMaxPoolConv2dReLU(width, shape.width2, 3, pool_size=2,
                                                        pool_stride=2, padding=1))
                width = shape.width2
            self.body = nn.Sequential(*body)
            self.fc = ai8x.Linear(width * side * side, 10, wide=True)

        def forward(self, x):
            x = self.body(x)
            return self.fc(x.view(x.size(0), -1))

    return Candidate()


def network_of(model):
    """The quantized `model` as an onnx2ai8x Network (in memory; nothing written)."""
    import torch

    import ai8x_torch as ai8x
    from ai8x_torch.export import to_network

    ai8x.quantize_model(model)
    network, _ = to_network(model, torch.zeros(1, 1, 8, 8), device="MAX78000")
    return network


def untrained_network(shape: Shape):
    """The network of `shape` with its initial weights: enough for the converter's fit
    and cycle estimate, which depend on the shapes only."""
    import torch

    torch.manual_seed(0)
    return network_of(build(shape))


def train_and_measure(shape: Shape, epochs: int, seed: int) -> float:
    """Held-out accuracy of `shape` trained for `epochs` float and `epochs` QAT epochs,
    measured on the accelerator's integers (onnxruntime with the ai8x kernels)."""
    import torch
    from train import QAT_POLICY, _train, load_split

    import ai8x_torch as ai8x
    import custom_ops
    from custom_ops.builder import build_proto

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(seed)
    split = load_split()
    model = build(shape)
    quiet = lambda _msg: None  # noqa: E731
    _train(model, split, epochs, generator, quiet)
    ai8x.fuse_bn_layers(model)
    ai8x.initiate_qat(model, {**QAT_POLICY, "start_epoch": epochs, "overrides": {}})
    _train(model, split, epochs, generator, quiet)
    logits = custom_ops.run(custom_ops.session(build_proto(network_of(model))),
                            split.x_test)[0]
    guess = np.asarray(logits).reshape(len(split.y_test), -1).argmax(1)
    return float((guess == split.y_test).mean())


def search(trials: int, epochs: int, batch: int, executor=None, seed: int = 1):
    """Run the study; returns it (each trial's `fits`, `cycles`, `accuracy` and
    `reason` in its user attributes)."""
    import optuna

    import ai8x_torch as ai8x
    from onnx2ai8x import api

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    ai8x.set_device(85, simulate=False, round_avg=False, verbose=False)
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=optuna.samplers.NSGAIISampler(seed=seed))
    done = 0
    while done < trials:
        asked = [study.ask() for _ in range(min(batch, trials - done))]
        shapes = [Shape(*(t.suggest_categorical(k, v) for k, v in SPACE.items()))
                  for t in asked]
        checked = api.check_many([untrained_network(s) for s in shapes], "MAX78000",
                                 executor=executor)
        for trial, shape, swept in zip(asked, shapes, checked, strict=True):
            trial.set_user_attr("fits", swept.ok)
            # feasible at 0 or below: NSGA-II ranks a network that does not fit last
            trial.set_constraint("fits", 0.0 if swept.ok else 1.0)
            if not swept.ok:
                trial.set_user_attr("reason", swept.error.code)
                study.tell(trial, (0.0, float("inf")))
                continue
            cycles = swept.result.cycles
            accuracy = train_and_measure(shape, epochs, seed)
            trial.set_user_attr("cycles", cycles)
            trial.set_user_attr("accuracy", accuracy)
            study.tell(trial, (accuracy, float(cycles)))
        done += len(asked)
    return study


def choose(study, tolerance: float):
    """The fastest network on the Pareto front within `tolerance` of its best
    accuracy (None when no candidate fits)."""
    front = [t for t in study.best_trials if t.user_attrs["fits"]]
    if not front:
        return None
    best = max(t.values[0] for t in front)
    near = [t for t in front if t.values[0] >= best - tolerance]
    return min(near, key=lambda t: (t.values[1], -t.values[0], t.number))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--epochs", type=int, default=10,
                        help="float epochs, and as many QAT epochs, per candidate")
    parser.add_argument("--batch", type=int, default=4, help="candidates asked at once")
    parser.add_argument("--workers", type=int, default=0,
                        help="check each batch on a process pool of this size (0: here)")
    parser.add_argument("--tolerance", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.workers:
        with ProcessPoolExecutor(args.workers) as pool:
            study = search(args.trials, args.epochs, args.batch, pool, args.seed)
    else:
        study = search(args.trials, args.epochs, args.batch, None, args.seed)
    for t in study.trials:
        p, a = t.params, t.user_attrs
        what = (f"{a['accuracy']:.2%}, {a['cycles']} cycles" if a["fits"]
                else f"does not fit ({a['reason']})")
        print(f"trial {t.number}: width1 {p['width1']}, width2 {p['width2']}, "
              f"{p['convs']} convolutions: {what}")
    chosen = choose(study, args.tolerance)
    if chosen is None:
        print("no candidate fits the MAX78000")
        return 1
    p = chosen.params
    print(f"chosen: trial {chosen.number} (width1 {p['width1']}, width2 {p['width2']}, "
          f"{p['convs']} convolutions): {chosen.values[0]:.2%}, "
          f"{int(chosen.values[1])} cycles")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

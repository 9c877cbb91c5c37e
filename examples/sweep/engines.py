"""One sweep, three engines: `onnx2ai8x.api.check_many` over a local process pool, a Dask
cluster and Ray (README, "Sweeps").

    python examples/sweep/engines.py --engine process --workers 2
    python examples/sweep/engines.py --engine dask --workers 2
    python examples/sweep/engines.py --engine ray --workers 2     # needs `pip install ray`

The candidates are the committed example models, each checked for both devices. The API
needs only a `concurrent.futures.Executor`: the standard library's process pool is one,
Dask's `Client.get_executor()` is one, and for Ray a ten-line adapter (`RayExecutor`)
turns its remote calls into the standard futures.
"""
from __future__ import annotations

import argparse
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class RayExecutor(Executor):
    """`concurrent.futures.Executor` over Ray tasks (ray.init() first): each call is a
    remote task, its ObjectRef turned into a standard Future."""

    def __init__(self) -> None:
        import ray

        self._ray = ray
        self._tasks: dict = {}  # one remote function per function: Ray ships it once

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if fn not in self._tasks:
            self._tasks[fn] = self._ray.remote(fn)
        return self._tasks[fn].remote(*args, **kwargs).future()


def candidates() -> list[tuple[str, bytes, str]]:
    """(label, model bytes, device) of every example model on both devices."""
    models = sorted((ROOT / "examples").rglob("*.onnx"))
    return [(str(p.relative_to(ROOT)), p.read_bytes(), device) for p in models
            for device in ("MAX78000", "MAX78002")]


def sweep(executor) -> list[str]:
    """The verdict of every candidate: its cycles, or why it does not fit."""
    from onnx2ai8x import api

    jobs = candidates()
    lines = []
    for device in ("MAX78000", "MAX78002"):
        mine = [(label, data) for label, data, d in jobs if d == device]
        results = api.check_many([data for _, data in mine], device, executor=executor)
        for (label, _), swept in zip(mine, results, strict=True):
            verdict = (f"{swept.result.cycles} cycles" if swept.ok
                       else f"no ({swept.error.diagnostics[0].code})")
            lines.append(f"{label} on {device}: {verdict}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("here", "process", "dask", "ray"),
                        default="process")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.engine == "here":
        lines = sweep(None)
    elif args.engine == "process":
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            lines = sweep(pool)
    elif args.engine == "dask":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            lines = sweep(client.get_executor())
    else:
        import ray

        ray.init(num_cpus=args.workers, include_dashboard=False)
        try:
            lines = sweep(RayExecutor())
        finally:
            ray.shutdown()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Architecture-search throughput: candidate networks per second per core through
`onnx2ai8x.check` with the models in memory and no file written (issue 27 item 6; the
target is at least 30 per second per core).

Usage: python benchmarks/api_sweep.py [--repeat N] [--form network|bytes|both]
       python benchmarks/api_sweep.py --engines [--workers 1,2]

The candidates are a search space an architecture search would sweep: ai8x_torch
networks of 7 widths x 2 input sizes x 5 depths (70 networks, 3 to 9 layers), quantized
and turned into a Network (`ai8x_torch.export.to_network`) or into the bytes of their
ai8x-ONNX once, beforehand (that is the search's own cost, not the converter's). Each is
then checked for MAX78000 in one process, warm (the first pass, which imports the
stages, is not timed), in a fresh empty working directory that must stay empty. Per
core is CPU seconds of this process (time.process_time), so a loaded machine does not
flatter or penalize the figure; the wall-clock rate is printed beside it.

`--engines` (issue 36 item 6) runs the same candidates, as bytes, through
`onnx2ai8x.api.check_many` on a local process pool and on a Dask LocalCluster with 1
and 2 workers (one thread each; Dask with 1 and with 8 candidates per task) and prints
candidates per second, wall clock, of a warm pass (the first pass, which starts the
workers and imports the stages in them, is not timed). Wall clock is what a sweep waits
for, so the figure depends on what else the machine runs: the load average is printed
with it.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = (16, 24, 32, 48, 64, 96, 128)
SIZES = (32, 64)
DEPTHS = (1, 2, 3, 4, 5)  # pooled convolutions after the first


def candidates():
    """(label, Network, ai8x-ONNX bytes) of every point of the search space."""
    import torch
    from torch import nn

    import ai8x_torch as ai8x
    from ai8x_torch.export import to_network
    from custom_ops.builder import build_proto

    ai8x.set_device(85, simulate=False, round_avg=False, verbose=False)

    class Candidate(nn.Module):
        def __init__(self, width: int, depth: int) -> None:
            super().__init__()
            self.first = ai8x.FusedConv2dReLU(3, width, 3, padding=1)
            self.body = nn.Sequential(*[
                ai8x.FusedMaxPoolConv2dReLU(width, width, 3, pool_size=2, pool_stride=2,
                                            padding=1) for _ in range(depth)])
            self.head = ai8x.Conv2d(width, 10, 1, wide=True)

        def forward(self, x):
            return self.head(self.body(self.first(x)))

    torch.manual_seed(0)
    out = []
    for width in WIDTHS:
        for size in SIZES:
            for depth in DEPTHS:
                model = Candidate(width, depth)
                ai8x.quantize_model(model)
                network, _ = to_network(model, torch.zeros(1, 3, size, size),
                                        device="MAX78000")
                out.append((f"w{width}-s{size}-d{depth}", network,
                            build_proto(network).SerializeToString()))
    return out


def sweep(models, check) -> tuple[float, float, int]:
    """CPU and wall seconds of one pass; how many candidates fit."""
    import onnx2ai8x

    fits = 0
    cpu, wall = time.process_time(), time.perf_counter()
    for model in models:
        try:
            check(model, "MAX78000")
            fits += 1
        except onnx2ai8x.Ai8xError:
            pass
    return time.process_time() - cpu, time.perf_counter() - wall, fits


def engine_rate(models, executor, repeat: int, chunksize: int = 1) -> tuple[float, int]:
    """Candidates per second (wall) of the best of `repeat` warm passes of check_many on
    `executor`; how many fit."""
    from onnx2ai8x import api

    api.check_many(models, "MAX78000", executor=executor)  # warm: workers import
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        results = api.check_many(models, "MAX78000", executor=executor,
                                 chunksize=chunksize)
        best = min(best, time.perf_counter() - start)
    return len(models) / best, sum(r.ok for r in results)


def engines(space, workers: tuple[int, ...], repeat: int) -> None:
    """check_many on a process pool and on a Dask LocalCluster, 1 and 2 workers."""
    from concurrent.futures import ProcessPoolExecutor

    models = [data for _, _, data in space]
    print(f"{len(models)} candidates as bytes, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    here, fits = engine_rate(models, None, repeat)
    print(f"in this process       : {here:6.1f} candidates per second ({fits} fit)")
    for n in workers:
        with ProcessPoolExecutor(max_workers=n) as pool:
            rate, _ = engine_rate(models, pool, repeat)
        print(f"process pool, {n} worker{'s' if n > 1 else ' '}: {rate:6.1f} candidates "
              f"per second ({rate / here:.2f}x this process)")
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        print("Dask: not installed (pip install 'dask[distributed]')")
        return
    for n in workers:
        with LocalCluster(n_workers=n, threads_per_worker=1, dashboard_address=None) as c, \
                Client(c) as client:
            for chunk in (1, 8):
                rate, _ = engine_rate(models, client.get_executor(), repeat, chunk)
                print(f"Dask LocalCluster, {n} worker{'s' if n > 1 else ' '}, {chunk} "
                      f"per task: {rate:6.1f} candidates per second "
                      f"({rate / here:.2f}x this process)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--form", choices=("network", "bytes", "both"), default="both")
    parser.add_argument("--engines", action="store_true",
                        help="check_many on a process pool and a Dask LocalCluster")
    parser.add_argument("--workers", default="1,2", help="worker counts for --engines")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import onnx2ai8x

    space = candidates()
    if args.engines:
        engines(space, tuple(int(n) for n in args.workers.split(",")), args.repeat)
        return 0
    forms = ("network", "bytes") if args.form == "both" else (args.form,)
    with tempfile.TemporaryDirectory() as work:
        os.chdir(work)
        for form in forms:
            models = [net if form == "network" else data for _, net, data in space]
            sweep(models, onnx2ai8x.check)  # warm: the stages imported once
            runs = [sweep(models, onnx2ai8x.check) for _ in range(args.repeat)]
            cpu = min(r[0] for r in runs)
            wall = min(r[1] for r in runs)
            fits = runs[0][2]
            print(f"{form:8} {len(models)} candidates ({fits} fit): "
                  f"{len(models) / cpu:6.1f} per second per core (CPU), "
                  f"{len(models) / wall:6.1f} per second wall, "
                  f"{1000 * cpu / len(models):5.1f} ms each")
        written = list(Path(work).iterdir())
        os.chdir(ROOT)
    if written:
        print(f"files written: {written}")
        return 1
    print("no file written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

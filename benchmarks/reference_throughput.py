"""Samples per second of the onnxruntime reference on the MNIST zoo network.

Usage: python benchmarks/reference_throughput.py [--seconds S] [--threads T]

Builds ai85-mnist from the golden case (case.json + checkpoint, as
tests/golden/case_network.py does; torch reads the checkpoint) and times
`custom_ops.session` at batch 1 and batch 256 on random int8 samples. Target on the
2-core dev machine: >= 1,000 samples/s at batch 1, >= 2,000 at batch 256.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT.parent / "shared" / "golden" / "ai85-mnist"


def _rate(sess, x: np.ndarray, seconds: float) -> float:
    name = sess.get_inputs()[0].name
    for _ in range(3):  # warm-up
        sess.run(None, {name: x})
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        sess.run(None, {name: x})
        runs += 1
    return runs * x.shape[0] / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=0,
                        help="intra-op threads (0: one per core for batches, 1 at batch 1)")
    args = parser.parse_args()
    if not CASE.is_dir():
        print(f"golden case {CASE} is absent", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    import custom_ops
    from custom_ops.builder import build_model
    from tests.golden.case_network import case_network

    model = build_model(case_network(CASE))
    rng = np.random.default_rng(0)
    print(f"{'batch':>6} {'threads':>8} {'samples/s':>11}")
    for batch, default_threads in ((1, 1), (256, 0)):
        threads = args.threads if args.threads else default_threads
        sess = custom_ops.session(model, threads=threads)
        shape = sess.get_inputs()[0].shape
        x = rng.integers(-128, 128, size=(batch, *shape[1:])).astype(np.int8)
        rate = _rate(sess, x, args.seconds)
        print(f"{batch:>6} {threads or 'auto':>8} {rate:>11,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Run the matrix's cells and record their outcomes in expected.json, then regenerate
README.md's table from it: the one command that re-records the matrix.

    python -m tests.matrix.record [-j JOBS] [--column COL ...] [--row ROW ...]
                                  [--details FILE]

Every cell by default (about 5 minutes on one core: some 650 cells, under a second
each); `--column` / `--row` restrict it (the other cells keep their recorded outcomes).
`-j` runs cells in that many processes. `--details` writes each cell's outcome with its
detail (the refusal's node and message, the measured SQNR) as JSON lines.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from . import catalogue as cat
from . import cells, table


def _one(job: tuple[str, str]) -> tuple[str, str, str, str]:
    col, row = job
    result = cells.run(col, row)
    return col, row, result.outcome, result.detail


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.matrix.record")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--column", action="append", default=[])
    ap.add_argument("--row", action="append", default=[])
    ap.add_argument("--details")
    args = ap.parse_args(argv)
    jobs = [(c.name, r.name) for c in cat.COLUMNS for r in cat.ROWS
            if (not args.column or c.name in args.column)
            and (not args.row or r.name in args.row)]
    expected = json.loads(cat.EXPECTED.read_text()) if cat.EXPECTED.exists() else {}
    start = time.monotonic()
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_one, jobs, chunksize=4))
    else:
        results = [_one(j) for j in jobs]
    changed = 0
    for col, row, outcome, _ in results:
        before = expected.setdefault(col, {}).get(row)
        if before != outcome:
            changed += 1
            print(f"{col} / {row}: {before} -> {outcome}")
    for col, row, outcome, _ in results:
        expected[col][row] = outcome
    ordered = {c.name: {r.name: expected[c.name][r.name] for r in cat.ROWS
                        if r.name in expected.get(c.name, {})}
               for c in cat.COLUMNS if c.name in expected}
    cat.EXPECTED.write_text(json.dumps(ordered, indent=1) + "\n")
    if args.details:
        with open(args.details, "w") as f:
            for col, row, outcome, detail in results:
                f.write(json.dumps({"column": col, "row": row, "outcome": outcome,
                                    "detail": detail}) + "\n")
    print(f"{len(results)} cells in {time.monotonic() - start:.0f} s, {changed} changed")
    if all(r.name in ordered.get(c.name, {}) for c in cat.COLUMNS for r in cat.ROWS):
        table.main([])
    else:
        print("not every cell is recorded yet: README.md's table left as it is")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Print the README tables of the quantized sources (held-out digits top-1).

    PYTHONPATH=. python tests/quantized_sources/figures.py
"""
from __future__ import annotations

import numpy as np

from onnx2ai8x.quantize import quantize_file
from tests.quantized_sources.helpers import held_out, run_converted, run_source
from tests.quantized_sources.test_quantized_sources import CALIBRATION, CASES


def main() -> None:
    x, y = held_out()
    print("| fixture | source on onnxruntime | converted | how | converted, no "
          "calibration |")
    print("| --- | --- | --- | --- | --- |")
    for case in CASES:
        src = run_source(case.source, x).reshape(len(y), -1)
        acc_src = np.mean(src.argmax(1) == y)
        first = quantize_file(case.path, None if case.exact else CALIBRATION)
        got = run_converted(first, x)
        how = "exact" if case.exact else "requantized, calibrated"
        if case.exact:
            differ = np.mean(got != src)
            agree = np.mean(got.argmax(1) == src.argmax(1))
            how += (f": equal to the source rounding half up; {100 * differ:.1f} % of "
                    f"logits differ from its half-to-even run, top-1 agrees on "
                    f"{100 * agree:.2f} %")
            no_cal = "(same)"
        else:
            bare = run_converted(quantize_file(case.path, None), x)
            no_cal = f"{100 * np.mean(bare.argmax(1) == y):.2f} %"
        print(f"| {case.name} | {100 * acc_src:.2f} % | "
              f"{100 * np.mean(got.argmax(1) == y):.2f} % | {how} | {no_cal} |")


if __name__ == "__main__":
    main()

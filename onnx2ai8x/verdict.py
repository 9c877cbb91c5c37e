"""The outcome of `onnx2ai8x verify`, shared by the plain verifier (verification.py) and
the verifier of projects with CPU segments (verify_split.py), which sits below it."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import EXIT_INVALID, EXIT_NOT_MODELLED, EXIT_OK


@dataclass(frozen=True)
class VerifyResult:
    passed: bool
    text: str
    data: dict
    # PASS/FAIL/ERROR, or NOT MODELLED when the project uses a feature the model does
    # not execute (it vouches for neither answer; its own exit code tells scripts so)
    verdict: str = "PASS"

    @property
    def exit_code(self) -> int:
        if self.passed:
            return EXIT_OK
        return EXIT_NOT_MODELLED if self.verdict == "NOT MODELLED" else EXIT_INVALID

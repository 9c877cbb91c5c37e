"""The allow-list of verify (tests/ai8xsim/exceptions.py) checked as data, and `judge`.

Whether each entry is still needed is checked where its project runs (`judge` asserts the
listed verdict); here: the list names real cases, once per kind, and lists every golden
case that programs the snoop units.
"""
from __future__ import annotations

from collections import Counter

import pytest
import yaml

from ai8xsim.verify import Outcome
from tests.ai8xsim.exceptions import ALLOWED, SNOOP_CASES, Kind, Reason, allowed, judge
from tests.conftest import GOLDEN, all_cases

EXAMPLES = GOLDEN.parent / "msdk" / "Examples"


def test_one_entry_per_case_and_kind() -> None:
    counts = Counter((a.case, a.kind) for a in ALLOWED)
    assert [k for k, n in counts.items() if n > 1] == []
    assert all(a.why.strip() for a in ALLOWED)


def test_entries_name_existing_projects() -> None:
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus is absent")
    cases = set(all_cases())
    for a in ALLOWED:
        if a.kind is Kind.SDK:
            if EXAMPLES.is_dir():
                assert (EXAMPLES / a.case / "cnn.c").is_file(), a.case
        else:
            assert a.case in cases, a.case


def test_every_snoop_case_is_listed_as_a_simulator_gap() -> None:
    """A golden case whose sidecar programs the snoop units is NOT MODELLED as converted
    from its sidecar and as the vendor writes it, and is listed for exactly those kinds;
    a simulator gap is listed for no other case."""
    if not GOLDEN.is_dir():
        pytest.skip("golden corpus is absent")
    with_snoop = sorted(name for name in all_cases()
                        if "snoop" in (yaml.safe_load((GOLDEN / name / "network.yaml")
                                                      .read_text()) or {}))
    assert with_snoop == sorted(SNOOP_CASES)
    gaps = {(a.case, a.kind) for a in ALLOWED if a.reason is Reason.SIMULATOR_GAP}
    assert gaps == {(c, k) for c in SNOOP_CASES for k in (Kind.SIDECAR, Kind.VENDOR)}


def _outcome(verdict: str) -> Outcome:
    out = Outcome("MAX78002", verdict == "PASS", checked_words=4)
    if verdict == "NOT MODELLED":
        out.unmodelled = "snoop units"
    elif verdict == "ERROR":
        out.error = "broken"
    return out


@pytest.mark.parametrize("verdict", ["PASS", "FAIL", "ERROR"])
def test_a_listed_snoop_project_must_stay_not_modelled(verdict: str) -> None:
    """An allow-listed project that passes now (or fails some other way) fails the test:
    its entry must go."""
    entry = allowed(SNOOP_CASES[0], Kind.SIDECAR)
    assert entry is not None and entry.verdict == "NOT MODELLED"
    with pytest.raises(AssertionError, match="remove or correct its entry"):
        judge(entry.case, entry.kind, _outcome(verdict))


def test_a_listed_failure_that_passes_now_fails() -> None:
    entry = allowed("ai85-suite-multilayer-eltwise", Kind.SIDECAR)
    assert entry is not None and entry.verdict == "FAIL"
    for verdict in ("PASS", "NOT MODELLED"):
        with pytest.raises(AssertionError, match="remove or correct its entry"):
            judge(entry.case, entry.kind, _outcome(verdict))
    with pytest.raises(pytest.xfail.Exception, match="hardware"):
        judge(entry.case, entry.kind, _outcome("FAIL"))


def test_an_unlisted_project_must_pass() -> None:
    # automatic mapping programs no snoop unit: that kind is not listed for snoop cases
    assert allowed(SNOOP_CASES[0], Kind.AUTOMATIC) is None
    for verdict in ("FAIL", "NOT MODELLED", "ERROR"):
        with pytest.raises(AssertionError):
            judge(SNOOP_CASES[0], Kind.AUTOMATIC, _outcome(verdict))
    judge(SNOOP_CASES[0], Kind.AUTOMATIC, _outcome("PASS"))

"""The rule table of onnx2ai8x/legalize/README.md says what RULES says: one row per rule,
in RULES order, with its scope and its reason (the first line of the rule's docstring).
A rule added, renamed, reordered or re-worded without the table fails here."""
from __future__ import annotations

from pathlib import Path

from onnx2ai8x.legalize.rules import RULES

README = Path(__file__).resolve().parents[2] / "onnx2ai8x" / "legalize" / "README.md"


def _table_rows() -> list[list[str]]:
    rows = []
    for line in README.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        rows.append(cells)
    return rows


def test_the_table_lists_every_rule_in_order() -> None:
    names = [row[0].strip("`") for row in _table_rows()]
    assert names == [rule.name for rule in RULES]


def test_each_row_states_the_rules_scope_and_reason() -> None:
    by_name = {row[0].strip("`"): row for row in _table_rows()}
    for rule in RULES:
        row = by_name[rule.name]
        assert row[1] == rule.scope, rule.name
        assert row[2] == rule.reason, rule.name


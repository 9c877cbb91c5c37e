"""Print what the hostile-input runs covered: cases per kind and the longest run."""
from __future__ import annotations


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    from .test_fuzz import _STATS

    if not _STATS:
        return
    terminalreporter.section("hostile-input fuzz (tests/fuzz)")
    total = 0
    for kind, times in _STATS.items():
        total += len(times)
        terminalreporter.write_line(f"{kind:<11} {len(times):>6} cases, longest "
                                    f"{max(times):6.2f} s, mean {sum(times) / len(times):5.2f} s")
    longest = max(max(t) for t in _STATS.values())
    terminalreporter.write_line(f"{'all':<11} {total:>6} cases, longest {longest:6.2f} s "
                                f"(seed {config.getoption('--fuzz-seed')})")

"""docs/reliability.md's property-check coverage lines are what scripts/formula_harness.py gives now
(`cases()`, `coverage()`: no hypothesis run needed): the number of cases and of the registered ops
they cover, the examples run (cases x the examples each, when none stops early), the registered ops
without a case and the count of each reason, as scripts/reliability.py writes them."""

from __future__ import annotations

import re
from collections import Counter

import formula_harness as harness

from tests.accuracy_docs import ROOT

TEXT = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")


def test_the_cases_and_the_ops_they_cover():
    covered, listed = harness.coverage()
    m = re.search(r"- (\d+) cases over (\d+) registered ops, up to (\d+) examples each: (\d+) examples run", TEXT)
    assert m, "no case line in docs/reliability.md"
    cases, ops, each, ran = map(int, m.groups())
    assert (cases, ops) == (len(harness.cases()), len(covered)), (len(harness.cases()), len(covered))
    assert ran == cases * each, (ran, cases * each)
    assert f"- {len(listed)} of {len(covered) + len(listed)} registered ops have no case" in TEXT, \
        (len(listed), len(covered) + len(listed))


def test_each_reason_and_its_count():
    _, listed = harness.coverage()
    for reason, n in Counter(listed.values()).items():
        assert f"  - {n} ops: {reason}" in TEXT, (n, reason)

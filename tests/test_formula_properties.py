"""Property-based checks of the registry on real, meta and fake tensors (scripts/formula_harness.py)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import formula_harness as harness

CASES = harness.cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{c.op}#{i}" for i, c in enumerate(CASES)])
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_formula_properties(case, data):
    harness.check(case, data.draw)


def test_coverage_is_reported(capsys):
    covered, listed = harness.coverage()
    total = len(covered) + len(listed)
    with capsys.disabled():
        print(f"\nformula harness: {len(CASES)} cases over {len(covered)} ops; {len(listed)} of {total} "
              f"registered ops listed with a reason")
    assert len(covered) >= 100
    assert all(reason for reason in listed.values())

"""Run the formula property harness with many examples per case (CI runs a few).

    python scripts/fuzz_formulas.py [--examples 200]

Prints, per op, the cases and examples run, then the ops listed without a case and why.
Exit status 1 on any failing property.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import formula_harness as harness  # noqa: E402


def run(examples: int) -> tuple[int, list[str]]:
    """(examples run, failures)."""
    failures, ran = [], 0
    for case in harness.cases():
        @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(data=st.data())
        def prop(data):
            harness.check(case, data.draw)

        try:
            prop()
            ran += examples
        except Exception as e:  # noqa: BLE001  (a failing property is the result we report)
            failures.append(f"{case.op}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
    return ran, failures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--examples", type=int, default=200)
    args = p.parse_args(argv)
    import warnings
    warnings.simplefilter("ignore")
    ran, failures = run(args.examples)
    covered, listed = harness.coverage()
    print(f"{len(harness.cases())} cases over {len(covered)} ops, up to {args.examples} examples each "
          f"({ran} examples run); {len(failures)} failing; {len(listed)} registered ops without a case")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

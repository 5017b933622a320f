"""scripts/validate_host_time.py --fit: the factor on python_loop_ns is chosen on fit rows only,
per host group, by the median |log error| (rows made up by hand)."""

from __future__ import annotations

import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
import validate_host_time as v  # noqa: E402


def row(rid: str, split: str, host: str, value: float) -> dict:
    return {"id": rid, "split": split, "model": "llama-3.2-1b", "hardware": "H100-SXM", "runtime": "eager",
            "host": host, "value": str(value)}


def test_fit_uses_fit_rows_of_each_group_only():
    # anchor group (lent-h100: a score-based host): fit rows measured 2 s and 2.4 s where the scan at
    # factor f predicts f seconds: median |log error| (the mean of two) at f = 2.0 is (0 + log 1.2) / 2
    # = 0.091, at 2.5 (log 1.25 + log(2.5 / 2.4)) / 2 = 0.132, at 1.75 (log(2 / 1.75) + log(2.4 / 1.75))
    # / 2 = 0.225: 2.0. A held-out row measured 0.25 s would pull towards 0.25 and must not enter.
    rows = [row("a", "fit", "lent-h100", 2.0), row("b", "fit", "lent-h100", 2.4),
            row("c", "held-out", "lent-h100", 0.25), row("d", "fit", "lent-h200-vm", 0.5)]
    scanned = {r["id"]: {f: 1.0 * f for f in v.FACTORS} for r in rows}
    results = [(r, 1.0, 1.0 / float(r["value"]) - 1) for r in rows]
    best = v.fitted_factors(results, scanned)
    assert best["anchor"][0] == 2.0 and best["anchor"][2] == 2
    assert best["anchor"][1] == pytest.approx(math.log(1.2) / 2)
    assert best["lent-h200-vm"] == (0.5, 0.0, 1)                     # its own group: exactly 0.5 s

"""CSV of a profile: one row per aten op, or one row per module scope (raw units)."""

from __future__ import annotations

import csv
import io

from dispatchprof.results.profile import Profile
from dispatchprof.results.records import TOTAL_COLUMNS

_QUANTITIES = ("params", "params_bytes", "buffers", "buffers_bytes", "act", "act_bytes", "cache", "peak_bytes")


def operators_csv(profile: Profile) -> str:
    """One row per aten op: state, calls and every count (raw units)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(("op", "state", *TOTAL_COLUMNS))
    for op, row in profile.by_operator().items():
        w.writerow((op, row.state, *(getattr(row.totals, c) for c in TOTAL_COLUMNS)))
    return out.getvalue()


def modules_csv(profile: Profile) -> str:
    """One row per module scope: tensor quantities, self and inclusive counts (raw units)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    counts = TOTAL_COLUMNS[1:]
    w.writerow(("module", "type", "parent", "calls", *_QUANTITIES,
                *(f"self_{c}" for c in counts), *(f"inclusive_{c}" for c in counts)))
    for name, row in profile.by_module().items():
        s = row.scope
        w.writerow((name, s.module_type, "" if s.parent is None else s.parent, s.calls,
                    *(getattr(s, q) for q in _QUANTITIES),
                    *(getattr(row.self_totals, c) for c in counts),
                    *(getattr(row.inclusive, c) for c in counts)))
    return out.getvalue()

"""The merged report of a multi-process run: per-rank totals, the sum over ranks, bytes sent,
and per device each rank's simulated time; ranks run at the same time, so the run takes as
long as its slowest rank."""

from __future__ import annotations

from typing import Any, Sequence

from dispatchprof import units
from dispatchprof.report.render import render
from dispatchprof.results.ranks import RankProfile, merged_totals
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.simulate import simulate


def merge_report(ranks: Sequence[RankProfile], devices: Any = None, fmt: str = "simple") -> str:
    """One table row per rank and a total row; with devices, simulated time per rank and the run's."""
    scenarios = scenarios_of(devices)
    sims = {r.rank: [simulate(r.profile, scenarios[n], name=n) for n in scenarios] for r in ranks}
    rows = []
    for r in ranks:
        t = r.profile.total()
        rows.append([str(r.rank), str(t.calls), units.si(t.flops), units.si(t.macs), units.nbytes(t.comm_bytes),
                     *(units.seconds(s.total.time_s) for s in sims[r.rank])])
    t = merged_totals(ranks)
    slowest = [max(sims[r.rank][i].total.time_s for r in ranks) for i in range(len(scenarios))]
    rows.append(["all ranks", str(t.calls), units.si(t.flops), units.si(t.macs), units.nbytes(t.comm_bytes),
                 *(f"{units.seconds(s)} (slowest rank)" for s in slowest)])
    return render(rows, ["rank", "ops", "FLOPs", "MACs", "sent to other ranks", *(f"time on {n}" for n in scenarios)], fmt)

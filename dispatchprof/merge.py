"""Combine the per-process files of a multi-process run into one report.

Each process writes ``dispatchprof_{process_index}.json`` (a Profile with its process index in
``meta``). Merged: per-rank totals, the sum over ranks, communication bytes, and, per device, each
rank's simulated time; ranks run at the same time, so the run takes as long as its slowest rank.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Any, Sequence

from dispatchprof import units
from dispatchprof.counter import scenarios_of
from dispatchprof.export import profile_from_dict, read_json
from dispatchprof.profile import Profile, Totals
from dispatchprof.report import render
from dispatchprof.simulate import simulate


@dataclass(frozen=True)
class RankProfile:
    rank: int
    path: str
    profile: Profile


def load_ranks(paths: Sequence[str]) -> list[RankProfile]:
    """The rank files (paths, or folders holding dispatchprof_*.json), sorted by rank."""
    files: list[str] = []
    for p in paths:
        files += sorted(glob.glob(os.path.join(p, "dispatchprof_*.json"))) if os.path.isdir(p) else [p]
    if not files:
        raise ValueError(f"no dispatchprof_*.json files in {', '.join(paths)}")
    ranks = []
    for f in files:
        data: Any = read_json(f, "profile")
        meta = data.get("meta", {}) if isinstance(data, dict) else {}
        ranks.append(RankProfile(int(meta.get("process_index", len(ranks))), f, profile_from_dict(data, f)))
    seen = [r.rank for r in ranks]
    if len(set(seen)) != len(seen):
        raise ValueError(f"two files claim the same process index: {', '.join(r.path for r in ranks)}")
    return sorted(ranks, key=lambda r: r.rank)


def merged_totals(ranks: Sequence[RankProfile]) -> Totals:
    total = Totals()
    for r in ranks:
        total = total + r.profile.total()
    return total


def merge_report(ranks: Sequence[RankProfile], devices: Any = None, fmt: str = "simple") -> str:
    """One table row per rank and a total row; with devices, simulated time per rank and the run's."""
    scenarios = scenarios_of(devices)
    sims = {r.rank: [simulate(r.profile, pl, name=n) for n, pl in scenarios.items()] for r in ranks}
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

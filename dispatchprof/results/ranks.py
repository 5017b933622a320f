"""The per-process files of a multi-process run, read back in rank order.

Each process writes ``dispatchprof_{process_index}.json`` (a Profile with its process index in
``meta``); `load_ranks` reads them and `merged_totals` sums them. The merged report (per-rank
rows, simulated time per rank) is rendered by ``dispatchprof.report.ranks``.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Any, Sequence

from dispatchprof.results.files import read_json
from dispatchprof.results.profile import Profile
from dispatchprof.results.records import Totals


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
        profile = Profile.from_dict(data, f)              # checks "meta" too (results.validate)
        meta = data.get("meta") or {}
        ranks.append(RankProfile(meta.get("process_index", len(ranks)), f, profile))
    seen = [r.rank for r in ranks]
    if len(set(seen)) != len(seen):
        raise ValueError(f"two files claim the same process index: {', '.join(r.path for r in ranks)}")
    return sorted(ranks, key=lambda r: r.rank)


def merged_totals(ranks: Sequence[RankProfile]) -> Totals:
    total = Totals()
    for r in ranks:
        total = total + r.profile.total()
    return total

"""Queries of the measured host work of a count (OpRecord.host_loops, host_calls): per phase, per
module scope. In calibration-loop iterations and aten calls; ``Profile.host_seconds`` turns
iterations into seconds on the counting machine, a host profile into seconds on a target
(dispatchprof.sim.hostprofile), which also adds dispatch and launch costs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from dispatchprof.results.records import OpRecord


@dataclass(frozen=True, slots=True)
class HostTotals:
    """Host work of a set of records: the model's code (calibration-loop iterations), the aten calls
    it dispatched and the records (kernels in eager) among them."""

    loops: float = 0.0
    calls: int = 0
    records: int = 0

    def __add__(self, other: HostTotals) -> HostTotals:
        return HostTotals(self.loops + other.loops, self.calls + other.calls, self.records + other.records)


def host_totals(records: Iterable[OpRecord]) -> HostTotals:
    """HostTotals of ``records``."""
    s = 0.0
    calls = n = 0
    for r in records:
        s += r.host_loops
        calls += r.host_calls
        n += 1
    return HostTotals(s, calls, n)


def host_by_phase(records: Iterable[OpRecord]) -> dict[str, HostTotals]:
    """HostTotals per phase label, in order of first appearance."""
    groups: dict[str, list[OpRecord]] = defaultdict(list)
    for r in records:
        groups[r.phase].append(r)
    return {p: host_totals(rs) for p, rs in groups.items()}


def host_by_module(records: Iterable[OpRecord]) -> dict[str, HostTotals]:
    """HostTotals per module scope (self: the records whose scope is that module)."""
    groups: dict[str, list[OpRecord]] = defaultdict(list)
    for r in records:
        groups[r.scope].append(r)
    return {s: host_totals(rs) for s, rs in groups.items()}


def has_host_times(records: Iterable[OpRecord]) -> bool:
    """Whether any record carries a measured host time (host_calls > 0)."""
    return any(r.host_calls for r in records)

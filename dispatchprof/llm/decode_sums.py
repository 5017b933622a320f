"""The decode fast path's arithmetic: is a range of decode steps affine in the cache length,
and the exact sums over such a range.

A `StepSample` is one decode step counted at cache length ``past``: per op record its key
(op, scope, dtype), its counts (COUNT_FIELDS) and, per scenario, its `OpTiming`. Counts sum as
exact integers; dynamic energies and bound shares are summed by `dispatchprof.sim.timing.affine_sum`,
next to the formula that composes them, and step times (the host/device timeline) by
`dispatchprof.sim.timeline.sum_step_times`; energy = dynamic + static power x time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from dispatchprof.results.generation import PhaseTiming
from dispatchprof.results.profile import Profile
from dispatchprof.results.records import COUNT_FIELDS, Totals, totals_of
from dispatchprof.sim.timeline import step_time, sum_step_times
from dispatchprof.sim.timing import OpTiming, affine_sum

Segments = list[tuple[int, int]]


@dataclass(frozen=True)
class StepSample:
    """One decode step counted at cache length ``past``."""

    past: int
    keys: tuple[tuple[str, str, str], ...]           # (op, scope, dtype) per decode record
    counts: tuple[tuple[int, ...], ...]              # per record: COUNT_FIELDS
    timing: Mapping[str, tuple[OpTiming, ...]]       # scenario -> per record
    peak_extra: int
    kv_bytes: tuple[int, ...]       # per cache layer, after the step
    profile: Profile

    def step_time(self, scenario: str) -> float:
        """Simulated time of this step on ``scenario`` (its host/device timeline)."""
        return step_time(self.timing[scenario])


@dataclass(frozen=True)
class DecodeSums:
    """Sums over every decode step: counts, counts per scope, and per scenario the timing."""

    totals: Totals
    by_scope: dict[str, Totals]
    timing: dict[str, PhaseTiming]


def affine(samples: Sequence[StepSample]) -> bool:
    """Same op stream, and every value on one line through the first two samples."""
    if len(samples) < 3:
        return len({s.keys for s in samples}) == 1
    s0, s1 = samples[0], samples[1]
    if any(s.keys != s0.keys for s in samples):
        return False
    d = s1.past - s0.past
    for s in samples[2:]:
        k = s.past - s0.past
        for v0, v1, v in zip(s0.counts, s1.counts, s.counts):
            if any((x - x0) * d != (x1 - x0) * k for x0, x1, x in zip(v0, v1, v)):
                return False
        for name in s0.timing:
            for t0, t1, t in zip(s0.timing[name], s1.timing[name], s.timing[name]):
                for x0, x1, x in zip(t0.parts(), t1.parts(), t.parts()):
                    if not math.isclose(x, x0 + (x1 - x0) * k / d, rel_tol=1e-9, abs_tol=1e-18):
                        return False
    return True


def sum_decode(samples: Mapping[int, StepSample], segments: Segments, names: list[str],
               static_w: Mapping[str, float] | None = None) -> DecodeSums:
    """Sums over the decode steps of every segment (closed forms of affine values);
    ``static_w`` is each scenario's static power (W), drawn for the whole time."""
    static_w = static_w or {}
    calls = sum((b - a + 1) * len(samples[a].keys) for a, b in segments)
    totals = [0] * len(COUNT_FIELDS)
    by_scope: dict[str, list[int]] = {}
    timing = {n: [0.0, 0.0, 0.0, 0.0] for n in names}     # time, dynamic energy, compute-bound, memory-bound
    for a, b in segments:
        s0 = samples[a]
        s1 = samples[a + 1] if b > a else s0
        n = b - a + 1
        offset_sum = n * (n - 1) // 2                     # sum over L of (L - a)
        for key, v0, v1 in zip(s0.keys, s0.counts, s1.counts):
            acc = by_scope.setdefault(key[1], [0] * len(COUNT_FIELDS))
            for f, (x0, x1) in enumerate(zip(v0, v1)):
                value = n * x0 + (x1 - x0) * offset_sum
                totals[f] += value
                acc[f] += value
        for name in names:
            for t0, t1 in zip(s0.timing[name], s1.timing[name]):
                for i, v in enumerate(affine_sum(t0, t1, n)):
                    if i:
                        timing[name][i] += v
            timing[name][0] += sum_step_times(s0.timing[name], s1.timing[name], n)
    phases = {}
    for name in names:
        time, dynamic, compute, memory = timing[name]
        static = static_w.get(name, 0.0) * time
        phases[name] = PhaseTiming(time, dynamic + static, compute, memory, static)
    return DecodeSums(totals_of(totals, calls), {k: totals_of(v, 0) for k, v in by_scope.items()}, phases)

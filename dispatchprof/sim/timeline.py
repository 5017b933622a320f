"""The host/device timeline of one step: the host issues kernels one after another, a kernel
starts when it has been issued and the device is free.

For the ops i = 1..n of a step, with host time h_i (``OpTiming.t_host``: per op in eager, one
graph launch per step in compiled and serving) and device time d_i (``OpTiming.time_s``):

    issued_i = issued_{i-1} + h_i                   (issued_0 = 0)
    start_i  = max(issued_i, end_{i-1})             (end_0 = 0)
    end_i    = start_i + d_i
    step time = end_n = max over i of (issued_i + d_i + ... + d_n)

A step is host-bound when the host's issue times decide it (the device waits), device-bound when
step time = d_1 + ... + d_n plus the first launch. Ops of one stream run in order, also across
the devices of a placement (the next op waits for the previous one's output). The host waits for
a step's last kernel before it issues the next step (decoding needs the token it produced), so a
count's time is the sum of its steps' times. With no host time the step time is the sum of its
ops' times: the roofline of the simulator v1.

`sum_step_times` sums step times over n decode steps whose every time is affine in the step
index k (the decode fast path): each candidate issued_i + d_i(k) + ... + d_n(k) is a line in k,
and the sum over k of their upper envelope has a closed form per envelope piece.
"""

from __future__ import annotations

import math
from typing import Sequence

from dispatchprof.sim.timing import OpTiming


def schedule(ops: Sequence[OpTiming]) -> list[tuple[float, float, float]]:
    """(issued, start, end) of every op of one step, in seconds from the step's start."""
    issued = end = 0.0
    out = []
    for t in ops:
        issued += t.t_host
        start = max(issued, end)
        end = start + t.time_s
        out.append((issued, start, end))
    return out


def step_time(ops: Sequence[OpTiming]) -> float:
    """End of the step's last kernel (0 for no ops)."""
    issued = end = 0.0
    for t in ops:
        issued += t.t_host
        end = max(issued, end) + t.time_s
    return end


def elapsed(ops: Sequence[OpTiming], step_starts: Sequence[int]) -> float:
    """Sum of the step times of ``ops`` cut at ``step_starts`` (indices where a step begins)."""
    cuts = sorted(set(step_starts) | {0, len(ops)})
    return sum(step_time(ops[a:b]) for a, b in zip(cuts, cuts[1:]) if b > a)


def _lines(t0: Sequence[OpTiming], t1: Sequence[OpTiming]) -> list[tuple[float, float]]:
    """(slope, intercept) in k of each candidate issued_i + d_i + ... + d_n."""
    n = len(t0)
    suffix0 = [0.0] * (n + 1)
    suffix1 = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix0[i] = suffix0[i + 1] + t0[i].time_s
        suffix1[i] = suffix1[i + 1] + t1[i].time_s
    lines = []
    h0 = h1 = 0.0
    for i in range(n):
        h0 += t0[i].t_host
        h1 += t1[i].t_host
        a = h0 + suffix0[i]
        lines.append(((h1 + suffix1[i]) - a, a))
    return lines


def sum_step_times(t0: Sequence[OpTiming], t1: Sequence[OpTiming], n: int) -> float:
    """Sum over k = 0..n-1 of the step time of a step whose ops' times are t0 at k = 0 and move
    on a line through t1 at k = 1."""
    if not t0 or n <= 0:
        return 0.0
    hull = _envelope(_lines(t0, t1))
    total, k = 0.0, 0
    for idx, (b, a) in enumerate(hull):
        if idx + 1 < len(hull):
            b2, a2 = hull[idx + 1]
            last = min(n - 1, math.floor((a - a2) / (b2 - b)))    # this line wins while k <= crossing
        else:
            last = n - 1
        if last >= k:
            count = last - k + 1
            total += count * a + b * (k + last) * count / 2
            k = last + 1
        if k >= n:
            break
    return total


def _envelope(lines: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The lines (slope, intercept) of the upper envelope of ``lines`` over k >= 0, by increasing
    slope, starting with the line that is highest at k = 0."""
    best = {}
    for b, a in lines:
        if b not in best or a > best[b]:
            best[b] = a
    ordered = sorted(best.items())
    hull: list[tuple[float, float]] = []
    for b, a in ordered:
        while hull and hull[-1][1] <= a:          # higher slope and higher at k = 0: the old one never wins
            hull.pop()
        while len(hull) >= 2 and _cross(hull[-2], (b, a)) <= _cross(hull[-2], hull[-1]):
            hull.pop()
        hull.append((b, a))
    return hull


def _cross(l1: tuple[float, float], l2: tuple[float, float]) -> float:
    """k where line l2 (steeper) overtakes l1."""
    return (l1[1] - l2[1]) / (l2[0] - l1[0])

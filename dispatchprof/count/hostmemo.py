"""Repeated counts of one model agree on host times: the first measurement of each op position is
kept and reused.

The decode fast path (dispatchprof.llm.generation) counts a few decode steps in separate counts
and sums the rest in closed form, which needs every figure of the steps to lie exactly on a line
through them; a measured time differs a little at every count. So, per model object (weakly held)
and per op position - (phase label, index of the record in its ``OpCounter.phase`` block, op,
scope) - the host work and calls first measured in this process are reused by every later count
of that position. A position never seen before is measured. A new model object starts afresh.
"""

from __future__ import annotations

import bisect
import dataclasses
import weakref
from typing import Sequence

from torch import nn

from dispatchprof.results.records import OpRecord

_MEMO: weakref.WeakKeyDictionary[nn.Module, dict[tuple, tuple[float, int]]] = weakref.WeakKeyDictionary()


def reuse_host_times(model: nn.Module, records: Sequence[OpRecord], block_starts: Sequence[int]) -> list[OpRecord]:
    """``records`` with the host figures of positions already measured for ``model`` (see the
    module docstring); the new positions are remembered. ``block_starts``: record indices where
    phase blocks begin."""
    memo = _MEMO.setdefault(model, {})
    starts = sorted(set(block_starts) | {0})
    out = []
    for i, r in enumerate(records):
        start = starts[bisect.bisect_right(starts, i) - 1]
        key = (r.phase, i - start, r.op, r.scope)
        seen = memo.get(key)
        if seen is None:
            memo[key] = (r.host_loops, r.host_calls)
            out.append(r)
        elif seen != (r.host_loops, r.host_calls):
            out.append(dataclasses.replace(r, host_loops=seen[0], host_calls=seen[1]))
        else:
            out.append(r)
    return out

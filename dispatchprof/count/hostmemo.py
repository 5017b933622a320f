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

import weakref

from torch import nn

_MEMO: weakref.WeakKeyDictionary[nn.Module, dict[tuple, tuple[float, int]]] = weakref.WeakKeyDictionary()


def host_memo_of(model: nn.Module) -> dict[tuple, tuple[float, int]]:
    """The memo of ``model``: (phase, index in its phase block, op, scope) -> (host loops, calls).
    The recorder looks each new record's position up when it makes the record."""
    return _MEMO.setdefault(model, {})

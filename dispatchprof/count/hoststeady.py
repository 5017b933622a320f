"""The steady host time of ops that repeat in identical layers: the median over their repeats.

A gap between two ops is measured with the wall clock (dispatchprof.count.hostclock), so a gap in
which the operating system descheduled the counting thread, or a collection ran that the gc hook
did not see, holds milliseconds that are nobody's; on a shared machine such gaps are rare but
large, and they add up to more than the model's own Python (on a 2-core machine running six other
processes, a Llama-3.2-1B decode step summed 2-3x its steady figure). A model repeats the same
code in every layer, so each op of a layer has one repeat per layer (and per counted step):

    steady(r) = median of host_loops over the records of r's group, for a group of >= `MIN_REPEATS`
    group     = (phase, op, scope with every layer index replaced by "N", k), where r is the k-th
                record of its op in its exact scope within its phase block

A record whose group is smaller keeps its own measurement (the model's code outside the layers).
``host_calls`` are counts, not times, and stay as measured. The median keeps a layer whose code
truly differs from the others only where it is the majority; that is the price of the rule.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from typing import Sequence

from dispatchprof.results.records import OpRecord

#: The fewest repeats a group needs for its median to replace the measurements.
MIN_REPEATS = 3
_LAYER_INDEX = re.compile(r"\.\d+(?=\.|$)")


def steady_host_times(records: Sequence[OpRecord], block_starts: Sequence[int] = ()) -> None:
    """Give each repeated op of ``records`` its group's median host_loops (module docstring), in
    place: they are a count's own records, set once as the count closes, before anything reads
    them (a new record per op took 5x as long: 5 s per 100k records on the loaded 2-core machine,
    against 1 s). ``block_starts`` are
    the indices where a phase block starts (the k-th counts of an op restart there)."""
    starts = set(block_starts)
    seen: Counter = Counter()
    keys = []
    groups: dict[tuple, list[float]] = defaultdict(list)
    for i, r in enumerate(records):
        if i in starts:
            seen.clear()
        seen[r.scope, r.op] += 1
        key = (r.phase, r.op, _LAYER_INDEX.sub(".N", r.scope), seen[r.scope, r.op])
        keys.append(key)
        groups[key].append(r.host_loops)
    medians = {k: statistics.median(v) for k, v in groups.items() if len(v) >= MIN_REPEATS}
    for r, k in zip(records, keys):
        if k in medians:
            object.__setattr__(r, "host_loops", medians[k])

"""The simulator: a pure function of a profile's op records, devices and a placement.

Every op's time and energy comes from `dispatchprof.sim.timing.time_op` (its formulas are in
that module's docstring and in docs/simulator.md); ops run one after the other, so totals are
sums. `Simulation` keeps the records and scope parents it simulated, so that every consumer
(tables, trace, roofline) reads one object.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from dispatchprof.results.capacity import CapacityCheck
from dispatchprof.results.profile import Profile, roll_up
from dispatchprof.results.records import OpRecord
from dispatchprof.sim import frame
from dispatchprof.sim.capacity import check_capacity
from dispatchprof.sim.device import WEIGHT_BITS, Device
from dispatchprof.sim.placement import Placement
from dispatchprof.sim.timing import OpTiming, time_op


@dataclass(frozen=True, slots=True)
class SimTotals:
    """Sums over a set of simulated ops."""

    time_s: float = 0.0
    energy_j: float = 0.0
    compute_bound_s: float = 0.0     # time of ops whose compute term won
    memory_bound_s: float = 0.0
    transfer_s: float = 0.0
    overhead_s: float = 0.0
    ops: int = 0
    comm_s: float = 0.0              # collectives: time on the interconnect

    @property
    def power_w(self) -> float:
        """Average power: energy / time (0 for no time)."""
        return self.energy_j / self.time_s if self.time_s else 0.0

    def __add__(self, o: SimTotals) -> SimTotals:
        return SimTotals(self.time_s + o.time_s, self.energy_j + o.energy_j,
                         self.compute_bound_s + o.compute_bound_s, self.memory_bound_s + o.memory_bound_s,
                         self.transfer_s + o.transfer_s, self.overhead_s + o.overhead_s, self.ops + o.ops,
                         self.comm_s + o.comm_s)


def totals_of(timings: Iterable[OpTiming]) -> SimTotals:
    """Sums of op timings."""
    time = energy = cb = mb = tr = ov = cm = 0.0
    n = 0
    for t in timings:
        busy = t.busy_s
        time += t.time_s
        energy += t.energy_j
        if t.bound == "compute":
            cb += busy
        else:
            mb += busy
        tr += t.t_transfer
        ov += t.t_overhead
        cm += t.t_comm
        n += 1
    return SimTotals(time, energy, cb, mb, tr, ov, n, cm)


@dataclass(frozen=True)
class Simulation:
    """Simulated time, energy and power of one profile on one placement: one OpTiming per
    record (``ops[i]`` times ``records[i]``), the records and the scopes' parents."""

    name: str
    placement: Placement
    ops: tuple[OpTiming, ...]
    capacity: tuple[CapacityCheck, ...]
    weight_dtype: str | None
    records: tuple[OpRecord, ...] = field(repr=False, compare=False)
    parents: Mapping[str, str | None] = field(repr=False, compare=False)

    @property
    def devices(self) -> tuple[str, ...]:
        """Names of the placement's devices."""
        return tuple(d.name for d in self.placement.devices)

    @property
    def total(self) -> SimTotals:
        return totals_of(self.ops)

    def by_device(self) -> dict[str, SimTotals]:
        return self._group(lambda t: t.device)

    def by_phase(self) -> dict[str, SimTotals]:
        return self._group(lambda t: self.records[t.record].phase)

    def by_operator(self) -> dict[str, SimTotals]:
        rows = self._group(lambda t: self.records[t.record].op)
        return dict(sorted(rows.items(), key=lambda kv: -kv[1].time_s))

    def by_module(self) -> dict[str, SimTotals]:
        """Inclusive totals per module scope (the scope and its subtree)."""
        own = self._group(lambda t: self.records[t.record].scope)
        rows = {name: own.get(name, SimTotals()) for name in self.parents}
        rows.update(own)
        return roll_up(rows, self.parents)

    def fits(self) -> bool | None:
        """False if any device is over capacity; None if some capacity is unknown and none is over."""
        states = [c.fits for c in self.capacity]
        if False in states:
            return False
        return None if None in states else True

    def to_dataframe(self, by: str = "operator", phase: str | None = None) -> Any:
        """A pandas DataFrame: counts (raw units), seconds and joules per "operator", "module"
        (inclusive) or "record" (dispatchprof.sim.frame); needs ``pip install 'dispatchprof[pandas]'``."""
        return frame.simulation_frame(self, by, phase)

    def _repr_html_(self) -> str:
        return frame.simulation_html(self)

    def _group(self, key: Callable[[OpTiming], str]) -> dict[str, SimTotals]:
        groups: dict[str, list[OpTiming]] = defaultdict(list)
        for t in self.ops:
            groups[key(t)].append(t)
        return {k: totals_of(v) for k, v in groups.items()}


def simulate(profile: Profile, placement: Placement, *, weight_dtype: str | None = None,
             name: str = "", bound: bool = False) -> Simulation:
    """Simulate ``profile`` on ``placement``. ``bound=True`` ignores the profiles' efficiencies
    and launch overheads: the pure roofline."""
    if bound:
        placement = placement.as_bound()
    if weight_dtype is not None and weight_dtype not in WEIGHT_BITS:
        raise ValueError(f"weight_dtype must be one of {tuple(WEIGHT_BITS)}, got {weight_dtype!r}")
    records = profile.records
    module_type = {s.name: s.module_type for s in profile.scopes}
    devices_of: list[Device] = [placement.device_for(r.scope) for r in records]
    moved: set[tuple[int, int, str]] = set()
    timings = tuple(time_op(i, r, devices_of, moved, weight_dtype, module_type.get(r.scope, "").endswith("RMSNorm"))
                    for i, r in enumerate(records))
    capacity = check_capacity(profile, placement, weight_dtype)
    return Simulation(name or placement.devices[0].name, placement, timings, capacity, weight_dtype, records,
                      profile.parents())

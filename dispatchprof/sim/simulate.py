"""The simulator: a pure function of a profile's op records, devices, a placement, a runtime and
a tensor-parallel degree.

The runtime (dispatchprof.sim.runtime) and the tensor-parallel split (dispatchprof.sim.parallel)
give every record an `OpPlan`; every op's time and energy then comes from
`dispatchprof.sim.timing.time_op` (its formulas are in that module's docstring and in
docs/simulator.md). The ops of each step run on the host/device timeline
(dispatchprof.sim.timeline): the total time is the sum of the steps' times, which is the sum of
the op times when the host costs nothing. Energy = the ops' dynamic energy + every device's
static power x the total time. With tensor parallelism over N devices one device is simulated;
``group_energy_j`` is N times its energy. `Simulation` keeps the records and scope parents it
simulated, so that every consumer (tables, trace, roofline) reads one object.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from dispatchprof.results.capacity import CapacityCheck
from dispatchprof.results.profile import Profile, roll_up
from dispatchprof.results.records import OpRecord
from dispatchprof.sim import frame
from dispatchprof.sim.attention import attention_heads
from dispatchprof.sim.capacity import check_capacity
from dispatchprof.sim.device import WEIGHT_BITS, Device
from dispatchprof.sim.parallel import check_tp, split_blocks, tp_split
from dispatchprof.sim.placement import Placement
from dispatchprof.sim.quantization import check_weight_dtype
from dispatchprof.sim.runtime import RuntimeChanges, check_runtime, narrow_kv_cache, plan_runtime
from dispatchprof.sim.timeline import elapsed
from dispatchprof.sim.timing import OpPlan, OpTiming, time_op


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
    host_s: float = 0.0              # host time issuing the ops
    static_j: float = 0.0            # static power x time (the rest of energy_j is dynamic)

    @property
    def dynamic_j(self) -> float:
        return self.energy_j - self.static_j

    @property
    def power_w(self) -> float:
        """Average power: energy / time (0 for no time)."""
        return self.energy_j / self.time_s if self.time_s else 0.0

    def __add__(self, o: SimTotals) -> SimTotals:
        return SimTotals(self.time_s + o.time_s, self.energy_j + o.energy_j,
                         self.compute_bound_s + o.compute_bound_s, self.memory_bound_s + o.memory_bound_s,
                         self.transfer_s + o.transfer_s, self.overhead_s + o.overhead_s, self.ops + o.ops,
                         self.comm_s + o.comm_s, self.host_s + o.host_s, self.static_j + o.static_j)


def totals_of(timings: Iterable[OpTiming]) -> SimTotals:
    """Sums of op timings (device time: no host/device timeline)."""
    time = energy = cb = mb = tr = ov = cm = host = static = 0.0
    n = 0
    for t in timings:
        busy = t.busy_s
        time += t.time_s
        energy += t.energy_j
        static += t.static_power_w * t.time_s
        if t.bound == "compute":
            cb += busy
        else:
            mb += busy
        tr += t.t_transfer
        ov += t.t_overhead
        cm += t.t_comm
        host += t.t_host
        n += 1
    return SimTotals(time, energy, cb, mb, tr, ov, n, cm, host, static)


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
    runtime: RuntimeChanges = RuntimeChanges()
    tp: int = 1
    step_starts: tuple[int, ...] = ()

    @property
    def devices(self) -> tuple[str, ...]:
        """Names of the placement's devices."""
        return tuple(d.name for d in self.placement.devices)

    @property
    def static_power_w(self) -> float:
        """Static power of the placement's devices (one of the tensor-parallel group)."""
        return sum(d.static_power_w for d in self.placement.devices)

    @property
    def total(self) -> SimTotals:
        """Totals on the host/device timeline: time = sum of the step times; energy = dynamic
        energy + static power x time (per device of a tensor-parallel group)."""
        ops = totals_of(self.ops)
        time = elapsed(self.ops, self.step_starts)
        static = self.static_power_w * time
        return dataclasses.replace(ops, time_s=time, energy_j=ops.dynamic_j + static, static_j=static)

    @property
    def group_energy_j(self) -> float:
        """Energy of the whole tensor-parallel group (tp x one device's)."""
        return self.total.energy_j * self.tp

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
             name: str = "", bound: bool = False, runtime: str = "eager", tp: int = 1,
             step_starts: tuple[int, ...] = (), kv_dtype: str | None = None) -> Simulation:
    """Simulate ``profile`` on ``placement`` under ``runtime`` ("eager", "compiled", "serving")
    with tensor parallelism over ``tp`` devices; ``step_starts`` are the record indices where a
    step begins (OpCounter.phase blocks); ``kv_dtype`` stores the KV cache in that dtype
    (`narrow_kv_cache`). ``bound=True`` ignores the profiles' efficiencies,
    launch and host overheads and static power: the pure roofline."""
    check_runtime(runtime)
    if bound:
        placement = placement.as_bound()
    check_weight_dtype(weight_dtype)
    if kv_dtype is not None and kv_dtype not in WEIGHT_BITS:
        raise ValueError(f"kv_dtype must be one of {tuple(WEIGHT_BITS)}, got {kv_dtype!r}")
    records = profile.records
    check_tp(tp, attention_heads(records), placement.devices)
    module_type = {s.name: s.module_type for s in profile.scopes}
    parents = profile.parents()
    devices_of: list[Device] = [placement.device_for(r.scope) for r in records]
    plans, changes = op_plans(profile, devices_of, runtime, tp, step_starts, kv_dtype)
    moved: set[tuple[int, int, str]] = set()
    timings = tuple(time_op(i, r, devices_of, moved, weight_dtype, module_type.get(r.scope, "").endswith("RMSNorm"),
                            plans[i])
                    for i, r in enumerate(records))
    capacity = check_capacity(profile, placement, weight_dtype, tp=tp)
    return Simulation(name or placement.devices[0].name, placement, timings, capacity, weight_dtype, records,
                      parents, changes, tp, tuple(step_starts))


def op_plans(profile: Profile, devices_of: list[Device], runtime: str, tp: int,
             step_starts: tuple[int, ...], kv_dtype: str | None = None) -> tuple[list[OpPlan], RuntimeChanges]:
    """One OpPlan per record of ``profile`` (``devices_of[i]`` runs record i): the runtime's
    decisions (dispatchprof.sim.runtime), the KV cache in ``kv_dtype`` (`narrow_kv_cache`) and the
    tensor-parallel split (dispatchprof.sim.parallel), and what the runtime changed. The plans
    `simulate` times every op with."""
    records = profile.records
    module_type = {s.name: s.module_type for s in profile.scopes}
    plans, changes = narrow_kv_cache(records, *plan_runtime(records, runtime, step_starts,
                                                            [d.name for d in devices_of]), kv_dtype)
    split = tp_split(records, split_blocks(module_type, profile.parents()), tp)
    return [_with_split(plans[i], split[i], tp) for i in range(len(records))], changes


def _with_split(plan: OpPlan, split: tuple[float, int, int], tp: int) -> OpPlan:
    share, reduce, whole = split
    if share == 1.0 and not reduce:
        return plan
    return dataclasses.replace(plan, share=share, allreduce_bytes=reduce, group=tp, whole_bytes=whole)

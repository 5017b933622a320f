"""The roofline simulator: a pure function of op records, devices and a placement.

For an op o with dtype t placed on device d (units: seconds, bytes, joules):

    work      = sum over categories c of count_c(o) * weight_c(d)      (ADD = MULT = 1)
    t_compute = work / (peak(d, t, kind(o)) * compute_efficiency(d))
                kind is "matrix" when the op has MACs (matmul, conv, attention), else "vector"
    t_memory  = (bytes_read + bytes_written) / (memory_bandwidth(d) * memory_efficiency(d))
                (a profile with a last-level cache uses cache_bandwidth for ops whose traffic fits in it)
    t_op      = max(t_compute, t_memory) + launch_overhead(d) + t_transfer
    bound     = "compute" if t_compute >= t_memory else "memory"
    energy    = work * pj_per_flop + 8 * bytes * memory_pj_per_bit + static_power * t_op + e_transfer

Collectives send ``comm_bytes`` to the other processes over the device's interconnect (its host
link without one): t_comm = comm_bytes / interconnect, e_comm = 8 * comm_bytes * its pJ/bit,
added to t_op and energy.

A tensor read on device d that was produced on another device, or that comes from the host
(a model input: a tensor no counted op produced and that is not a parameter or buffer), is
first moved, once per tensor and destination: device -> host over the source's
device_to_host link, then host -> d over d's host_to_device link:

    t_transfer = bytes / device_to_host(src) + bytes / host_to_device(d)
    e_transfer = 8 * bytes * (device_to_host_pj_per_bit(src) + host_to_device_pj_per_bit(d))

Parameters and buffers live on the device their module is placed on. Ops run one after the
other: totals are sums. A profile's per-element times (``ns_per_element``, the PIM model)
replace t_compute of softmax ops, SiLU and fused RMSNorm by ``ns * output elements``; for an
RMSNorm written out of small ops (a module whose class name ends in "RMSNorm"), the op that
multiplies by the weight carries ``ns * output elements`` and the module's other ops no compute.

``weight_dtype`` ("int8", "int4", ...) assumes parameters stored in that dtype: parameter bytes
read become elements * bits / 8, and ops that read parameters use the device's peak for that
dtype where its table lists one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from dispatchprof.capacity import CapacityCheck, check_capacity
from dispatchprof.devices import WEIGHT_BITS, Device
from dispatchprof.memory import HOST, UNRECORDED
from dispatchprof.placement import Placement
from dispatchprof.profile import OpRecord, Profile, tree_depths

_SOFTMAX = frozenset({"aten._softmax", "aten._safe_softmax", "aten.softmax"})
_SILU = frozenset({"aten.silu", "aten.silu_"})
_RMS_NORM = frozenset({"aten._fused_rms_norm", "aten.rms_norm"})


def dtype_key(dtype: str) -> str:
    """Profile table key of a torch dtype name: 'bfloat16' -> 'bf16', 'float8_e4m3fn' -> 'fp8'."""
    if dtype.startswith("float8"):
        return "fp8"
    return {"float32": "fp32", "float64": "fp64", "bfloat16": "bf16", "float16": "fp16",
            "int8": "int8", "uint8": "int8"}.get(dtype, dtype)


@dataclass(frozen=True, slots=True)
class OpTiming:
    """Simulated cost of one op record (seconds, joules)."""

    record: int
    device: str
    t_compute: float
    t_memory: float
    t_transfer: float
    t_overhead: float
    energy_j: float
    bound: str
    static_power_w: float = 0.0       # the device's static power (part of energy_j: static x time_s)
    t_comm: float = 0.0               # sending comm_bytes to other processes

    @property
    def time_s(self) -> float:
        return max(self.t_compute, self.t_memory) + self.t_overhead + self.t_transfer + self.t_comm


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


def _totals_of(timings: Iterable[OpTiming]) -> SimTotals:
    time = energy = cb = mb = tr = ov = cm = 0.0
    n = 0
    for t in timings:
        busy = max(t.t_compute, t.t_memory)
        time += busy + t.t_overhead + t.t_transfer + t.t_comm
        cm += t.t_comm
        energy += t.energy_j
        if t.bound == "compute":
            cb += busy
        else:
            mb += busy
        tr += t.t_transfer
        ov += t.t_overhead
        n += 1
    return SimTotals(time, energy, cb, mb, tr, ov, n, cm)


@dataclass(frozen=True)
class Simulation:
    """Simulated time, energy and power of one profile on one placement."""

    name: str
    devices: tuple[str, ...]
    ops: tuple[OpTiming, ...]
    capacity: tuple[CapacityCheck, ...]
    weight_dtype: str | None
    _records: tuple[OpRecord, ...] = field(repr=False, compare=False)
    _parents: Mapping[str, str | None] = field(repr=False, compare=False)

    @property
    def total(self) -> SimTotals:
        return _totals_of(self.ops)

    def by_device(self) -> dict[str, SimTotals]:
        return self._group(lambda t: t.device)

    def by_phase(self) -> dict[str, SimTotals]:
        return self._group(lambda t: self._records[t.record].phase)

    def by_operator(self) -> dict[str, SimTotals]:
        rows = self._group(lambda t: self._records[t.record].op)
        return dict(sorted(rows.items(), key=lambda kv: -kv[1].time_s))

    def by_module(self) -> dict[str, SimTotals]:
        """Inclusive totals per module scope (the scope and its subtree)."""
        own = self._group(lambda t: self._records[t.record].scope)
        inclusive = {name: own.get(name, SimTotals()) for name in self._parents}
        for name in own:
            inclusive.setdefault(name, own[name])
        depth = tree_depths(self._parents)
        for name in sorted(inclusive, key=lambda n: -depth.get(n, 0)):
            parent = self._parents.get(name)
            if parent is not None and parent != name and parent in inclusive:
                inclusive[parent] = inclusive[parent] + inclusive[name]
        return inclusive

    def fits(self) -> bool | None:
        """False if any device is over capacity; None if some capacity is unknown and none is over."""
        states = [c.fits for c in self.capacity]
        if False in states:
            return False
        return None if None in states else True

    def _group(self, key) -> dict[str, SimTotals]:
        groups: dict[str, list[OpTiming]] = defaultdict(list)
        for t in self.ops:
            groups[key(t)].append(t)
        return {k: _totals_of(v) for k, v in groups.items()}


def simulate(profile: Profile, placement: Placement, *, weight_dtype: str | None = None,
             name: str = "", bound: bool = False) -> Simulation:
    """Simulate ``profile`` on ``placement`` (see the module docstring for every formula).
    ``bound=True`` ignores the profiles' efficiencies and launch overheads: the pure roofline."""
    if bound:
        placement = placement.as_bound()
    if weight_dtype is not None and weight_dtype not in WEIGHT_BITS:
        raise ValueError(f"weight_dtype must be one of {tuple(WEIGHT_BITS)}, got {weight_dtype!r}")
    records = profile.records
    module_type = {s.name: s.module_type for s in profile.scopes}
    devices_of: list[Device] = [placement.device_for(r.scope) for r in records]
    moved: set[tuple[int, int, str]] = set()
    timings = []
    for i, r in enumerate(records):
        timings.append(_time_op(i, r, devices_of, moved, weight_dtype,
                                module_type.get(r.scope, "").endswith("RMSNorm")))
    parents = {s.name: s.parent for s in profile.scopes}
    capacity = check_capacity(profile, placement, weight_dtype)
    return Simulation(name or placement.devices[0].name, tuple(d.name for d in placement.devices),
                      tuple(timings), capacity, weight_dtype, records, parents)


def _time_op(i: int, r: OpRecord, devices_of: list[Device], moved: set, weight_dtype: str | None,
             in_rms_norm: bool) -> OpTiming:
    d = devices_of[i]
    c = r.cost
    w = d.cost_weights
    work = (c.add + c.mult + c.div * w["div"] + c.sqrt * w["sqrt"] + c.exp * w["exp"]
            + c.cmp * w["cmp"] + c.other * w["other"])
    key = dtype_key(r.dtype)
    read = c.bytes_read or 0
    if weight_dtype is not None and r.param_elements:
        read += r.param_elements * WEIGHT_BITS[weight_dtype] // 8 - r.param_bytes
        table = d.matrix_tflops if c.macs else d.vector_tflops
        if weight_dtype in table:
            key = weight_dtype
    t_compute = work / (d.peak_flops(key, c.macs > 0) * d.compute_efficiency)
    t_compute = _override(r, d, t_compute, in_rms_norm)
    traffic = read + (c.bytes_written or 0)
    t_memory = traffic / d.bandwidth_for(traffic)
    t_transfer, e_transfer = _transfers(r, d, devices_of, moved)
    t_overhead = d.launch_overhead_us * 1e-6
    t_comm, e_comm = _communication(c.comm_bytes, d)
    t_op = max(t_compute, t_memory) + t_overhead + t_transfer + t_comm
    energy = (work * d.pj_per_flop + 8 * traffic * d.memory_pj_per_bit) * 1e-12 \
        + d.static_power_w * t_op + e_transfer + e_comm
    return OpTiming(i, d.name, t_compute, t_memory, t_transfer, t_overhead, energy,
                    "compute" if t_compute >= t_memory else "memory", d.static_power_w, t_comm)


def _communication(nbytes: int, d: Device) -> tuple[float, float]:
    """Collectives: bytes sent over the interconnect, or over the host link without one."""
    if not nbytes:
        return 0.0, 0.0
    if d.interconnect_gb_per_s is not None:
        pj = d.interconnect_pj_per_bit if d.interconnect_pj_per_bit is not None else d.device_to_host_pj_per_bit
        return nbytes / (d.interconnect_gb_per_s * 1e9), 8 * nbytes * pj * 1e-12
    return nbytes / (d.device_to_host_gb_per_s * 1e9), 8 * nbytes * d.device_to_host_pj_per_bit * 1e-12


def _override(r: OpRecord, d: Device, t_compute: float, in_rms_norm: bool) -> float:
    ns = d.ns_per_element
    if not ns:
        return t_compute
    if r.op in _SOFTMAX and "softmax" in ns:
        return ns["softmax"] * r.out_elements * 1e-9
    if r.op in _SILU and "silu" in ns:
        return ns["silu"] * r.out_elements * 1e-9
    if r.op in _RMS_NORM and "rms_norm" in ns:
        return ns["rms_norm"] * r.out_elements * 1e-9
    if in_rms_norm and "rms_norm" in ns and r.phase != "backward":
        return ns["rms_norm"] * r.out_elements * 1e-9 if r.param_elements else 0.0
    return t_compute


def _transfers(r: OpRecord, d: Device, devices_of: list[Device], moved: set) -> tuple[float, float]:
    seconds = joules = 0.0
    for producer, nbytes, tensor in r.inputs:
        if producer == UNRECORDED:
            continue
        src = None if producer == HOST else devices_of[producer]
        if src is d or (src is not None and src.name == d.name):
            continue
        key = (producer, tensor, d.name)
        if key in moved:
            continue
        moved.add(key)
        seconds += nbytes / (d.host_to_device_gb_per_s * 1e9)
        joules += 8 * nbytes * d.host_to_device_pj_per_bit * 1e-12
        if src is not None:
            seconds += nbytes / (src.device_to_host_gb_per_s * 1e9)
            joules += 8 * nbytes * src.device_to_host_pj_per_bit * 1e-12
    return seconds, joules

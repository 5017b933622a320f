"""OpTiming: the one formula for the time and energy of one op record on one device.

Everything that shows time or energy (the simulator, the decode fast path, the trace, the
roofline plot, the reports) reads it from here.

For an op o with dtype t placed on device d, under the runtime's and the parallel split's
`OpPlan` p (units: seconds, bytes, joules; docs/simulator.md has the whole model):

    work      = (sum over categories c of count_c(o) * weight_c(d)) * p.activation_share * p.share
                * p.work_share    (a causal flash-attention kernel's computed tiles, else 1)
    t_compute = work / (peak(d, t, kind(o)) * compute_efficiency(d, t, kind(o)) * shape_efficiency(d, o))
                kind is "matrix" when the op has MACs (matmul, conv, attention), else "vector";
                compute_efficiency: the profile's matrix_efficiency of t for a matrix op timed at
                t's matrix peak (fp8 and fp4 GEMMs reach less of theirs than bf16), its
                expert_matrix_efficiency of t instead for a GEMM of a routed-experts grouped
                kernel (p.grouped), for a fused attention op its attention_work_curve of t at
                the op's own work (`work_fraction`) or else its attention_efficiency of t,
                else its compute_efficiency;
                shape_efficiency: GEMM tiles and waves (dispatchprof.sim.kernels), else 1
    traffic   = ((activations - whole) * p.activation_share + param_bytes) * p.share
                + whole * p.activation_share
                activations = bytes_read + bytes_written - param_bytes - p.removed_bytes,
                whole = min(p.whole_bytes, activations): bytes every device of a tensor-parallel
                group reads whole (an input made whole inside a split block: MLA's latent)
    t_memory  = traffic / (memory_bandwidth(d) * memory_efficiency(d))
                (matrix ops: matrix_memory_efficiency where given; a profile with a last-level
                cache uses cache_bandwidth for ops whose traffic fits in it)
    t_busy    = max(t_compute, t_memory) + unoverlapped_fraction(d) * min(t_compute, t_memory)
                (the part of the shorter side the kernel does not hide under the longer; 0: roofline)
    t_op      = t_busy + overhead [if p.kernel] + t_transfer + t_comm
                overhead = launch_overhead(d), plus weight_only_kernel(d, weight dtype) for a
                matrix op reading weights stored in a weight-only dtype (``weight_dtype`` below)
    t_host    = eager host (`eager_host_us`: the measured model Python scaled to d's host, plus
                dispatch and launch; else host_overhead(d)) if p.host == "op";
                graph_launch(d) + p.sequences * sequence_host(d) if p.host == "graph"; else 0
    bound     = "compute" if t_compute >= t_memory else "memory"
    energy    = work * pj_per_flop(d, t, kind) + 8 * traffic * memory_pj_per_bit + e_transfer + e_comm
                + static_power * t_op

t_host is not part of t_op: it is the host's time to issue the op, placed on the host/device
timeline (dispatchprof.sim.timeline), where a kernel starts when it has been issued and the
device is free.

Collectives send ``comm_bytes`` to the other processes over the device's interconnect (its host
link without one): t_comm = comm_bytes / interconnect, e_comm = 8 * comm_bytes * its pJ/bit,
added to t_op and energy. Tensor parallelism over N devices (p.group = N) adds a ring all-reduce
of p.allreduce_bytes after the op: t = 2 (N-1)/N * bytes / (interconnect / 2) + latency(N), the
interconnect figure being the datasheet's both-directions total (a ring sends one way) and
latency(N) the profile's two-GPU latency grown by the ring's steps
(`dispatchprof.sim.links.ring_allreduce_latency_s`: + 2 (N-2) x interconnect_step_us).

A tensor read on device d that was produced on another device, or that comes from the host
(a model input: a tensor no counted op produced and that is not a parameter or buffer), is
first moved, once per tensor and destination: device -> host over the source's
device_to_host link, then host -> d over d's host_to_device link:

    t_transfer = bytes / device_to_host(src) + bytes / host_to_device(d)
    e_transfer = 8 * bytes * (device_to_host_pj_per_bit(src) + host_to_device_pj_per_bit(d))

A device whose profile has a ``pim`` mapping (a PIM system's units, ranks and per-unit rates) takes
t_compute and t_memory from `dispatchprof.sim.pim_timing.pim_op_times` instead (the work and
traffic above spread over the units the op's shape can use, at per-unit rates by op class and
dtype) and adds the exchange between units through the host that its layout needs to t_comm (and
its bytes at the host_to_device pJ/bit to the energy); without one, the roofline above holds unchanged.

Parameters and buffers live on the device their module is placed on. A profile's per-element
times (``ns_per_element``, the PIM model) replace t_compute of softmax ops, SiLU and fused
RMSNorm by ``ns * output elements``; for an RMSNorm written out of small ops (a module whose
class name ends in "RMSNorm"), the op that multiplies by the weight carries
``ns * output elements`` and the module's other ops no compute.

``weight_dtype`` ("int8", "int4", ...) assumes parameters stored in that dtype (a `Quantized`
one: those of the modules it does not keep, `dispatchprof.sim.quantization`): parameter bytes
read become elements * bits / 8, and ops that read parameters use the device's peak for that
dtype where its table lists one. A matrix op that reads parameters is a dequantising kernel: where
the profile's ``weight_only_efficiency`` lists the dtype, its t_memory is divided by it (such kernels
stream narrow weights more slowly than a plain GEMV streams bf16 ones), and where its
``weight_only_kernel_us`` lists the dtype, its kernel costs that much more fixed time (loading
scales, reducing split-K partial sums): a small weight matrix, such as a tensor-parallel slice,
reaches less of the bandwidth than a large one. Embedding lookups and norm weights are not.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from dispatchprof.results.records import HOST, UNRECORDED, OpRecord
from dispatchprof.sim.attention import is_attention
from dispatchprof.sim.device import WEIGHT_BITS, Device, dtype_key
from dispatchprof.sim.kernels import gemm_dims, shape_efficiency
from dispatchprof.sim.links import ring_allreduce_latency_s
from dispatchprof.sim.pim_timing import pim_op_times
from dispatchprof.sim.quantization import WeightDtype, weight_dtype_of

_SOFTMAX = frozenset({"aten._softmax", "aten._safe_softmax", "aten.softmax"})
_SILU = frozenset({"aten.silu", "aten.silu_"})
_RMS_NORM = frozenset({"aten._fused_rms_norm", "aten.rms_norm"})


@dataclass(frozen=True, slots=True)
class OpPlan:
    """What the runtime (dispatchprof.sim.runtime) and the tensor-parallel split
    (dispatchprof.sim.parallel) decided for one record; the default changes nothing."""

    removed_bytes: int = 0          # activation traffic the runtime removed (fusion, KV in place)
    kernel: bool = True             # launches its own kernel (False inside a fused chain)
    host: str = ""                  # "op": issued alone by the host; "graph": first op of a graph; "": none
    activation_share: float = 1.0   # share of work and activation traffic kept (last-position logits)
    share: float = 1.0              # this device's share of the op (tensor parallelism: 1/N or 1)
    allreduce_bytes: int = 0        # all-reduced after the op over the tensor-parallel group
    group: int = 1                  # tensor-parallel group size N
    sequences: int = 0              # sequences the host prepares for the step (serving; its "graph" op)
    work_share: float = 1.0         # share of the counted work computed (a causal flash kernel's tiles)
    whole_bytes: int = 0            # activation bytes read whole on every device, outside the share
                                    # (dispatchprof.sim.parallel: an input made whole in a split block)
    grouped: bool = False           # a GEMM of a routed-experts grouped kernel (dispatchprof.sim.runtime)


NO_PLAN = OpPlan()


@dataclass(frozen=True, slots=True)
class OpTiming:
    """Simulated cost of one op record (seconds, joules). ``time_s`` and ``energy_j`` compose
    the parts: this is the only place that says how."""

    record: int
    device: str
    t_compute: float
    t_memory: float
    t_transfer: float
    t_overhead: float
    dynamic_j: float                  # arithmetic, memory traffic, transfers and collectives
    static_power_w: float = 0.0       # the device's static power, drawn for time_s
    t_comm: float = 0.0               # sending comm_bytes to other processes
    work: float = 0.0                 # weighted operations (the compute term's numerator)
    traffic_bytes: float = 0.0        # bytes moved to and from memory (the memory term's numerator)
    t_host: float = 0.0               # the host's time to issue it (on the timeline, not in time_s)
    unoverlapped: float = 0.0         # the device's unoverlapped_fraction (busy_s)

    def parts(self) -> tuple[float, ...]:
        """The parts that time and energy are composed of (for the decode fast path's checks)."""
        return (self.t_compute, self.t_memory, self.t_overhead, self.t_transfer + self.t_comm, self.dynamic_j,
                self.static_power_w, self.t_host)

    @property
    def busy_s(self) -> float:
        """The kernel's own time: max(t_compute, t_memory) plus the unoverlapped share of the
        shorter of the two (the roofline time when that share is 0); elementwise for an op timed
        at several shapes (`time_op`)."""
        c, m = self.t_compute, self.t_memory
        if isinstance(c, np.ndarray) or isinstance(m, np.ndarray):
            return np.maximum(c, m) + self.unoverlapped * np.minimum(c, m)
        return max(c, m) + self.unoverlapped * min(c, m)

    @property
    def bound(self) -> str:
        return "compute" if self.t_compute >= self.t_memory else "memory"

    @property
    def time_s(self) -> float:
        return self.busy_s + self.t_overhead + self.t_transfer + self.t_comm

    @property
    def energy_j(self) -> float:
        return self.dynamic_j + self.static_power_w * self.time_s


def affine_sum(t0: OpTiming, t1: OpTiming, n: int) -> tuple[float, float, float, float]:
    """(device time, dynamic energy, compute-bound time, memory-bound time) summed over ``n``
    steps k = 0..n-1 whose every part moves on a line: part(k) = part(t0) + (part(t1) - part(t0)) * k.
    The busy time (`OpTiming.busy_s`) is split exactly where compute and memory cross; a step's
    busy time counts as compute-bound or memory-bound by its longer side, the unoverlapped share
    of the shorter side with it (the decode fast path; the steps' times on the host/device
    timeline come from dispatchprof.sim.timeline)."""

    def line(a: float, b: float, lo: int = 0, hi: int = n - 1) -> float:
        return _series(a, b - a, lo, hi)

    c0, c1, m0, m1 = t0.t_compute, t1.t_compute, t0.t_memory, t1.t_memory
    lo, hi = _compute_wins(c0, c1 - c0, m0, m1 - m0, n)
    c_won = line(c0, c1, lo, hi)                                       # steps where compute is longer
    m_won = line(m0, m1, 0, min(lo, n) - 1) + line(m0, m1, max(hi, -1) + 1, n - 1)   # the others
    u = t0.unoverlapped
    compute_side = c_won + u * (line(m0, m1) - m_won)  # steps where compute won: their memory is the shorter side
    memory_side = m_won + u * (line(c0, c1) - c_won)
    busy = compute_side + memory_side
    time = busy + line(t0.t_overhead, t1.t_overhead) + line(t0.t_transfer + t0.t_comm, t1.t_transfer + t1.t_comm)
    return time, line(t0.dynamic_j, t1.dynamic_j), compute_side, memory_side


def _series(v0: float, slope: float, lo: int, hi: int) -> float:
    """Sum of v0 + slope * k over k = lo..hi (0 when hi < lo); (lo + hi) * count is even."""
    if hi < lo:
        return 0.0
    count = hi - lo + 1
    return count * v0 + slope * ((lo + hi) * count // 2)


def _compute_wins(c0: float, cs: float, m0: float, ms: float, n: int) -> tuple[int, int]:
    """The steps k = lo..hi of 0..n-1 where c0 + cs*k >= m0 + ms*k (compute is the longer side):
    one range, since the difference is a line (lo > hi when there is none)."""
    d0, ds = c0 - m0, cs - ms
    if ds == 0:
        return (0, n - 1) if d0 >= 0 else (0, -1)
    root = -d0 / ds                                      # d(k) = 0
    if ds > 0:                                           # compute wins from ceil(root) on
        return max(0, math.ceil(root)), n - 1
    return 0, min(n - 1, math.floor(root))               # compute wins up to floor(root)


def time_op(i: int, r: OpRecord, devices_of: Sequence[Device], moved: set, weight_dtype: WeightDtype,
            in_rms_norm: bool, plan: OpPlan = NO_PLAN,
            moves: Sequence[tuple[int, Device | None]] | None = None) -> OpTiming:
    """The timing of record ``i`` (``r``) on ``devices_of[i]`` under ``plan`` (see the module
    docstring for every term); ``moved`` remembers the tensors already moved to each device
    (`moved_inputs`), unless ``moves`` gives the inputs to move.

    The same op at S shapes at once (dispatchprof.sim.vector): any number ``r`` carries (the cost's
    fields, param_bytes, param_elements, out_elements, the shapes' dimensions, a moved input's
    bytes) may be a numpy array of S values; every term that depends on it is then an array, by
    the same formulas. A choice between formulas that differs between the S shapes (an op with
    MACs at some shapes only) raises `ShapeDependent`."""
    d = devices_of[i]
    if moves is None:
        moves = moved_inputs(r, d, devices_of, moved)
    weight_dtype = weight_dtype_of(weight_dtype, r.scope)
    c = r.cost
    w = d.cost_weights
    work = (c.add + c.mult + c.div * w["div"] + c.sqrt * w["sqrt"] + c.exp * w["exp"]
            + c.cmp * w["cmp"] + c.other * w["other"]) * plan.activation_share * plan.share * plan.work_share
    key = dtype_key(r.dtype)
    params = r.param_bytes
    matrix = c.macs > 0 if not isinstance(c.macs, np.ndarray) else _positive(c.macs, r, "MACs")
    weights = weight_dtype is not None and _positive(r.param_elements, r, "parameter elements")
    if weights:
        params = r.param_elements * WEIGHT_BITS[weight_dtype] // 8
        table = d.matrix_tflops if matrix else d.vector_tflops
        if weight_dtype in table:
            key = weight_dtype
    efficiency = (compute_efficiency(d, key, matrix, plan.grouped, is_attention(r), work)
                  * _shape_efficiency(d, gemm_dims(r), plan.share))
    t_compute = work / (d.peak_flops(key, matrix) * efficiency)
    t_compute = _override(r, d, t_compute, in_rms_norm)
    activations = ((0 if c.bytes_read is None else c.bytes_read) + (0 if c.bytes_written is None else c.bytes_written)
                   - r.param_bytes - plan.removed_bytes)
    activations = np.maximum(0, activations) if isinstance(activations, np.ndarray) else max(0, activations)
    if plan.whole_bytes:
        whole = np.minimum(activations, plan.whole_bytes) if isinstance(activations, np.ndarray) \
            else min(activations, plan.whole_bytes)
        traffic = ((activations - whole) * plan.activation_share + params) * plan.share + whole * plan.activation_share
    else:
        traffic = (activations * plan.activation_share + params) * plan.share
    t_memory = traffic / d.bandwidth_for(traffic, matrix)
    overhead_us = d.launch_overhead_us
    if weights and matrix:                                            # a dequantising GEMM / GEMV
        if weight_dtype in d.weight_only_efficiency:
            t_memory /= d.weight_only_efficiency[weight_dtype]
        overhead_us += d.weight_only_kernel_us.get(weight_dtype, 0.0)
    t_transfer, e_transfer = _transfers(r, d, moves) if moves else (0.0, 0.0)
    t_comm, e_comm = _communication(c.comm_bytes, d)
    if d.pim is not None:                          # per-unit PIM timing (dispatchprof.sim.pim_timing)
        pim = pim_op_times(r, d, key, plan.activation_share * plan.share * plan.work_share, traffic)
        t_compute, t_memory = pim.t_compute, pim.t_memory
        t_comm += pim.t_exchange
        e_comm += 8 * pim.exchange_bytes * d.host_to_device_pj_per_bit * 1e-12
    t_reduce, e_reduce = allreduce(plan.allreduce_bytes, plan.group, d)
    dynamic = (work * d.flop_pj(key, matrix) + 8 * traffic * d.memory_pj_per_bit) * 1e-12 \
        + e_transfer + e_comm + e_reduce
    host = eager_host_us(r, d) if plan.host == "op" else 0.0
    if plan.host == "graph":
        host = graph_host_us(d, plan.sequences)
    return OpTiming(i, d.name, t_compute, t_memory, t_transfer, overhead_us * 1e-6 if plan.kernel else 0.0,
                    dynamic, d.static_power_w, t_comm + t_reduce, work, traffic, host * 1e-6,
                    d.unoverlapped_fraction)


class ShapeDependent(ValueError):
    """`time_op` of an op at several shapes: a choice between its formulas differs between them."""


def _positive(x, r: OpRecord, what: str) -> bool:
    """x > 0, for a number or for every value of an array (an array positive at some values only:
    `ShapeDependent`)."""
    if not isinstance(x, np.ndarray):
        return x > 0
    positive = x > 0
    if positive.all():
        return True
    if not positive.any():
        return False
    raise ShapeDependent(f"{r.op} in {r.scope or 'the root'}: its {what} are zero at some shapes only")


def _shape_efficiency(d: Device, dims, share: float):
    """`dispatchprof.sim.kernels.shape_efficiency`; dimensions given as arrays: the rule at each
    distinct (batch, M, N, K) among the shapes (few: a sweep's GEMMs repeat), spread back."""
    if dims is None:
        return 1.0
    if not _arrays(dims):
        return shape_efficiency(d, dims, share)
    columns = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in dims))
    distinct, where = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
    values = np.array([shape_efficiency(d, tuple(int(v) for v in row), share) for row in distinct])
    return values[where.reshape(-1)]


def _arrays(dims: tuple) -> bool:
    """Whether any of four dimensions is an array."""
    a, b, c, e = dims
    return isinstance(a, np.ndarray) or isinstance(b, np.ndarray) or isinstance(c, np.ndarray) \
        or isinstance(e, np.ndarray)


def moved_inputs(r: OpRecord, d: Device, devices_of: Sequence[Device], moved: set) -> list[tuple[int, Device | None]]:
    """The inputs of ``r`` to move to ``d`` before it runs, as (input index, source device or None
    for the host): those produced on another device or on the host, once per tensor and destination
    (``moved`` holds (producer, tensor, destination) of the moves made so far; updated)."""
    out = []
    for k, (producer, _, tensor) in enumerate(r.inputs):
        if producer == UNRECORDED:
            continue
        src = None if producer == HOST else devices_of[producer]
        if src is d or (src is not None and src.name == d.name):
            continue
        key = (producer, tensor, d.name)
        if key in moved:
            continue
        moved.add(key)
        out.append((k, src))
    return out


def compute_efficiency(d: Device, key: str, matrix: bool, grouped: bool = False, attention: bool = False,
                       work=None):
    """The fraction of the peak an op of dtype ``key`` reaches on ``d``, for a matrix op timed at
    that dtype's matrix peak: ``expert_matrix_efficiency[key]`` for one of a routed-experts grouped
    kernel (``grouped``); for a fused attention op (``attention``) of ``work`` FLOP on one device
    (a number or an array of them), ``attention_work_curve[key]`` at that work (`work_fraction`),
    else ``attention_efficiency[key]``; each where the profile gives it, else
    ``matrix_efficiency[key]`` where it gives that; every other op, and where none is given:
    ``compute_efficiency``."""
    if matrix and key in d.matrix_tflops:
        if grouped and key in d.expert_matrix_efficiency:
            return d.expert_matrix_efficiency[key]
        if attention and work is not None and key in d.attention_work_curve:
            return work_fraction(d.attention_work_curve[key], work)
        if attention and key in d.attention_efficiency:
            return d.attention_efficiency[key]
        if key in d.matrix_efficiency:
            return d.matrix_efficiency[key]
    return d.compute_efficiency


def work_fraction(points: tuple[tuple[float, float], ...], work):
    """The fraction of the peak at ``work`` FLOP (a number, or an array of them) on a work curve
    ``points`` ((GFLOP, fraction), ..., GFLOP rising): linear in log GFLOP between two points,
    the first point's fraction below it and the last's above it (work 0 included)."""
    gflop, fraction = _curve(points)
    at = np.interp(np.log(np.maximum(np.asarray(work, dtype=float) * 1e-9, 1e-300)), gflop, fraction)
    return at if isinstance(work, np.ndarray) else float(at)


@functools.lru_cache(maxsize=64)
def _curve(points: tuple[tuple[float, float], ...]) -> tuple[np.ndarray, np.ndarray]:
    """(log GFLOP, fraction) arrays of a work curve."""
    return np.log([g for g, _ in points]), np.array([f for _, f in points])


def eager_host_us(r: OpRecord, d: Device) -> float:
    """Host microseconds to issue record ``r`` alone (eager): with a measured host time (the record
    has host calls) and a host profile for ``d`` (`Device.host_profile`), the measured model Python
    scaled to that host plus dispatch and launch (dispatchprof.sim.hostprofile); otherwise the
    device's fixed host_overhead_us."""
    host = d.host_profile()
    if host is None:
        return d.host_overhead_us
    if not r.host_calls:
        warnings.warn(f"dispatchprof: no measured host time in this count (counted with host_time=False or saved "
                      f"by an older dispatchprof): eager host time on {d.name} falls back to the fixed "
                      f"{d.host_overhead_us:g} us per op; count again to measure it", stacklevel=2)
        return d.host_overhead_us
    return host.eager_host_s(r.host_loops, r.host_calls) * 1e6


def graph_host_us(d: Device, sequences: int) -> float:
    """Host microseconds of a step's graph launch on ``d`` carrying ``sequences`` sequences:
    graph_launch_us (the device's, or its explicitly set host's) + sequences x sequence_host_us
    (a serving engine's per-sequence work). The model's Python runs at capture, not per step."""
    launch = d.host.graph_launch_us if d.host is not None and d.host_measured else d.graph_launch_us
    return launch + sequences * d.sequence_host_us


def allreduce(nbytes: int, group: int, d: Device) -> tuple[float, float]:
    """(seconds, joules) of a ring all-reduce of ``nbytes`` over ``group`` devices like ``d``:
    each sends 2 (N-1)/N * bytes one way over the interconnect (half the datasheet's
    both-directions figure), plus the two-GPU interconnect latency grown by the ring's steps
    (`ring_allreduce_latency_s`)."""
    if not nbytes or group <= 1:
        return 0.0, 0.0
    if d.interconnect_gb_per_s is None:
        raise ValueError(f"tensor parallelism needs an interconnect figure; device {d.name!r} has no "
                         f"interconnect_gb_per_s")
    sent = 2 * (group - 1) / group * nbytes
    pj = _interconnect_pj_per_bit(d)
    return sent / (d.interconnect_gb_per_s / 2 * 1e9) + ring_allreduce_latency_s(d, group), 8 * sent * pj * 1e-12


def _communication(nbytes: int, d: Device) -> tuple[float, float]:
    """Collectives: bytes sent over the interconnect, or over the host link without one."""
    if not isinstance(nbytes, np.ndarray) and not nbytes:
        return 0.0, 0.0
    if d.interconnect_gb_per_s is not None:
        pj = _interconnect_pj_per_bit(d)
        return nbytes / (d.interconnect_gb_per_s * 1e9), 8 * nbytes * pj * 1e-12
    return nbytes / (d.device_to_host_gb_per_s * 1e9), 8 * nbytes * d.device_to_host_pj_per_bit * 1e-12


def _interconnect_pj_per_bit(d: Device) -> float:
    """Energy per bit over the interconnect: its own figure, else the device-to-host link's."""
    return d.interconnect_pj_per_bit if d.interconnect_pj_per_bit is not None else d.device_to_host_pj_per_bit


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
        return ns["rms_norm"] * r.out_elements * 1e-9 if _positive(r.param_elements, r, "parameter elements") \
            else 0.0
    return t_compute


def _transfers(r: OpRecord, d: Device, moves: Sequence[tuple[int, Device | None]]) -> tuple[float, float]:
    """(seconds, joules) of moving the inputs ``moves`` of ``r`` to ``d``: device -> host over the
    source's link (not for a host tensor), host -> d over d's."""
    seconds = joules = 0.0
    for k, src in moves:
        nbytes = r.inputs[k][1]
        seconds += nbytes / (d.host_to_device_gb_per_s * 1e9)
        joules += 8 * nbytes * d.host_to_device_pj_per_bit * 1e-12
        if src is not None:
            seconds += nbytes / (src.device_to_host_gb_per_s * 1e9)
            joules += 8 * nbytes * src.device_to_host_pj_per_bit * 1e-12
    return seconds, joules

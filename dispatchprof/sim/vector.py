"""The simulator over many shapes at once: one op stream whose numbers are arrays over S shapes.

A shape-generic profile (dispatchprof.count.generic) runs the same records for every shape of its
region; only the numbers change. `simulate_shapes` times such a stream at S shapes in one pass:
every record's numbers (counts, bytes, tensor dimensions) are numpy arrays of length S, every
term of `dispatchprof.sim.timing.time_op` is computed on those arrays, and each step's time on
the host/device timeline (dispatchprof.sim.timeline) is the same recurrence over the records,
on arrays:

    issued_i = issued_{i-1} + h_i      start_i = max(issued_i, end_{i-1})      end_i = start_i + d_i

Between two records where the host may be the later one (a scalar bound on the device's end says
where it cannot), the device times are added by group: n records of one group as n x its time.
The formulas are time_op's, term by term (its docstring states them); tests/test_vector_sim.py
checks that every step time and energy equals the scalar simulator's on evaluated profiles to
1e-9 relative. Records whose numbers are the same polynomials (the layers of a transformer) are
timed once.

What it covers: the eager runtime, no tensor parallelism, the KV cache in the model's dtype,
roofline devices (with or without GEMM tiles, a last-level cache, per-element times, weight-only
dtypes, host profiles) and the bound. Anything else (compiled or serving runtimes, whose fusion
removes shape-dependent bytes; tp > 1; a narrow KV cache; a device with a ``pim`` mapping; a
record whose matrix/vector kind or weight-only path changes with the shape; a measured host time
that is not the same at every shape) raises `VectorUnsupported` naming it, and the caller
simulates each shape with `dispatchprof.sim.simulate.simulate`.

Units: seconds, joules, bytes, as in time_op.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from dispatchprof.results.profile import Profile
from dispatchprof.results.records import COUNT_FIELDS, HOST, UNRECORDED, OpRecord
from dispatchprof.sim.device import WEIGHT_BITS, Device, dtype_key
from dispatchprof.sim.kernels import GEMM_OPS
from dispatchprof.sim.placement import Placement
from dispatchprof.sim.timing import eager_host_us

#: time_op's categories and their cost weight names (ADD and MULT weigh 1).
_WEIGHTED = (("div", "div"), ("sqrt", "sqrt"), ("exp", "exp"), ("cmp", "cmp"), ("other", "other"))
_SOFTMAX = frozenset({"aten._softmax", "aten._safe_softmax", "aten.softmax"})
_SILU = frozenset({"aten.silu", "aten.silu_"})
_RMS_NORM = frozenset({"aten._fused_rms_norm", "aten.rms_norm"})


class VectorUnsupported(ValueError):
    """The stream or the options need the scalar simulator (the module docstring lists why)."""


class ValueSource(Protocol):
    """The numbers of a shape-generic stream at S shapes, by value index (the layout's rows)."""

    count: int                              # S, the number of shapes

    def rows(self, index: Sequence[int]) -> Sequence[np.ndarray]:
        """Values ``index`` at every shape: one float64 array of S values per row (read only)."""

    def key(self, row: int) -> object:
        """Equal for two rows that are the same function of the shape."""

    def constant(self, row: int) -> int | None:
        """The value of ``row`` when it is the same at every shape, else None."""


@dataclass(frozen=True)
class RecordRows:
    """Where one record's numbers lie among a `ValueSource`'s rows (None: the field is None)."""

    cost: tuple[int | None, ...]            # one per COUNT_FIELDS
    param_bytes: int
    param_elements: int
    out_elements: int
    host_calls: int
    shapes: tuple[tuple[int, ...], ...]
    inputs: tuple[int, ...]                 # bytes of each input


@dataclass(frozen=True)
class StepArrays:
    """One step at every shape: its time on the host/device timeline and its ops' dynamic energy
    (static energy = the placement's static power x time)."""

    time_s: np.ndarray
    dynamic_j: np.ndarray


def check_vectorisable(placement: Placement, runtime: str, tp: int, kv_dtype: str | None) -> None:
    """Raise `VectorUnsupported` for options the vector simulator does not cover."""
    if runtime != "eager":
        raise VectorUnsupported(f"runtime {runtime!r}: its fusion removes shape-dependent bytes (eager only)")
    if tp != 1:
        raise VectorUnsupported(f"tp={tp}: the tensor-parallel all-reduce bytes depend on the shape (tp=1 only)")
    if kv_dtype is not None:
        raise VectorUnsupported(f"kv_dtype={kv_dtype!r}: the narrowed cache bytes depend on the shape")
    pim = [d.name for d in placement.devices if d.pim is not None]
    if pim:
        raise VectorUnsupported(f"device {pim[0]!r} is timed per PIM unit (dispatchprof.sim.pim_timing)")


def simulate_shapes(template: Profile, layout: Sequence[RecordRows], source: ValueSource, placement: Placement,
                    steps: Sequence[tuple[int, int]], *, weight_dtype: str | None = None, bound: bool = False,
                    runtime: str = "eager", tp: int = 1, kv_dtype: str | None = None,
                    memo: dict | None = None) -> list[StepArrays]:
    """Each step [a, b) of ``template``'s records (``steps``; the profile's other records are not
    timed, but their outputs' places count for transfers) at every shape of ``source``, as
    `simulate` gives it with step_starts at every a (module docstring). ``memo``: a dict the
    caller keeps between calls with the same template, layout, placement and options (sources
    of other shapes of the same fit): what does not depend on the shapes is worked out once."""
    if bound:
        placement = placement.as_bound()
    check_vectorisable(placement, runtime, tp, kv_dtype)
    if weight_dtype is not None and weight_dtype not in WEIGHT_BITS:
        raise ValueError(f"weight_dtype must be one of {tuple(WEIGHT_BITS)}, got {weight_dtype!r}")
    records = template.records
    memo = {} if memo is None else memo
    if "plan" not in memo:
        memo["plan"] = _plan(template, layout, source, placement)
    devices_of, keys, host, moves, in_rms = memo["plan"]
    timed: dict[object, tuple[np.ndarray, np.ndarray, float]] = {}
    first = {keys[i]: i for a, b in steps for i in range(b - 1, a - 1, -1)}
    source.rows([x for i in first.values() for x in _rows_of(layout[i])])      # all at once (one product)
    out = []
    for a, b in steps:
        end = np.zeros(source.count)
        dynamic = np.zeros(source.count)
        uses: dict[object, int] = {}
        pending: dict[object, int] = {}          # device times added since the last max, by group
        issued = floor = 0.0                      # floor: end's smallest value at any shape, or less
        for i in range(a, b):
            key = keys[i]
            if key not in timed:
                t, e = _time_record(records[i], layout[i], source, devices_of[i], devices_of, weight_dtype,
                                    in_rms[i], moves.get(i, ()))
                timed[key] = t, e, float(t.min(initial=0.0))
            uses[key] = uses.get(key, 0) + 1
            issued += host[i]
            if issued > floor:                    # the host issues later than the device frees at some shape
                _add(end, pending, timed)
                np.maximum(end, issued, out=end)
                floor = issued
            pending[key] = pending.get(key, 0) + 1
            floor += timed[key][2]
        _add(end, pending, timed)
        for key, n in uses.items():
            dynamic += n * timed[key][1]
        out.append(StepArrays(end, dynamic))
    return out


def _add(end: np.ndarray, pending: dict[object, int], timed: dict) -> None:
    """end += the device times of the records in ``pending`` (n records of a group: n x its time)."""
    for key, n in pending.items():
        end += timed[key][0] if n == 1 else n * timed[key][0]
    pending.clear()


def _rows_of(rows: RecordRows) -> list[int]:
    """Every row a record's timing reads."""
    return [x for x in (*rows.cost, rows.param_bytes, rows.param_elements, rows.out_elements, *rows.inputs)
            if x is not None] + [x for s in rows.shapes for x in s]


def _plan(template: Profile, layout: Sequence[RecordRows], source: ValueSource, placement: Placement) -> tuple:
    """What does not depend on the shapes: each record's device, timing group key, host seconds,
    moved inputs and whether it sits in an RMSNorm module."""
    records = template.records
    module_type = {s.name: s.module_type for s in template.scopes}
    devices_of = [placement.device_for(r.scope) for r in records]
    moves = _moves(records, devices_of)
    in_rms = [module_type.get(r.scope, "").endswith("RMSNorm") for r in records]
    keys = [_group_key(r, layout[i], source, devices_of[i], in_rms[i], moves.get(i, ())) for i, r in enumerate(records)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # the scalar simulator warns about it
        host = [_host_s(r, layout[i], source, devices_of[i]) for i, r in enumerate(records)]
    return devices_of, keys, host, moves, in_rms


def _moves(records: Sequence[OpRecord], devices_of: list[Device]) -> dict[int, tuple[tuple[int, Device | None], ...]]:
    """Per record, the inputs moved to its device (index of the input, source device or None for
    the host): time_op's rule, once per tensor and destination, in record order."""
    moved: set[tuple[int, int, str]] = set()
    out: dict[int, tuple[tuple[int, Device | None], ...]] = {}
    for i, r in enumerate(records):
        d, here = devices_of[i], []
        for k, (producer, _, tensor) in enumerate(r.inputs):
            if producer == UNRECORDED:
                continue
            src = None if producer == HOST else devices_of[producer]
            if src is d or (src is not None and src.name == d.name) or (producer, tensor, d.name) in moved:
                continue
            moved.add((producer, tensor, d.name))
            here.append((k, src))
        if here:
            out[i] = tuple(here)
    return out


def _group_key(r: OpRecord, rows: RecordRows, source: ValueSource, d: Device, in_rms: bool, moves) -> object:
    """Records with equal keys have equal timings at every shape."""
    def k(row: int | None) -> object:
        return None if row is None else source.key(row)

    return (r.op, r.dtype, r.phase, in_rms, d.name, tuple(k(x) for x in rows.cost), k(rows.param_bytes),
            k(rows.param_elements), k(rows.out_elements), tuple(tuple(k(x) for x in s) for s in rows.shapes),
            tuple((k(rows.inputs[i]), None if s is None else s.name) for i, s in moves))


def _host_s(r: OpRecord, rows: RecordRows, source: ValueSource, d: Device) -> float:
    """time_op's eager host time (the plan of every eager record is host "op"), in seconds."""
    calls = source.constant(rows.host_calls)
    if calls is None:
        raise VectorUnsupported(f"{r.op} in {r.scope or 'the root'}: its measured host calls change with the shape")
    return eager_host_us(_with_calls(r, calls), d) * 1e-6


def _with_calls(r: OpRecord, calls: int) -> OpRecord:
    return r if r.host_calls == calls else dataclasses.replace(r, host_calls=calls)


def _time_record(r: OpRecord, rows: RecordRows, source: ValueSource, d: Device, devices_of: list[Device],
                 weight_dtype: str | None, in_rms: bool, moves) -> tuple[np.ndarray, np.ndarray]:
    """(time_s, dynamic_j) of record ``r`` on ``d`` at every shape: time_op's terms on arrays."""
    field_rows = [x for x in rows.cost if x is not None]
    values = dict(zip(field_rows, source.rows(field_rows))) if field_rows else {}
    width = source.count
    zero = np.zeros(width)
    c = {f: (zero if x is None else values[x]) for f, x in zip(COUNT_FIELDS, rows.cost)}
    w = d.cost_weights
    work = c["add"] + c["mult"]
    for field, weight in _WEIGHTED:
        work = work + c[field] * w[weight]
    matrix = _constant_truth(r, "MACs", c["macs"])
    key = dtype_key(r.dtype)
    param_bytes = source.rows([rows.param_bytes])[0]
    params = param_bytes
    element_counts = source.rows([rows.param_elements])[0]
    elements = _constant_truth(r, "parameter elements", element_counts)
    if weight_dtype is not None and elements:
        params = np.floor(element_counts * WEIGHT_BITS[weight_dtype] / 8)
        if weight_dtype in (d.matrix_tflops if matrix else d.vector_tflops):
            key = weight_dtype
    efficiency = d.compute_efficiency * shape_efficiency_array(d, _gemm_dims(r, rows, source, width))
    t_compute = work / (d.peak_flops(key, matrix) * efficiency)
    t_compute = _override(r, rows, source, d, t_compute, in_rms, elements)
    activations = np.maximum(0, c["bytes_read"] + c["bytes_written"] - param_bytes)
    traffic = activations + params
    t_memory = traffic / _bandwidth(d, traffic, matrix)
    overhead_us = d.launch_overhead_us
    if weight_dtype is not None and elements and matrix:
        if weight_dtype in d.weight_only_efficiency:
            t_memory = t_memory / d.weight_only_efficiency[weight_dtype]
        overhead_us += d.weight_only_kernel_us.get(weight_dtype, 0.0)
    t_transfer, e_transfer = _transfers(rows, source, d, moves, width)
    t_comm, e_comm = _communication(c["comm_bytes"], d)
    dynamic = (work * d.flop_pj(key, matrix) + 8 * traffic * d.memory_pj_per_bit) * 1e-12 + e_transfer + e_comm
    busy = np.maximum(t_compute, t_memory) + d.unoverlapped_fraction * np.minimum(t_compute, t_memory)
    return busy + overhead_us * 1e-6 + t_transfer + t_comm, dynamic


def _constant_truth(r: OpRecord, what: str, values: np.ndarray) -> bool:
    """Whether ``values`` are nonzero, the same answer at every shape (else unsupported)."""
    nonzero = values != 0
    if nonzero.all():
        return True
    if not nonzero.any():
        return False
    raise VectorUnsupported(f"{r.op} in {r.scope or 'the root'}: its {what} are zero at some shapes only")


def _gemm_dims(r: OpRecord, rows: RecordRows, source: ValueSource, width: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """`dispatchprof.sim.kernels.gemm_dims` on arrays: (batch, M, N, K) or None."""
    if r.op not in GEMM_OPS:
        return None
    shapes = rows.shapes[1:] if r.op in ("aten.addmm", "aten.baddbmm") else rows.shapes
    if len(shapes) < 2:
        return None
    a, b = shapes[0], shapes[1]
    if len(a) == 2 and len(b) == 2:
        m, k, n = source.rows([a[0], a[1], b[1]])
        return np.ones(width), m, n, k
    if len(a) == 3 and len(b) == 3:
        batch, m, k, n = source.rows([a[0], a[1], a[2], b[2]])
        return batch, m, n, k
    return None


def shape_efficiency_array(d: Device, dims) -> np.ndarray | float:
    """`dispatchprof.sim.kernels.shape_efficiency` (share 1) on arrays of (batch, M, N, K)."""
    if dims is None or d.compute_units is None or d.gemm_tile is None:
        return 1.0
    batch, m, n, k = (np.asarray(x, dtype=np.float64) for x in dims)
    n = np.maximum(1.0, np.ceil(n))
    valid = np.minimum(np.minimum(batch, m), np.minimum(n, k)) > 0
    m1 = np.where(valid, m, 1.0)
    tile_m, tile_n = d.gemm_tile
    pow2 = np.exp2(np.ceil(np.log2(np.maximum(m1, 1.0))))          # 1 << (m - 1).bit_length() for m >= 1
    pow2 = _fix_pow2(m1, pow2)
    tm = np.minimum(tile_m, np.maximum(16.0, pow2))
    rows, cols = np.ceil(m1 / tm), np.ceil(np.where(valid, n, 1.0) / tile_n)
    tiles = np.where(valid, batch, 1.0) * rows * cols
    units = d.compute_units
    split = np.maximum(1.0, np.minimum(np.floor(units / tiles), np.floor(np.where(valid, k, 0.0) / 512)))
    tile_util = m1 * np.where(valid, n, 1.0) / (rows * tm * cols * tile_n)
    work_units = tiles * split
    wave_util = work_units / (np.ceil(work_units / units) * units)
    return np.where(valid, tile_util * wave_util, 1.0)


def _fix_pow2(m: np.ndarray, pow2: np.ndarray) -> np.ndarray:
    """The smallest power of two >= m, exactly (log2 of a float can round across a power)."""
    pow2 = np.where(pow2 < m, pow2 * 2, pow2)
    return np.where((pow2 / 2 >= m) & (pow2 > 1), pow2 / 2, pow2)


def _override(r: OpRecord, rows: RecordRows, source: ValueSource, d: Device, t_compute, in_rms: bool,
              elements: bool):
    """time_op's per-element compute times (``ns_per_element``)."""
    ns = d.ns_per_element
    if not ns:
        return t_compute
    name = None
    if r.op in _SOFTMAX and "softmax" in ns:
        name = "softmax"
    elif r.op in _SILU and "silu" in ns:
        name = "silu"
    elif r.op in _RMS_NORM and "rms_norm" in ns:
        name = "rms_norm"
    elif in_rms and "rms_norm" in ns and r.phase != "backward":
        if not elements:
            return np.zeros_like(t_compute)
        name = "rms_norm"
    if name is None:
        return t_compute
    return ns[name] * source.rows([rows.out_elements])[0] * 1e-9


def _bandwidth(d: Device, traffic: np.ndarray, matrix: bool) -> np.ndarray:
    """`Device.bandwidth_for` on an array of traffic."""
    eff = d.matrix_memory_efficiency if matrix and d.matrix_memory_efficiency else d.memory_efficiency
    memory = d.memory_bandwidth_gb_per_s * 1e9 * eff
    if d.cache_capacity_mb is None or d.cache_bandwidth_gb_per_s is None:
        return np.full(traffic.shape, memory)
    return np.where(traffic <= d.cache_capacity_mb * 1e6, d.cache_bandwidth_gb_per_s * 1e9 * eff, memory)


def _transfers(rows: RecordRows, source: ValueSource, d: Device, moves, width: int):
    """time_op's transfers of the inputs `_moves` found, on arrays."""
    seconds = np.zeros(width)
    joules = np.zeros(width)
    for k, src in moves:
        nbytes = source.rows([rows.inputs[k]])[0]
        seconds = seconds + nbytes / (d.host_to_device_gb_per_s * 1e9)
        joules = joules + 8 * nbytes * d.host_to_device_pj_per_bit * 1e-12
        if src is not None:
            seconds = seconds + nbytes / (src.device_to_host_gb_per_s * 1e9)
            joules = joules + 8 * nbytes * src.device_to_host_pj_per_bit * 1e-12
    return seconds, joules


def _communication(nbytes: np.ndarray, d: Device):
    """time_op's collectives (bytes sent over the interconnect, or the host link without one)."""
    if d.interconnect_gb_per_s is not None:
        pj = d.interconnect_pj_per_bit if d.interconnect_pj_per_bit is not None else d.device_to_host_pj_per_bit
        return nbytes / (d.interconnect_gb_per_s * 1e9), 8 * nbytes * pj * 1e-12
    return nbytes / (d.device_to_host_gb_per_s * 1e9), 8 * nbytes * d.device_to_host_pj_per_bit * 1e-12


__all__ = ["RecordRows", "StepArrays", "ValueSource", "VectorUnsupported", "check_vectorisable",
           "shape_efficiency_array", "simulate_shapes"]

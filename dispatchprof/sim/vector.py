"""The simulator over many shapes at once: one op stream whose numbers are arrays over S shapes.

A shape-generic profile (dispatchprof.count.generic) runs the same records for every shape of its
region; only the numbers change. `simulate_shapes` times such a stream at S shapes in one pass:
each record is timed by the scalar simulator's own formula, `dispatchprof.sim.timing.time_op`,
called once with the record's numbers (counts, bytes, tensor dimensions) as numpy arrays of S
values (a number the same at all S shapes stays an integer), and each step's time on the
host/device timeline (dispatchprof.sim.timeline) is the same recurrence over the records, on
arrays:

    issued_i = issued_{i-1} + h_i      start_i = max(issued_i, end_{i-1})      end_i = start_i + d_i

Between two records where the host may be the later one (a scalar bound on the device's end says
where it cannot), the device times are added by group: n records of one group as n x its time.
Records whose numbers are the same polynomials (the layers of a transformer) are timed once.
tests/test_vector_sim.py checks that every step time and energy equals the scalar simulator's on
evaluated profiles to 1e-9 relative (the sums run in another order).

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
from dispatchprof.results.records import COUNT_FIELDS, OpRecord
from dispatchprof.sim.device import Device
from dispatchprof.sim.placement import Placement
from dispatchprof.sim.quantization import check_weight_dtype
from dispatchprof.sim.timing import ShapeDependent, eager_host_us, moved_inputs, time_op
from op_formulas.cost import Cost


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
        """The value of ``row`` when it is the same at every shape of the fit, else None."""

    def fixed(self, row: int) -> int | None:
        """The value of ``row`` when it is the same at every one of these S shapes, else None."""


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
    check_weight_dtype(weight_dtype)
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
                t, e = _time_record(records[i], layout[i], source, devices_of[i], weight_dtype, in_rms[i],
                                    moves.get(i, ()))
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
    """Per record, the inputs moved to its device (`dispatchprof.sim.timing.moved_inputs`, in
    record order as `simulate` calls it)."""
    moved: set = set()
    out: dict[int, tuple[tuple[int, Device | None], ...]] = {}
    for i, r in enumerate(records):
        here = moved_inputs(r, devices_of[i], devices_of, moved)
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


def _time_record(r: OpRecord, rows: RecordRows, source: ValueSource, d: Device, weight_dtype: str | None,
                 in_rms: bool, moves) -> tuple[np.ndarray, np.ndarray]:
    """(time_s, dynamic_j) of record ``r`` on ``d`` at every shape: `time_op` of the record whose
    numbers are arrays over the shapes (numbers the same at every shape stay integers)."""
    try:
        t = time_op(0, _at_shapes(r, rows, source, [k for k, _ in moves]), [d], set(), weight_dtype, in_rms,
                    moves=moves)
    except ShapeDependent as e:
        raise VectorUnsupported(str(e)) from None
    zero = np.zeros(source.count)
    return zero + t.time_s, zero + t.dynamic_j


def _at_shapes(r: OpRecord, rows: RecordRows, source: ValueSource, moved: Sequence[int]) -> OpRecord:
    """``r`` with every number time_op reads taken from ``source``: an integer where it is the same
    at every one of its shapes, else the array of its values (the bytes of the inputs in ``moved`` only)."""
    def value(row: int | None):
        if row is None:
            return None
        fixed = source.fixed(row)
        return fixed if fixed is not None else source.rows([row])[0]

    inputs = list(r.inputs)
    for k in moved:
        producer, _, tensor = inputs[k]
        inputs[k] = (producer, value(rows.inputs[k]), tensor)
    return dataclasses.replace(
        r, cost=Cost(**{f: value(x) for f, x in zip(COUNT_FIELDS, rows.cost)}), inputs=tuple(inputs),
        param_bytes=value(rows.param_bytes), param_elements=value(rows.param_elements),
        out_elements=value(rows.out_elements), shapes=tuple(tuple(value(x) for x in s) for s in rows.shapes))


__all__ = ["RecordRows", "StepArrays", "ValueSource", "VectorUnsupported", "check_vectorisable", "simulate_shapes"]

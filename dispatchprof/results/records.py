"""The frozen records of a count: one `OpRecord` per counted op call, `Totals` over a set of
them, module `Scope`s and `UnknownOp`s, and the one definition of the count fields.

Units are raw: element operations, bytes, elements. FLOPs = ADD + MULT; OPS = all seven
categories; MACs count contractions only (docs/counting.md).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Iterable

from op_formulas.cost import CATEGORIES, Cost, Counts

#: Phase labels: forward and backward passes, generation steps, optimizer steps.
PHASES = ("forward", "backward", "prefill", "decode", "optimizer")
#: The count fields of a `Cost`, in order: the seven categories, MACs, bytes, bytes sent.
COUNT_FIELDS = tuple(f.name for f in fields(Cost))
#: A Cost's COUNT_FIELDS values, in that order, as a tuple (None where not counted).
counts_of = attrgetter(*COUNT_FIELDS)
#: Columns of a totals row in files and tables: calls, categories, FLOPs, MACs, bytes.
TOTAL_COLUMNS = ("calls", *CATEGORIES, "flops", "macs", "bytes_read", "bytes_written")
#: Producer of an input that no counted op made and that is not a parameter: the host.
HOST = -1
#: Producer of an input written last by an op with no record (zero-cost or unknown ops).
UNRECORDED = -2
#: Profile.host_timing: "measured" (records carry host times), "off" (counted without), "" (unknown: old file).
HOST_TIMINGS = ("measured", "off", "")


def check_phase(phase: str) -> None:
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One counted op call: what ran, where, in which phase, and what it cost."""

    op: str                 # overload packet, e.g. "aten.mm"
    scope: str              # module path, "" for the root
    phase: str              # one of PHASES
    dtype: str              # dtype of the first tensor input (or output)
    cost: Cost              # counts, MACs and resolved bytes
    causal: bool | None = None   # attention only: was the call causal
    inputs: tuple[tuple[int, int, int], ...] = ()   # (producer record, HOST or UNRECORDED; bytes; storage id)
    param_bytes: int = 0    # bytes of bytes_read that are parameters or buffers
    param_elements: int = 0
    out_elements: int = 0   # elements of the tensor outputs
    shapes: tuple[tuple[int, ...], ...] = ()   # shapes of the tensor arguments
    host_loops: float = 0.0  # the model's own host work before this op, counter excluded, in calibration-loop
                             # iterations: measured CPU time / Profile.host_loop_ns (dispatchprof.count.hostclock)
    host_calls: int = 0     # aten calls the host dispatched for this record (the views before it, and itself)


@dataclass(frozen=True, slots=True)
class Totals(Counts):
    """Summed counts of a set of op calls: every field of COUNT_FIELDS, and the calls; ``flops``
    (ADD + MULT) and ``ops`` (all seven categories) come from `Arithmetic`."""

    bytes_read: int = 0
    bytes_written: int = 0
    calls: int = 0
    comm_bytes: int = 0       # bytes sent to other processes (collectives)

    @property
    def bytes(self) -> int:
        """bytes_read + bytes_written."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity: OPS per byte of traffic (0 with no traffic)."""
        return self.ops / self.bytes if self.bytes else 0.0

    def __add__(self, other: Totals) -> Totals:
        return Totals(*(getattr(self, f) + getattr(other, f) for f in TOTALS_FIELDS))


TOTALS_FIELDS = tuple(f.name for f in fields(Totals))
assert set(TOTALS_FIELDS) == {*COUNT_FIELDS, "calls"}, "Totals holds every count field, and the calls"


def totals_of(counts: Iterable[int], calls: int) -> Totals:
    """Totals from values in COUNT_FIELDS order and a number of calls."""
    return Totals(calls=calls, **dict(zip(COUNT_FIELDS, counts)))


def sum_records(records: Iterable[OpRecord]) -> Totals:
    """Totals of ``records`` (bytes_* of None count as 0)."""
    acc = [0] * len(COUNT_FIELDS)
    calls = 0
    for r in records:
        for i, v in enumerate(counts_of(r.cost)):
            if v:
                acc[i] += v
        calls += 1
    return totals_of(acc, calls)


@dataclass(frozen=True, slots=True)
class Scope:
    """A module scope and its tensor quantities (docs/counting.md)."""

    name: str
    module_type: str
    parent: str | None
    calls: int
    params: int
    params_bytes: int
    params_self: int          # parameters it owns directly (a tied one: only its first scope)
    params_self_bytes: int
    buffers: int
    buffers_bytes: int
    act: int
    act_bytes: int
    cache: int
    peak_bytes: int
    latency_s: float = 0.0      # measured wall time of its forward calls, counting included

    @property
    def depth(self) -> int:
        return 0 if self.name == "" else self.name.count(".") + 1


@dataclass(frozen=True, slots=True)
class UnknownOp:
    """An op with no formula: kept, never dropped."""

    op: str
    calls: int
    scopes: tuple[str, ...]
    reason: str = "no formula registered"

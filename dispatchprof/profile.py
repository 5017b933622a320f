"""Frozen results of a count: op records, scopes, and the queries over them.

Units are raw: element operations, bytes, elements. FLOPs = ADD + MULT; OPS = all seven
categories; MACs count contractions only (COUNTING.md).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping

from op_formulas.cost import CATEGORIES, Cost

#: Phase labels: forward and backward passes, generation steps, optimizer steps.
PHASES = ("forward", "backward", "prefill", "decode", "optimizer")


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One counted op call: what ran, where, in which phase, and what it cost."""

    op: str                 # overload packet, e.g. "aten.mm"
    scope: str              # module path, "" for the root
    phase: str              # one of PHASES
    dtype: str              # dtype of the first tensor input (or output)
    cost: Cost              # counts, MACs and resolved bytes
    causal: bool | None = None   # attention only: was the call causal
    inputs: tuple[tuple[int, int, int], ...] = ()   # (producer record or HOST, bytes, storage id) per input
    param_bytes: int = 0    # bytes of bytes_read that are parameters or buffers
    param_elements: int = 0
    out_elements: int = 0   # elements of the tensor outputs
    shapes: tuple[tuple[int, ...], ...] = ()   # shapes of the tensor arguments


@dataclass(frozen=True, slots=True)
class Totals:
    """Summed counts of a set of op calls."""

    add: int = 0
    mult: int = 0
    div: int = 0
    sqrt: int = 0
    exp: int = 0
    cmp: int = 0
    other: int = 0
    macs: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    calls: int = 0
    comm_bytes: int = 0       # bytes sent to other processes (collectives)

    @property
    def flops(self) -> int:
        """ADD + MULT."""
        return self.add + self.mult

    @property
    def ops(self) -> int:
        """All seven arithmetic categories."""
        return sum(getattr(self, c) for c in CATEGORIES)

    @property
    def bytes(self) -> int:
        """bytes_read + bytes_written."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity: OPS per byte of traffic (0 with no traffic)."""
        return self.ops / self.bytes if self.bytes else 0.0

    def __add__(self, other: Totals) -> Totals:
        return Totals(*(getattr(self, f) + getattr(other, f) for f in _TOTAL_FIELDS))


_TOTAL_FIELDS = tuple(Totals.__dataclass_fields__)


def sum_records(records: Iterable[OpRecord]) -> Totals:
    acc = [0] * len(_TOTAL_FIELDS)
    for r in records:
        c = r.cost
        acc[0] += c.add; acc[1] += c.mult; acc[2] += c.div; acc[3] += c.sqrt  # noqa: E702
        acc[4] += c.exp; acc[5] += c.cmp; acc[6] += c.other; acc[7] += c.macs  # noqa: E702
        acc[8] += c.bytes_read or 0; acc[9] += c.bytes_written or 0; acc[10] += 1  # noqa: E702
        acc[11] += c.comm_bytes
    return Totals(*acc)


@dataclass(frozen=True, slots=True)
class Scope:
    """A module scope and its tensor quantities (COUNTING.md)."""

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
class ModuleStats:
    """One row of `Profile.by_module`: the scope plus self and inclusive totals."""

    scope: Scope
    self_totals: Totals
    inclusive: Totals


@dataclass(frozen=True, slots=True)
class OperatorStats:
    """One row of `Profile.by_operator`."""

    op: str
    state: str        # "counted", "zero-cost" or "unknown"
    totals: Totals


@dataclass(frozen=True, slots=True)
class UnknownOp:
    """An op with no formula: kept, never dropped."""

    op: str
    calls: int
    scopes: tuple[str, ...]
    reason: str = "no formula registered"


@dataclass(frozen=True)
class Profile:
    """Everything one count saw. Readable even when the counted code raised."""

    records: tuple[OpRecord, ...]
    scopes: tuple[Scope, ...]
    unknown: tuple[UnknownOp, ...] = ()
    zero_cost_calls: tuple[tuple[str, int], ...] = ()
    causal_rule: str = "full"
    peak_bytes: int = 0
    tensor_kind: str = ""       # "real", "fake" or "meta": what the counted tensors were
    phase_peaks: tuple[tuple[str, int], ...] = ()   # (phase, peak live bytes above the phase's start)
    phase_wall: tuple[tuple[str, float], ...] = ()  # (phase, measured wall seconds, counting included)

    def select(self, phase: str | None = None) -> tuple[OpRecord, ...]:
        if phase is None:
            return self.records
        check_phase(phase)
        return tuple(r for r in self.records if r.phase == phase)

    def total(self, phase: str | None = None) -> Totals:
        """Totals over every counted op (of one phase, if given)."""
        return sum_records(self.select(phase))

    def by_operator(self, phase: str | None = None) -> dict[str, OperatorStats]:
        """Per aten op packet, most OPS first; zero-cost and unknown ops with their calls."""
        groups: dict[str, list[OpRecord]] = defaultdict(list)
        for r in self.select(phase):
            groups[r.op].append(r)
        rows = {op: OperatorStats(op, "counted", sum_records(rs)) for op, rs in groups.items()}
        rows = dict(sorted(rows.items(), key=lambda kv: (-kv[1].totals.ops, -kv[1].totals.bytes, kv[0])))
        if phase is None:
            for op, calls in self.zero_cost_calls:
                rows[op] = OperatorStats(op, "zero-cost", Totals(calls=calls))
            for u in self.unknown:
                rows[u.op] = OperatorStats(u.op, "unknown", Totals(calls=u.calls))
        return rows

    def by_module(self, phase: str | None = None) -> dict[str, ModuleStats]:
        """Per module scope in call order: self totals (ops run directly in it) and inclusive
        totals (its subtree). Names match ``model.named_modules()``; the root is ``""``."""
        groups: dict[str, list[OpRecord]] = defaultdict(list)
        for r in self.select(phase):
            groups[r.scope].append(r)
        self_totals = {s.name: sum_records(groups.get(s.name, ())) for s in self.scopes}
        for name in groups:               # ops in scopes unknown to the tracker go to the root
            if name not in self_totals:
                self_totals[""] = self_totals.get("", Totals()) + sum_records(groups[name])
        inclusive = dict(self_totals)
        depth = tree_depths({s.name: s.parent for s in self.scopes})
        for s in sorted(self.scopes, key=lambda s: -depth[s.name]):
            if s.parent is not None and s.parent != s.name and s.parent in inclusive:
                inclusive[s.parent] = inclusive[s.parent] + inclusive[s.name]
        return {s.name: ModuleStats(s, self_totals[s.name], inclusive[s.name]) for s in self.scopes}

    def unknown_ops(self) -> list[UnknownOp]:
        """Ops that had no formula (name, calls, scopes)."""
        return list(self.unknown)

    def save(self, path: str) -> str:
        """Write this profile as lossless, versioned JSON (atomically)."""
        from dispatchprof.export import save_profile
        return save_profile(self, path)

    @staticmethod
    def load(path: str) -> Profile:
        """Read a profile written by `save`."""
        from dispatchprof.export import load_profile
        return load_profile(path)


def tree_depths(parent: Mapping[str, str | None]) -> dict[str, int]:
    """Depth of each scope along its parent links (the root is 0)."""
    depth: dict[str, int] = {}
    for name in parent:
        chain, n = [], name
        while n is not None and n not in depth and n not in chain:
            chain.append(n)
            p = parent.get(n)
            n = p if p != n else None
        base = depth.get(n, -1) if n is not None else -1
        for i, c in enumerate(reversed(chain)):
            depth[c] = base + 1 + i
    return depth


def check_phase(phase: str) -> None:
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")

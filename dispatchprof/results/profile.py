"""`Profile`: everything one count saw, frozen, with its queries and its file format.

The JSON form (``Profile.save`` / ``Profile.load``, ``to_dict`` / ``from_dict``) is lossless and
versioned: ``{"schema": "dispatchprof.profile", "version": 1, ...}`` with records as rows whose
columns are named in the file.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from dataclasses import astuple, dataclass, fields
from typing import Any, Mapping

from dispatchprof.results import frame
from dispatchprof.results.files import read_json, write_atomic
from dispatchprof.results.records import (
    HOST_TIMINGS, OpRecord, Scope, Totals, UnknownOp, check_phase, sum_records,
)
from dispatchprof.results.validate import check_profile_data
from op_formulas.cost import Cost

SCHEMA = "dispatchprof.profile"
VERSION = 1
_RECORD_FIELDS = [f.name for f in fields(OpRecord)]
_COST_FIELDS = [f.name for f in fields(Cost)]
_SCOPE_FIELDS = [f.name for f in fields(Scope)]


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
    #: "measured": records carry the host time of the model's code (OpRecord.host_loops, host_calls);
    #: "off": counted with host timing off; "": not known (a file from before host timing)
    host_timing: str = ""
    host_loop_ns: float = 0.0   # ns of one calibration-loop iteration on the counting machine (0: not measured)

    def host_seconds(self, host_loops: float) -> float:
        """Seconds that ``host_loops`` iterations took on the machine that counted."""
        return host_loops * self.host_loop_ns * 1e-9

    # --- queries ---------------------------------------------------------------------------
    def select(self, phase: str | None = None) -> tuple[OpRecord, ...]:
        if phase is None:
            return self.records
        check_phase(phase)
        return tuple(r for r in self.records if r.phase == phase)

    def total(self, phase: str | None = None) -> Totals:
        """Totals over every counted op (of one phase, if given)."""
        return sum_records(self.select(phase))

    def parents(self) -> dict[str, str | None]:
        """Scope name -> parent scope name (None for the root)."""
        return {s.name: s.parent for s in self.scopes}

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
        inclusive = roll_up(self_totals, self.parents())
        return {s.name: ModuleStats(s, self_totals[s.name], inclusive[s.name]) for s in self.scopes}

    def unknown_ops(self) -> list[UnknownOp]:
        """Ops that had no formula (name, calls, scopes)."""
        return list(self.unknown)

    def to_dataframe(self, by: str = "operator", phase: str | None = None) -> Any:
        """A pandas DataFrame in raw units, one row per "operator", "module" or "record"
        (dispatchprof.results.frame); needs ``pip install 'dispatchprof[pandas]'``."""
        return frame.profile_frame(self, by, phase)

    def _repr_html_(self) -> str:
        return frame.profile_html(self)

    # --- the file format -------------------------------------------------------------------
    def to_dict(self, meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """A JSON-ready dict holding everything (and ``meta``: who wrote it, e.g. the process
        index of a multi-process run)."""
        return {
            "schema": SCHEMA, "version": VERSION, "meta": meta or {},
            "causal_rule": self.causal_rule, "peak_bytes": self.peak_bytes,
            "tensor_kind": self.tensor_kind, "phase_peaks": [list(p) for p in self.phase_peaks],
            "phase_wall": [list(p) for p in self.phase_wall], "host_timing": self.host_timing,
            "host_loop_ns": self.host_loop_ns,
            "record_fields": _RECORD_FIELDS, "cost_fields": _COST_FIELDS,
            "records": [[*(_plain(getattr(r, f)) for f in _RECORD_FIELDS[:4]), list(astuple(r.cost)),
                         *(_plain(getattr(r, f)) for f in _RECORD_FIELDS[5:])] for r in self.records],
            "scope_fields": _SCOPE_FIELDS,
            "scopes": [list(astuple(s)) for s in self.scopes],
            "unknown": [[u.op, u.calls, list(u.scopes), u.reason] for u in self.unknown],
            "zero_cost_calls": [list(z) for z in self.zero_cost_calls],
        }

    @staticmethod
    def from_dict(data: Any, where: str = "profile") -> Profile:
        """The inverse of `to_dict`; checks the schema name and version, then every field
        (dispatchprof.results.validate)."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"{where}: not a dispatchprof profile (expected \"schema\": \"{SCHEMA}\")")
        version = data.get("version")
        if not isinstance(version, int) or version > VERSION or version < 1:
            raise ValueError(f"{where}: profile schema version {version!r} is not supported: this dispatchprof "
                             f"reads version {VERSION}; a newer version needs a newer dispatchprof")
        check_profile_data(data, where)
        try:
            records = tuple(
                OpRecord(r[0], r[1], r[2], r[3], Cost(*r[4]), *(_tuples(x) for x in r[5:]))
                for r in data["records"])
            scopes = tuple(Scope(*s) for s in data["scopes"])
            unknown = tuple(UnknownOp(u[0], u[1], tuple(u[2]), u[3]) for u in data["unknown"])
            zero = tuple((z[0], z[1]) for z in data["zero_cost_calls"])
            return Profile(records, scopes, unknown, zero, data["causal_rule"], data["peak_bytes"],
                           data["tensor_kind"], tuple((p[0], p[1]) for p in data["phase_peaks"]),
                           tuple((p[0], p[1]) for p in data["phase_wall"]), *_host_timing(data, where))
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"{where}: malformed profile ({type(e).__name__}: {e})") from None

    def save(self, path: str | os.PathLike, meta: dict[str, Any] | None = None) -> str:
        """Write this profile as lossless, versioned JSON (atomically)."""
        return write_atomic(path, json.dumps(self.to_dict(meta), separators=(",", ":")))

    @staticmethod
    def load(path: str | os.PathLike) -> Profile:
        """Read a profile written by `save`; a truncated file or a newer schema raises ValueError."""
        return Profile.from_dict(read_json(path, "profile"), os.fspath(path))


def _host_timing(data: dict, where: str) -> tuple[str, float]:
    """The file's host_timing and host_loop_ns ("" and 0 when absent: written before host timing);
    every host figure must be a finite number >= 0."""
    value = data.get("host_timing", "")
    if value not in HOST_TIMINGS:
        raise ValueError(f"{where}: host_timing must be one of {HOST_TIMINGS}, got {value!r}")
    loop_ns = data.get("host_loop_ns", 0.0)
    if not _finite(loop_ns):
        raise ValueError(f"{where}: host_loop_ns must be a finite number >= 0, got {loop_ns!r}")
    for name in ("host_loops", "host_calls"):
        at = _RECORD_FIELDS.index(name)
        for i, r in enumerate(data["records"]):
            if len(r) > at and not _finite(r[at]):
                raise ValueError(f"{where}: records[{i}].{name} must be a finite number >= 0, got {r[at]!r}")
    return value, float(loop_ns)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < math.inf


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def _tuples(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_tuples(x) for x in v)
    return v


def roll_up(own: Mapping[str, Any], parents: Mapping[str, str | None]) -> dict[str, Any]:
    """Inclusive values per scope: each scope's own value plus its subtree's, summed with ``+``
    (Totals, SimTotals, ...). Every key of ``own`` must be a scope of ``parents``."""
    inclusive = dict(own)
    depth = tree_depths(parents)
    for name in sorted(inclusive, key=lambda n: -depth.get(n, 0)):
        parent = parents.get(name)
        if parent is not None and parent != name and parent in inclusive:
            inclusive[parent] = inclusive[parent] + inclusive[name]
    return inclusive


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

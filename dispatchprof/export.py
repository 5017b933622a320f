"""Files: lossless JSON of a Profile (versioned), CSV of operators and of modules.

Every write goes to a temporary file in the destination folder and is renamed into place, so
a reader never sees a half-written file and an error leaves the old file untouched.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from dataclasses import astuple, fields
from typing import Any

from dispatchprof.profile import OpRecord, Profile, Scope, UnknownOp
from op_formulas.cost import Cost

SCHEMA = "dispatchprof.profile"
VERSION = 1
_RECORD_FIELDS = [f.name for f in fields(OpRecord)]
_COST_FIELDS = [f.name for f in fields(Cost)]
_SCOPE_FIELDS = [f.name for f in fields(Scope)]


def write_atomic(path: str | os.PathLike, data: str | bytes) -> str:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".dispatchprof-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


# --- JSON ------------------------------------------------------------------------------------
def profile_to_dict(profile: Profile, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-ready dict holding everything in ``profile`` (and ``meta``: who wrote it, e.g. the
    process index of a multi-process run)."""
    return {
        "schema": SCHEMA, "version": VERSION, "meta": meta or {},
        "causal_rule": profile.causal_rule, "peak_bytes": profile.peak_bytes,
        "tensor_kind": profile.tensor_kind, "phase_peaks": [list(p) for p in profile.phase_peaks],
        "phase_wall": [list(p) for p in profile.phase_wall],
        "record_fields": _RECORD_FIELDS, "cost_fields": _COST_FIELDS,
        "records": [[*(_plain(getattr(r, f)) for f in _RECORD_FIELDS[:4]), list(astuple(r.cost)),
                     *(_plain(getattr(r, f)) for f in _RECORD_FIELDS[5:])] for r in profile.records],
        "scope_fields": _SCOPE_FIELDS,
        "scopes": [list(astuple(s)) for s in profile.scopes],
        "unknown": [[u.op, u.calls, list(u.scopes), u.reason] for u in profile.unknown],
        "zero_cost_calls": [list(z) for z in profile.zero_cost_calls],
    }


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def _tuples(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_tuples(x) for x in v)
    return v


def profile_from_dict(data: Any, where: str = "profile") -> Profile:
    """The inverse of `profile_to_dict`; checks the schema name and version."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"{where}: not a dispatchprof profile (expected \"schema\": \"{SCHEMA}\")")
    version = data.get("version")
    if not isinstance(version, int) or version > VERSION or version < 1:
        raise ValueError(f"{where}: profile schema version {version!r} is not supported: this dispatchprof "
                         f"reads version {VERSION}; a newer version needs a newer dispatchprof")
    try:
        records = tuple(
            OpRecord(r[0], r[1], r[2], r[3], Cost(*r[4]), *(_tuples(x) for x in r[5:]))
            for r in data["records"])
        scopes = tuple(Scope(*s) for s in data["scopes"])
        unknown = tuple(UnknownOp(u[0], u[1], tuple(u[2]), u[3]) for u in data["unknown"])
        zero = tuple((z[0], z[1]) for z in data["zero_cost_calls"])
        return Profile(records, scopes, unknown, zero, data["causal_rule"], data["peak_bytes"],
                       data["tensor_kind"], tuple((p[0], p[1]) for p in data["phase_peaks"]),
                       tuple((p[0], p[1]) for p in data["phase_wall"]))
    except (KeyError, IndexError, TypeError) as e:
        raise ValueError(f"{where}: malformed profile ({type(e).__name__}: {e})") from None


def save_profile(profile: Profile, path: str | os.PathLike, meta: dict[str, Any] | None = None) -> str:
    """Write ``profile`` as JSON (lossless: `load_profile` gives an equal Profile back)."""
    return write_atomic(path, json.dumps(profile_to_dict(profile, meta), separators=(",", ":")))


def read_json(path: str | os.PathLike, what: str, error: type[Exception] = ValueError) -> Any:
    """Parse a JSON file; an unreadable, truncated or corrupt file raises ``error`` naming it."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise error(f"{path}: cannot read the {what} ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise error(f"{path}: not a complete JSON {what} (truncated or corrupt: {e.msg} at "
                    f"line {e.lineno} column {e.colno})") from None


def load_profile(path: str | os.PathLike) -> Profile:
    """Read a profile written by `save_profile`; a truncated file or a newer schema raises ValueError."""
    return profile_from_dict(read_json(path, "profile"), os.fspath(path))


# --- CSV -------------------------------------------------------------------------------------
_TOTAL_COLUMNS = ("calls", "add", "mult", "div", "sqrt", "exp", "cmp", "other", "flops", "macs",
                  "bytes_read", "bytes_written")


def operators_csv(profile: Profile) -> str:
    """One row per aten op: state, calls and every count (raw units)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(("op", "state", *_TOTAL_COLUMNS))
    for op, row in profile.by_operator().items():
        w.writerow((op, row.state, *(getattr(row.totals, c) for c in _TOTAL_COLUMNS)))
    return out.getvalue()


def modules_csv(profile: Profile) -> str:
    """One row per module scope: tensor quantities, self and inclusive counts (raw units)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    quantities = ("params", "params_bytes", "buffers", "buffers_bytes", "act", "act_bytes", "cache", "peak_bytes")
    w.writerow(("module", "type", "parent", "calls", *quantities,
                *(f"self_{c}" for c in _TOTAL_COLUMNS[1:]), *(f"inclusive_{c}" for c in _TOTAL_COLUMNS[1:])))
    for name, row in profile.by_module().items():
        s = row.scope
        w.writerow((name, s.module_type, "" if s.parent is None else s.parent, s.calls,
                    *(getattr(s, q) for q in quantities),
                    *(getattr(row.self_totals, c) for c in _TOTAL_COLUMNS[1:]),
                    *(getattr(row.inclusive, c) for c in _TOTAL_COLUMNS[1:])))
    return out.getvalue()

"""Rows of a count for pandas and notebooks: `Profile` and `GenerationProfile` as DataFrames
and as HTML tables.

Rows hold raw units (element operations, bytes, elements, seconds); only the HTML view scales
them. ``by`` picks the row: "operator" (one per aten op, zero-cost and unknown ops included),
"module" (one per module scope: tensor quantities, self_* and inclusive_* counts) or "record"
(one per counted op call). pandas is optional (``pip install 'dispatchprof[pandas]'``).
"""

from __future__ import annotations

from html import escape
from typing import Any, Iterable, Sequence

from dispatchprof import units
from dispatchprof.results.records import COUNT_FIELDS, TOTAL_COLUMNS

# Profile and GenerationProfile are typed Any here: their modules import this one.

ROWS = ("operator", "module", "record")
PANDAS_MISSING = "to_dataframe() needs pandas, which is not installed: pip install 'dispatchprof[pandas]'"
#: Tensor quantities of a module row (docs/counting.md).
QUANTITIES = ("params", "params_bytes", "buffers", "buffers_bytes", "act", "act_bytes", "cache", "peak_bytes")
#: Record row columns that describe the call (the counts follow).
RECORD_KEYS = ("index", "op", "scope", "phase", "dtype", "causal")


def import_pandas() -> Any:
    """The pandas module, or an ImportError of one line saying how to install it."""
    try:
        import pandas
    except ImportError:
        raise ImportError(PANDAS_MISSING) from None
    return pandas


def check_by(by: str) -> None:
    if by not in ROWS:
        raise ValueError(f"to_dataframe(by=...) must be one of {ROWS}, got {by!r}")


def dataframe(rows: list[dict[str, Any]], columns: Sequence[str]) -> Any:
    """A pandas DataFrame of ``rows`` with ``columns`` (also when there are no rows)."""
    return import_pandas().DataFrame(rows, columns=list(columns))


def profile_rows(profile: Any, by: str = "operator", phase: str | None = None) -> tuple[list[dict], list[str]]:
    """(rows, columns) of ``profile``, one row per operator, module or op record."""
    check_by(by)
    if by == "operator":
        cols = ["op", "state", *TOTAL_COLUMNS]
        return [{"op": op, "state": r.state, **{c: getattr(r.totals, c) for c in TOTAL_COLUMNS}}
                for op, r in profile.by_operator(phase).items()], cols
    if by == "module":
        counts = TOTAL_COLUMNS[1:]
        cols = ["module", "type", "parent", "depth", "calls", *QUANTITIES, "latency_s", "op_calls",
                *(f"self_{c}" for c in counts), *(f"inclusive_{c}" for c in counts)]
        rows = []
        for name, r in profile.by_module(phase).items():
            s = r.scope
            rows.append({"module": name, "type": s.module_type, "parent": s.parent, "depth": s.depth,
                         "calls": s.calls, **{q: getattr(s, q) for q in QUANTITIES}, "latency_s": s.latency_s,
                         "op_calls": r.inclusive.calls,
                         **{f"self_{c}": getattr(r.self_totals, c) for c in counts},
                         **{f"inclusive_{c}": getattr(r.inclusive, c) for c in counts}})
        return rows, cols
    return [record_row(i, r) for i, r in enumerate(profile.records)
            if phase is None or r.phase == phase], [*RECORD_KEYS, *COUNT_FIELDS, "flops"]


def record_row(index: int, r: Any) -> dict[str, Any]:
    """One op record as a row: what ran, where, and its counts."""
    row = {"index": index, "op": r.op, "scope": r.scope, "phase": r.phase, "dtype": r.dtype, "causal": r.causal}
    row.update({f: getattr(r.cost, f) or 0 for f in COUNT_FIELDS})
    row["flops"] = row["add"] + row["mult"]
    return row


def profile_frame(profile: Any, by: str = "operator", phase: str | None = None) -> Any:
    """``profile`` as a pandas DataFrame (see the module docstring)."""
    return dataframe(*profile_rows(profile, by, phase))


# --- HTML -------------------------------------------------------------------------------------
def html_table(header: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = "") -> str:
    """A plain HTML table; every cell escaped."""
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def profile_html(profile: Any, top: int = 5) -> str:
    """Totals, and the ``top`` modules by the operations run directly in them."""
    t = profile.total()
    totals = html_table(("ops counted", "FLOPs (ADD+MULT)", "MACs", "bytes moved", "peak memory", "unknown ops"),
                        [(t.calls, units.si(t.flops), units.si(t.macs), units.nbytes(t.bytes),
                          units.nbytes(profile.peak_bytes), len(profile.unknown))],
                        caption="dispatchprof count")
    rows = sorted(profile.by_module().items(), key=lambda kv: -kv[1].self_totals.ops)[:top]
    modules = html_table(("module", "type", "FLOPs", "MACs", "bytes"),
                         [(name or "(root)", r.scope.module_type, units.si(r.self_totals.flops),
                           units.si(r.self_totals.macs), units.nbytes(r.self_totals.bytes)) for name, r in rows],
                         caption=f"top {top} modules (own ops)")
    return totals + modules


def generation_html(g: Any, top: int = 5) -> str:
    """Prefill and decode counts, each scenario's timings, and the top modules of the decode."""
    counts = html_table(("phase", "tokens", "FLOPs (ADD+MULT)", "MACs", "bytes moved"),
                        [(phase, g.tokens[phase], units.si(t.flops), units.si(t.macs), units.nbytes(t.bytes))
                         for phase, t in (("prefill", g.prefill_totals), ("decode", g.decode_totals))],
                        caption=f"generation: batch {g.batch}, prompt {g.prompt_len}, {g.new_tokens} new tokens")
    devices = html_table(("device", "TTFT", "TPOT (mean)", "tokens/s", "energy/token"),
                         [(d.name, units.seconds(d.ttft_s), units.seconds(d.tpot_mean_s), f"{d.tokens_per_s:.1f}",
                           units.joules(d.energy_per_token_j)) for d in g.devices.values()],
                         caption="simulated")
    rows = sorted(g.decode_by_scope.items(), key=lambda kv: -kv[1].ops)[:top]
    modules = html_table(("module", "FLOPs", "MACs", "bytes"),
                         [(name or "(root)", units.si(t.flops), units.si(t.macs), units.nbytes(t.bytes))
                          for name, t in rows], caption=f"top {top} modules of the decode")
    return counts + (devices if g.devices else "") + modules

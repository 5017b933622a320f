"""Console tables: rows first, then tabulate renders them. Nothing here prints.

- `summary`: counts, tensor quantities, traffic and, per simulated device, time, energy, power;
- `module_tree`: the module tree with chosen columns, folded repeated blocks, percentages;
- `operator_table`: per aten op, in the style of torch.profiler's ``key_averages().table``;
- `top_modules`: the top-k module types per depth (as DeepSpeed's aggregated profile prints);
- `module_types`: totals per module class;
Every function takes ``fmt``: a tabulate format name ("simple", "github", "grid", ...) or
"markdown".
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Iterable, Mapping, Sequence

from dispatchprof import units
from dispatchprof.report.render import render, wrap
from dispatchprof.report.runtimes import runtime_line
from dispatchprof.report.simbytes import moved_bytes, scope_rows
from dispatchprof.report.unknowns import total_energy_cell
from dispatchprof.results.profile import Profile
from dispatchprof.results.records import Totals, sum_records
from dispatchprof.results.tree import Node, build_tree, walk
from dispatchprof.sim.simulate import Simulation
from op_formulas.cost import CATEGORIES

# --- summary ----------------------------------------------------------------------------------
def summary(profile: Profile, simulations: Iterable[Simulation] = (), *, fmt: str = "simple",
            tokens: Mapping[str, int] | None = None) -> str:
    """Counts, tensor quantities and traffic, then one row per simulated device and the runtime
    each was simulated under.
    ``tokens`` (phase -> tokens produced) adds tokens/s for those phases."""
    t = profile.total()
    root = next(s for s in profile.scopes if s.name == "") if profile.scopes else None
    rows = [[c.upper(), units.si(getattr(t, c))] for c in CATEGORIES]
    rows += [["FLOPs (ADD+MULT)", units.si(t.flops)], ["MACs", units.si(t.macs)]]
    if root is not None:
        rows += [["PARAMS", f"{units.si(root.params)} ({units.nbytes(root.params_bytes)})"],
                 ["BUFFERS", f"{units.si(root.buffers)} ({units.nbytes(root.buffers_bytes)})"],
                 ["ACT", units.si(root.act)], ["CACHE", units.si(root.cache)]]
    rows += [["PEAK", units.nbytes(profile.peak_bytes)],
             ["bytes read / written", f"{units.nbytes(t.bytes_read)} / {units.nbytes(t.bytes_written)}"],
             ["arithmetic intensity", f"{t.intensity:.2f} OPS/B"]]
    text = render(rows, ["metric", "value"], fmt)
    sims = list(simulations)
    if sims:
        text += "\n\n" + render([_device_row(s, tokens) for s in sims],
                                ["device", "time", "energy", "avg power", "compute-bound", "memory-bound",
                                 "tokens/s", "fits"], fmt)
        text += "\n" + wrap(runtime_line((s.name, s.runtime.runtime) for s in sims))
    return text


def simulation_line(sim: Simulation) -> str:
    """'time, energy, average power' of ``sim``'s totals (the counter's text), with UNKNOWN where the
    placement's profiles could not source an energy figure (dispatchprof.report.unknowns)."""
    return ", ".join([units.seconds(sim.total.time_s), *_energy_cells(sim)])


def _energy_cells(sim: Simulation) -> tuple[str, str]:
    """(energy, average power) cells of ``sim``'s totals (dispatchprof.report.unknowns)."""
    tot, devices = sim.total, sim.placement.devices
    dynamic_w = tot.dynamic_j / tot.time_s if tot.time_s else 0.0
    return (total_energy_cell(tot.energy_j, tot.dynamic_j, devices),
            total_energy_cell(tot.power_w, dynamic_w, devices, units.watts))


def _device_row(sim: Simulation, tokens: Mapping[str, int] | None) -> list[str]:
    tot = sim.total
    rate = "-"
    if tokens:
        phases = sim.by_phase()
        parts = [f"{p} {n / phases[p].time_s:,.1f}" for p, n in tokens.items() if p in phases and phases[p].time_s]
        rate = ", ".join(parts) or "-"
    fits = {True: "yes", False: "NO", None: "unknown"}[sim.fits()]
    return [sim.name, units.seconds(tot.time_s), *_energy_cells(sim),
            units.percent(tot.compute_bound_s, tot.time_s), units.percent(tot.memory_bound_s, tot.time_s),
            rate, fits]


# --- the module tree ----------------------------------------------------------------------------
Column = Callable[[Node, Node], str]     # (node, root) -> cell


def _count(attr: str) -> Column:
    return lambda n, root: units.si(getattr(n.inclusive, attr))


def _share(attr: str) -> Column:
    return lambda n, root: units.percent(getattr(n.inclusive, attr), getattr(root.inclusive, attr))


def _sim(attr: str, fmt: Callable[[float], str]) -> Column:
    return lambda n, root: "-" if n.sim is None else fmt(getattr(n.sim, attr))


COLUMNS: dict[str, tuple[str, Column]] = {
    "type": ("type", lambda n, r: n.module_type),
    "calls": ("calls", lambda n, r: str(n.calls)),
    "params": ("params", lambda n, r: units.si(n.params)),
    "%params": ("% params", lambda n, r: units.percent(n.params, r.params)),
    **{c: (c.upper() if len(c) <= 5 else c, _count(c))
       for c in CATEGORIES},
    "flops": ("FLOPs", _count("flops")),
    "%flops": ("% FLOPs", _share("flops")),
    "macs": ("MACs", _count("macs")),
    "%macs": ("% MACs", _share("macs")),
    "ops": ("OPS", _count("ops")),
    "bytes": ("bytes", lambda n, r: units.nbytes(n.inclusive.bytes)),
    "sim_bytes": ("bytes (sim)", lambda n, r: "-" if n.sim is None else units.nbytes(n.sim.traffic_bytes)),
    "act": ("ACT", lambda n, r: units.si(n.act)),
    "cache": ("CACHE", lambda n, r: units.si(n.cache)),
    "peak": ("PEAK", lambda n, r: units.nbytes(n.peak_bytes)),
    "latency": ("measured latency", lambda n, r: units.seconds(n.latency_s)),
    "achieved": ("achieved FLOP/s", lambda n, r: units.si(n.inclusive.flops / n.latency_s, "FLOP/s")
                 if n.latency_s else "-"),
    "time": ("time", _sim("time_s", units.seconds)),
    "%time": ("% time", lambda n, r: "-" if n.sim is None or r.sim is None
              else units.percent(n.sim.time_s, r.sim.time_s)),
    "energy": ("energy", _sim("energy_j", units.joules)),
}
DEFAULT_COLUMNS = ("type", "calls", "params", "flops", "%flops", "macs", "bytes")


def module_tree(profile: Profile, sim: Simulation | None = None, *, depth: int = -1,
                columns: Sequence[str] | None = None, fold: bool = True, fmt: str = "simple",
                phase: str | None = None) -> str:
    """The module tree down to ``depth`` (-1: all) with ``columns`` (keys of COLUMNS; by default
    DEFAULT_COLUMNS, plus time and % time with a simulation); counts of one ``phase`` if given
    (measured latency is always the forward's). ``sim_bytes`` is what the simulation moved, under its
    dtypes and runtime (dispatchprof.report.simbytes); ``bytes`` is as counted."""
    if columns is None:
        columns = DEFAULT_COLUMNS + (("time", "%time") if sim is not None else ())
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise ValueError(f"unknown column {unknown[0]!r}; allowed: {', '.join(COLUMNS)}")
    if not isinstance(depth, int) or depth < -1:
        raise ValueError(f"depth must be -1 (all) or a depth >= 0, got {depth!r}")
    root = build_tree(profile, scope_rows(sim) if sim is not None else None, fold, phase)
    cells = dict(COLUMNS)
    if sim is not None:                 # energy: no silent zero for a figure the profile could not source
        cells["energy"] = ("energy", _energy_column(sim))
    rows = [[label, *(cells[c][1](node, root) for c in columns)] for label, node, _ in walk(root, depth)]
    return render(rows, ["module", *(cells[c][0] for c in columns)], fmt)


def _energy_column(sim: Simulation) -> Column:
    """The energy cell of a module of ``sim`` (dispatchprof.report.unknowns: UNKNOWN, or the dynamic part
    and ``+ static UNKNOWN``, where the placement's profiles could not source a figure)."""
    devices = sim.placement.devices
    return lambda n, root: "-" if n.sim is None else total_energy_cell(n.sim.energy_j, n.sim.dynamic_j, devices)


# --- operators ----------------------------------------------------------------------------------
_SORT_KEYS = ("flops", "macs", "ops", "bytes", "calls", "time", *CATEGORIES)


def operator_table(profile: Profile, sim: Simulation | None = None, *, sort_by: str = "flops",
                   row_limit: int = -1, group_by_input_shape: bool = False, fmt: str = "simple",
                   phase: str | None = None, simulated_bytes: bool = False) -> str:
    """Per aten op (and input shapes), like torch.profiler's key_averages().table(); the records of
    one ``phase`` if given (``sim`` simulates the whole profile). ``simulated_bytes=True`` (with a
    ``sim``) shows the bytes the simulation moved, under its dtypes and runtime, in place of the
    bytes as counted (column "bytes (sim)"; dispatchprof.report.simbytes)."""
    if sort_by not in _SORT_KEYS:
        raise ValueError(f"unknown sort_by {sort_by!r}; allowed: {', '.join(_SORT_KEYS)}")
    if sort_by == "time" and sim is None:
        raise ValueError("sort_by='time' needs a simulation (OpCounter(devices=...))")
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(profile.records):
        if phase is not None and r.phase != phase:
            continue
        groups[(r.op, r.shapes) if group_by_input_shape else (r.op,)].append(i)
    timings = sim.ops if sim is not None else None
    rows = []
    total = profile.total(phase)
    for key, idx in groups.items():
        t = _sum_totals(profile, idx)
        time = sum(timings[i].time_s for i in idx) if timings is not None else None
        moved = moved_bytes(sim, idx) if sim is not None and simulated_bytes else t.bytes
        rows.append((key, t, time, moved))
    rows.sort(key=lambda row: -(row[2] if sort_by == "time" else getattr(row[1], sort_by)))
    if row_limit >= 0:
        rows = rows[:row_limit]
    headers = ["op", *(["input shapes"] if group_by_input_shape else []), "calls", "FLOPs", "% FLOPs", "MACs",
               "bytes (sim)" if sim is not None and simulated_bytes else "bytes", *(["time"] if sim is not None else [])]
    body = [[key[0], *([_shapes(key[1])] if group_by_input_shape else []), str(t.calls), units.si(t.flops),
             units.percent(t.flops, total.flops), units.si(t.macs), units.nbytes(moved),
             *([units.seconds(time)] if sim is not None else [])] for key, t, time, moved in rows]
    return render(body, headers, fmt)


def _sum_totals(profile: Profile, idx: list[int]) -> Totals:
    return sum_records(profile.records[i] for i in idx)


def _shapes(shapes: tuple) -> str:
    return ", ".join("[" + ", ".join(map(str, s)) + "]" for s in shapes)


# --- aggregates ---------------------------------------------------------------------------------
_TOP_METRICS = ("params", "flops", "macs", "bytes", "latency", "time")


def top_modules(profile: Profile, sim: Simulation | None = None, *, k: int = 1,
                metrics: Sequence[str] = ("params", "macs", "flops"), fmt: str = "simple") -> str:
    """Top ``k`` module types per depth for each metric, summed over the modules of that type at
    that depth (DeepSpeed's aggregated profile)."""
    for m in metrics:
        if m not in _TOP_METRICS:
            raise ValueError(f"unknown metric {m!r}; allowed: {', '.join(_TOP_METRICS)}")
        if m == "time" and sim is None:
            raise ValueError("metric 'time' needs a simulation (OpCounter(devices=...))")
    rows_by_module = profile.by_module()
    sim_rows = sim.by_module() if sim is not None else {}
    per_depth: dict[int, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
    for name, row in rows_by_module.items():
        value = {"params": row.scope.params, "flops": row.inclusive.flops, "macs": row.inclusive.macs,
                 "bytes": row.inclusive.bytes, "latency": row.scope.latency_s,
                 "time": sim_rows[name].time_s if name in sim_rows else 0.0}
        for m in metrics:
            per_depth[row.scope.depth][m][row.scope.module_type] += value[m]
    fmt_value = {"params": units.si, "flops": units.si, "macs": units.si, "bytes": units.nbytes,
                 "latency": units.seconds, "time": units.seconds}
    rows = []
    for depth in sorted(per_depth):
        cells = []
        for m in metrics:
            best = sorted(per_depth[depth][m].items(), key=lambda kv: -kv[1])[:k]
            cells.append(", ".join(f"{t}: {fmt_value[m](v)}" for t, v in best))
        rows.append([str(depth), *cells])
    return render(rows, ["depth", *metrics], fmt)


def module_types(profile: Profile, *, fmt: str = "simple") -> str:
    """Totals per module class: instances, calls, params and inclusive counts (a module nested in
    one of its own type is counted once, in the outer one)."""
    rows_by_module = profile.by_module()
    types = {name: row.scope.module_type for name, row in rows_by_module.items()}
    agg: dict[str, list] = {}
    total = profile.total()
    for name, row in rows_by_module.items():
        s = row.scope
        if _inside_same_type(name, s.module_type, types, rows_by_module):
            continue
        a = agg.setdefault(s.module_type, [0, 0, 0, Totals()])
        a[0] += 1
        a[1] += s.calls
        a[2] += s.params
        a[3] = a[3] + row.inclusive
    rows = [[t, str(n), str(calls), units.si(params), units.si(tot.flops), units.percent(tot.flops, total.flops),
             units.si(tot.macs), units.nbytes(tot.bytes)]
            for t, (n, calls, params, tot) in sorted(agg.items(), key=lambda kv: -kv[1][3].flops)]
    return render(rows, ["module type", "instances", "calls", "params", "FLOPs", "% FLOPs", "MACs", "bytes"], fmt)


def _inside_same_type(name: str, module_type: str, types: Mapping[str, str], rows: Mapping) -> bool:
    parent = rows[name].scope.parent
    while parent is not None and parent in rows and parent != name:
        if types[parent] == module_type:
            return True
        name, parent = parent, rows[parent].scope.parent
    return False

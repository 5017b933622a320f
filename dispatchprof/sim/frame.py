"""A `Simulation` as rows for pandas and notebooks: the counts of dispatchprof.results.frame
plus simulated time (s) and energy (J), one row per operator, module scope or op record."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from dispatchprof import units
from dispatchprof.results.frame import RECORD_KEYS, check_by, dataframe, html_table, record_row
from dispatchprof.results.profile import roll_up
from dispatchprof.results.records import COUNT_FIELDS, TOTAL_COLUMNS, Totals, sum_records
from dispatchprof.sim.timing import OpTiming

# A Simulation is typed Any here: dispatchprof.sim.simulate imports this module.

#: Simulated columns of every row (seconds, joules).
SIM_COLUMNS = ("time_s", "energy_j", "compute_bound_s", "memory_bound_s", "transfer_s", "overhead_s")
#: Extra columns of a record row: the device and the parts of its time.
TIMING_COLUMNS = ("device", "t_compute", "t_memory", "t_transfer", "t_overhead", "t_comm", "bound")
__all__ = ["SIM_COLUMNS", "simulation_frame", "simulation_html", "simulation_rows"]


def _sim_values(timings: list[OpTiming]) -> dict[str, float]:
    time = energy = cb = mb = tr = ov = 0.0
    for t in timings:
        time += t.time_s
        energy += t.energy_j
        cb += t.busy_s if t.bound == "compute" else 0.0
        mb += t.busy_s if t.bound == "memory" else 0.0
        tr += t.t_transfer
        ov += t.t_overhead
    return dict(zip(SIM_COLUMNS, (time, energy, cb, mb, tr, ov)))


def simulation_rows(sim: Any, by: str = "operator", phase: str | None = None) -> tuple[list[dict], list[str]]:
    """(rows, columns): counts (raw units) and simulated seconds and joules of ``sim``."""
    check_by(by)
    timings = [t for t in sim.ops if phase is None or sim.records[t.record].phase == phase]
    if by == "record":
        rows = []
        for t in timings:
            row = record_row(t.record, sim.records[t.record])
            row.update({c: getattr(t, c) for c in TIMING_COLUMNS})
            row.update(_sim_values([t]))
            rows.append(row)
        return rows, [*RECORD_KEYS, *COUNT_FIELDS, "flops", *TIMING_COLUMNS, *SIM_COLUMNS]
    key = "op" if by == "operator" else "scope"
    groups: dict[str, list[OpTiming]] = defaultdict(list)
    for t in timings:
        groups[getattr(sim.records[t.record], key)].append(t)
    counts = {k: sum_records(sim.records[t.record] for t in v) for k, v in groups.items()}
    if by == "operator":
        rows = [{"op": k, **_totals(counts[k]), **_sim_values(v)} for k, v in groups.items()]
        rows.sort(key=lambda r: -r["time_s"])
        return rows, ["op", *TOTAL_COLUMNS, *SIM_COLUMNS]
    return _module_rows(sim, groups, counts)


def _totals(t: Totals) -> dict[str, Any]:
    return {c: getattr(t, c) for c in TOTAL_COLUMNS}


def _module_rows(sim: Any, groups: dict, counts: dict[str, Totals]) -> tuple[list[dict], list[str]]:
    """Inclusive counts, time and energy per module scope (its subtree), in the scopes' order."""
    own_counts = {name: counts.get(name, Totals()) for name in sim.parents}
    own_sim = {name: _SimSum(_sim_values(groups.get(name, []))) for name in sim.parents}
    inc_counts, inc_sim = roll_up(own_counts, sim.parents), roll_up(own_sim, sim.parents)
    rows = [{"module": name, "parent": sim.parents[name], **_totals(inc_counts[name]), **inc_sim[name].values}
            for name in sim.parents]
    return rows, ["module", "parent", *TOTAL_COLUMNS, *SIM_COLUMNS]


class _SimSum:
    """Simulated values that add up with ``+`` (for roll_up)."""

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def __add__(self, other: _SimSum) -> _SimSum:
        return _SimSum({k: v + other.values[k] for k, v in self.values.items()})


def simulation_frame(sim: Any, by: str = "operator", phase: str | None = None) -> Any:
    """``sim`` as a pandas DataFrame."""
    return dataframe(*simulation_rows(sim, by, phase))


def simulation_html(sim: Any, top: int = 5) -> str:
    """Totals (time, energy, power, bound shares) and the ``top`` modules by their own time."""
    t = sim.total
    totals = html_table(("device", "time", "energy", "power", "compute-bound", "memory-bound", "fits"),
                        [(", ".join(sim.devices), units.seconds(t.time_s), units.joules(t.energy_j),
                          units.watts(t.power_w), units.percent(t.compute_bound_s, t.time_s),
                          units.percent(t.memory_bound_s, t.time_s), {True: "yes", False: "no", None: "?"}[sim.fits()])],
                        caption=f"simulation {sim.name}")
    rows, _ = simulation_rows(sim, "record")
    own: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        own[r["scope"]][0] += r["time_s"]
        own[r["scope"]][1] += r["energy_j"]
    best = sorted(own.items(), key=lambda kv: -kv[1][0])[:top]
    modules = html_table(("module", "time", "energy", "share of time"),
                         [(name or "(root)", units.seconds(v[0]), units.joules(v[1]), units.percent(v[0], t.time_s))
                          for name, v in best], caption=f"top {top} modules (own ops)")
    return totals + modules

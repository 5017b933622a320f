"""A `Simulation` as rows for pandas and notebooks: the counts of dispatchprof.results.frame
plus simulated time (s) and energy (J), one row per operator, module scope or op record.

Energy columns: ``energy_j`` = ``dynamic_energy_j`` + ``static_energy_j`` (static = the device's
static power x the op's time). A part the placement's profiles could not source is NaN, never the 0
the simulation stands in with, and so is ``energy_j`` when either part is
(dispatchprof.sim.energy_known); the HTML view writes UNKNOWN there."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from dispatchprof import units
from dispatchprof.results.frame import RECORD_KEYS, check_by, dataframe, html_table, record_row
from dispatchprof.results.profile import roll_up
from dispatchprof.results.records import COUNT_FIELDS, TOTAL_COLUMNS, Totals, sum_records
from dispatchprof.sim.energy_known import KnownEnergy, known_energy, or_nan, total_text
from dispatchprof.sim.timing import OpTiming

# A Simulation is typed Any here: dispatchprof.sim.simulate imports this module.

#: Simulated columns of every row (seconds, joules; an energy a profile could not source is NaN).
SIM_COLUMNS = ("time_s", "energy_j", "dynamic_energy_j", "static_energy_j", "compute_bound_s", "memory_bound_s",
               "transfer_s", "overhead_s")
#: Extra columns of a record row: the device and the parts of its time.
TIMING_COLUMNS = ("device", "t_compute", "t_memory", "t_transfer", "t_overhead", "t_comm", "bound")
__all__ = ["SIM_COLUMNS", "simulation_frame", "simulation_html", "simulation_rows"]


def _sim_values(timings: list[OpTiming]) -> dict[str, float]:
    """The SIM_COLUMNS of ``timings`` summed, every energy as simulated (unknown parts as 0)."""
    time = energy = dynamic = static = cb = mb = tr = ov = 0.0
    for t in timings:
        time += t.time_s
        energy += t.energy_j
        dynamic += t.dynamic_j
        static += t.static_power_w * t.time_s
        cb += t.busy_s if t.bound == "compute" else 0.0
        mb += t.busy_s if t.bound == "memory" else 0.0
        tr += t.t_transfer
        ov += t.t_overhead
    return dict(zip(SIM_COLUMNS, (time, energy, dynamic, static, cb, mb, tr, ov)))


def _marked(values: dict[str, float], known: KnownEnergy) -> dict[str, float]:
    """``values`` with the energies the profiles could not source as NaN."""
    return {**values, "energy_j": or_nan(values["energy_j"], known.total),
            "dynamic_energy_j": or_nan(values["dynamic_energy_j"], known.dynamic),
            "static_energy_j": or_nan(values["static_energy_j"], known.static)}


def simulation_rows(sim: Any, by: str = "operator", phase: str | None = None) -> tuple[list[dict], list[str]]:
    """(rows, columns): counts (raw units) and simulated seconds and joules of ``sim``."""
    check_by(by)
    timings = [t for t in sim.ops if phase is None or sim.records[t.record].phase == phase]
    known = known_energy(sim.placement.devices)
    if by == "record":
        rows = []
        for t in timings:
            row = record_row(t.record, sim.records[t.record])
            row.update({c: getattr(t, c) for c in TIMING_COLUMNS})
            row.update(_marked(_sim_values([t]), known))
            rows.append(row)
        return rows, [*RECORD_KEYS, *COUNT_FIELDS, "flops", *TIMING_COLUMNS, *SIM_COLUMNS]
    key = "op" if by == "operator" else "scope"
    groups: dict[str, list[OpTiming]] = defaultdict(list)
    for t in timings:
        groups[getattr(sim.records[t.record], key)].append(t)
    counts = {k: sum_records(sim.records[t.record] for t in v) for k, v in groups.items()}
    if by == "operator":
        rows = [{"op": k, **_totals(counts[k]), **_marked(_sim_values(v), known)} for k, v in groups.items()]
        rows.sort(key=lambda r: -r["time_s"])
        return rows, ["op", *TOTAL_COLUMNS, *SIM_COLUMNS]
    return _module_rows(sim, groups, counts, known)


def _totals(t: Totals) -> dict[str, Any]:
    return {c: getattr(t, c) for c in TOTAL_COLUMNS}


def _module_rows(sim: Any, groups: dict, counts: dict[str, Totals], known: KnownEnergy) -> tuple[list[dict], list[str]]:
    """Inclusive counts, time and energy per module scope (its subtree), in the scopes' order."""
    own_counts = {name: counts.get(name, Totals()) for name in sim.parents}
    own_sim = {name: _SimSum(_sim_values(groups.get(name, []))) for name in sim.parents}
    inc_counts, inc_sim = roll_up(own_counts, sim.parents), roll_up(own_sim, sim.parents)
    rows = [{"module": name, "parent": sim.parents[name], **_totals(inc_counts[name]),
             **_marked(inc_sim[name].values, known)}
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
    known = known_energy(sim.placement.devices)
    dynamic_w = t.dynamic_j / t.time_s if t.time_s else 0.0
    totals = html_table(("device", "time", "energy", "power", "compute-bound", "memory-bound", "fits"),
                        [(", ".join(sim.devices), units.seconds(t.time_s), total_text(t.energy_j, t.dynamic_j, known),
                          total_text(t.power_w, dynamic_w, known, units.watts), units.percent(t.compute_bound_s, t.time_s),
                          units.percent(t.memory_bound_s, t.time_s), {True: "yes", False: "no", None: "?"}[sim.fits()])],
                        caption=f"simulation {sim.name}")
    own: dict[str, list[OpTiming]] = defaultdict(list)
    for op in sim.ops:
        own[sim.records[op.record].scope].append(op)
    best = sorted(((name, _sim_values(ops)) for name, ops in own.items()), key=lambda kv: -kv[1]["time_s"])[:top]
    modules = html_table(("module", "time", "energy", "share of time"),
                         [(name or "(root)", units.seconds(v["time_s"]),
                           total_text(v["energy_j"], v["dynamic_energy_j"], known), units.percent(v["time_s"], t.time_s))
                          for name, v in best], caption=f"top {top} modules (own ops)")
    return totals + modules

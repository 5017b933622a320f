"""One row of a sweep: a (model, batch, prompt length, new tokens) shape simulated on one
device. Plain data in raw units; ``None`` where a figure does not apply (TTFT and TPOT of an
encoder, TPOT of a single new token, the capacity of a device without one).

Energy a device's profile cannot source (dispatchprof.sim.energy_known): ``energy_j`` and
``energy_per_token_j`` are the simulation's figures, in which an unknown figure counts 0;
``dynamic_energy_known`` and ``static_energy_known`` say which parts are real. `energy_known` is
True only when both are; where it is False every output shows no number for the total: the JSON
form (`sweep_to_dict`) writes null, the CSV an empty cell, the table UNKNOWN
(dispatchprof.report.sweep). Where only the static power is unknown, the total's known part is
kept in ``dynamic_energy_per_token_j`` (the simulated J/token, whose static part counted 0); it is
None on every other row."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

SCHEMA = "dispatchprof.sweep"
VERSION = 1


@dataclass(frozen=True)
class SweepRow:
    model: str
    device: str
    kind: str                          # "decoder" (a generation) or "encoder" / "encoder-decoder" (a forward)
    dtype: str
    batch: int
    prompt_len: int
    new_tokens: int
    time_s: float                      # the whole generation (or forward)
    energy_j: float
    tokens_per_s: float                # generated tokens (decoder) or processed tokens (forward) per second
    energy_per_token_j: float
    ttft_s: float | None
    tpot_mean_s: float | None
    required_bytes: int | None         # weights + KV cache + peak activations (None for a forward)
    capacity_bytes: int | None
    fits: bool | None                  # None: the device has no capacity figure
    pareto: bool = False               # on the device's Pareto front (tokens/s up, J/token down)
    runtime: str = "eager"             # the runtime simulated (eager, compiled, serving)
    dynamic_energy_known: bool = True  # the profile sources its energy per operation and per bit
    static_energy_known: bool = True   # the profile sources its static power
    dynamic_energy_per_token_j: float | None = None   # only where the static power alone is unknown

    @property
    def energy_known(self) -> bool:
        """Whether ``energy_j`` and ``energy_per_token_j`` are real totals (both parts known)."""
        return self.dynamic_energy_known and self.static_energy_known


COLUMNS = tuple(f.name for f in fields(SweepRow))
#: The columns that hold a total energy: no number where `SweepRow.energy_known` is False.
ENERGY_COLUMNS = ("energy_j", "energy_per_token_j")


def row_values(row: SweepRow) -> dict[str, Any]:
    """``row`` as a dict of its COLUMNS, the ENERGY_COLUMNS None where its energy is not known."""
    values = asdict(row)
    if not row.energy_known:
        values.update(dict.fromkeys(ENERGY_COLUMNS))
    return values


def sweep_to_dict(rows: list[SweepRow]) -> dict[str, Any]:
    """The JSON form: ``{"schema": "dispatchprof.sweep", "version": 1, "rows": [...]}``; a total
    energy a profile cannot source is null (`row_values`)."""
    return {"schema": SCHEMA, "version": VERSION, "columns": list(COLUMNS), "rows": [row_values(r) for r in rows]}

"""One row of a sweep: a (model, batch, prompt length, new tokens) shape simulated on one
device. Plain data in raw units; ``None`` where a figure does not apply (TTFT and TPOT of an
encoder, TPOT of a single new token, the capacity of a device without one)."""

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


COLUMNS = tuple(f.name for f in fields(SweepRow))


def sweep_to_dict(rows: list[SweepRow]) -> dict[str, Any]:
    """The JSON form: ``{"schema": "dispatchprof.sweep", "version": 1, "rows": [...]}``."""
    return {"schema": SCHEMA, "version": VERSION, "columns": list(COLUMNS), "rows": [asdict(r) for r in rows]}

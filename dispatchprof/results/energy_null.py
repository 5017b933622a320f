"""Energy a profile cannot source, in a generation's JSON: null, never the simulation's 0.

The simulation stands in with 0 for a figure a profile marks unknown (dispatchprof.sim.energy_known,
which decides what is known); in memory a `DeviceGeneration` keeps those stand-ins. Its JSON entry
(``asdict`` of it, under the generation's ``devices``) is written by `null_unknown` and read back by
`stand_ins`, its inverse:

- static power unknown: each phase's ``static_j`` is null;
- either part unknown: each phase's ``energy_j`` (dynamic + static) is null, and the phase gets
  ``dynamic_j``: its dynamic part, null when that is unknown too; the entry's
  ``energy_per_token_j`` is null, and the entry gets ``dynamic_energy_per_token_j``: the dynamic
  part per token where only the static power is unknown (the simulated figure, whose static part
  counted 0), else null.

Reading back, every unknown part is its stand-in 0 again: ``energy_j`` = ``dynamic_j`` + ``static_j``
with null read as 0, ``energy_per_token_j`` = ``dynamic_energy_per_token_j`` (0 when null: a figure no
report shows for such a device). The reports apply the rule again from the devices' profiles.
"""

from __future__ import annotations

from typing import Any

PHASES = ("prefill", "decode")
#: Keys `null_unknown` adds to an entry (and `stand_ins` removes).
PER_TOKEN_DYNAMIC = "dynamic_energy_per_token_j"
PHASE_DYNAMIC = "dynamic_j"


def null_unknown(entry: dict[str, Any], dynamic_known: bool, static_known: bool) -> dict[str, Any]:
    """``entry`` (a DeviceGeneration as a dict) with its unknown energies null (module docstring)."""
    if dynamic_known and static_known:
        return entry
    out = dict(entry)
    for phase in PHASES:
        p = dict(out[phase])
        p[PHASE_DYNAMIC] = p["energy_j"] - p["static_j"] if dynamic_known else None
        p["energy_j"] = None
        if not static_known:
            p["static_j"] = None
        out[phase] = p
    out[PER_TOKEN_DYNAMIC] = out["energy_per_token_j"] if dynamic_known else None
    out["energy_per_token_j"] = None
    return out


def stand_ins(entry: Any) -> Any:
    """The inverse of `null_unknown`: ``entry`` with each null energy its stand-in; anything that
    is not such an entry is returned as it is (the file's checks then name what is wrong)."""
    if not isinstance(entry, dict) or (PER_TOKEN_DYNAMIC not in entry and entry.get("energy_per_token_j") is not None):
        return entry
    out = dict(entry)
    per_token = out.pop(PER_TOKEN_DYNAMIC, None)
    if out.get("energy_per_token_j") is None:
        out["energy_per_token_j"] = per_token if per_token is not None else 0.0
    for phase in PHASES:
        p = out.get(phase)
        if isinstance(p, dict) and PHASE_DYNAMIC in p:
            p = dict(p)
            dynamic, static = _stand_in(p.pop(PHASE_DYNAMIC)), _stand_in(p.get("static_j"))
            p["static_j"] = static if static is not None else p.get("static_j")
            if p.get("energy_j") is None and dynamic is not None and static is not None:
                p["energy_j"] = dynamic + static
            out[phase] = p
    return out


def _stand_in(value: Any) -> float | None:
    """0.0 for null, the value for a number, None for anything else (left for the file's checks)."""
    if value is None:
        return 0.0
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

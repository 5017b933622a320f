"""An encoder's forward-pass JSON as the command line writes it: `forward_to_dict` with every energy
a device's profile cannot source null, never 0 (the rule: dispatchprof.sim.energy_known).

Per device: where either part of the energy is unknown, ``energy_j`` and ``energy_per_token_j``
are null; where only the static power is, its known part is kept beside them as
``dynamic_energy_j`` and ``dynamic_energy_per_token_j`` (the simulated figures, whose static part
counted 0). The file's reader (``dispatchprof report``) reads only its profile and totals."""

from __future__ import annotations

from typing import Any

from dispatchprof.llm.forward import ForwardProfile, forward_to_dict
from dispatchprof.sim.energy_known import known_energy

#: The per-device figures that hold a total energy.
TOTALS = ("energy_j", "energy_per_token_j")


def forward_json(f: ForwardProfile, model: str = "", dtype: str = "") -> dict[str, Any]:
    """`forward_to_dict` of ``f`` with each device's unknown energies null (module docstring)."""
    data = forward_to_dict(f, model, dtype)
    for name, sim in f.simulations.items():
        known = known_energy(sim.placement.devices)
        if known.total:
            continue
        entry = dict(data["devices"][name])
        if known.dynamic:
            entry.update({f"dynamic_{k}": entry[k] for k in TOTALS})
        entry.update(dict.fromkeys(TOTALS))
        data["devices"][name] = entry
    return data

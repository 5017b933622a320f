"""A generation's JSON as the command line writes it: `generation_to_dict` with every energy a
device's profile cannot source null, never 0 (the rule: dispatchprof.sim.energy_known; the form:
dispatchprof.results.energy_null, whose `stand_ins` the reader applies)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from dispatchprof.report.generation import scenario_devices
from dispatchprof.results.energy_null import null_unknown
from dispatchprof.results.generation import GenerationProfile, generation_to_dict
from dispatchprof.sim.device import Device
from dispatchprof.sim.energy_known import known_energy


def generation_json(g: GenerationProfile, model: str = "",
                    devices: Mapping[str, Sequence[Device]] | None = None) -> dict[str, Any]:
    """`generation_to_dict` of ``g`` with each scenario's unknown energies null; ``devices``:
    scenario name -> its devices (None: the bundled device of each scenario's name, as the
    reports look them up)."""
    data = generation_to_dict(g, model)
    for name, entry in data["devices"].items():
        known = known_energy(scenario_devices(name, devices))
        data["devices"][name] = null_unknown(entry, known.dynamic, known.static)
    return data

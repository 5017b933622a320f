"""Energy cells of reports: UNKNOWN where a device's profile could not source an energy figure.

The rule lives in `dispatchprof.sim.energy_known` (one place for every report, the dataframes
included): a device whose profile marks one of its dynamic-energy figures unknown
(`dispatchprof.sim.unknowns.ENERGY_FIELDS`: per operation, per bit of memory or host traffic) has
no known dynamic energy, so every cell that contains it reads UNKNOWN for that device, never the
0 J the simulation computes from the zeros it stands in with; a total whose static power is unknown
shows its dynamic part and says ``+ static UNKNOWN``. A placement over several devices is UNKNOWN
when any of them is.
"""

from __future__ import annotations

from typing import Callable, Sequence

from dispatchprof import units
from dispatchprof.sim.device import Device
from dispatchprof.sim.energy_known import UNKNOWN, KnownEnergy, known_energy, part_text, total_text

__all__ = ["UNKNOWN", "dynamic_energy_known", "energy_cell", "total_energy_cell", "known_energy", "KnownEnergy"]


def dynamic_energy_known(devices: Sequence[Device]) -> bool:
    """False when any of ``devices`` has an unknown dynamic-energy figure."""
    return known_energy(devices).dynamic


def energy_cell(value: float, devices: Sequence[Device], fmt: Callable[[float], str] = units.joules) -> str:
    """``fmt(value)`` (joules by default; watts for a power), or UNKNOWN when the dynamic energy of
    one of ``devices`` is unknown: for a dynamic figure, or a total shown beside its static part."""
    return part_text(value, dynamic_energy_known(devices), fmt)


def total_energy_cell(total: float, dynamic: float, devices: Sequence[Device],
                      fmt: Callable[[float], str] = units.joules) -> str:
    """A total that stands alone (no static column beside it): `total_text` over ``devices``."""
    return total_text(total, dynamic, known_energy(devices), fmt)

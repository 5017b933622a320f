"""Energy cells of reports: UNKNOWN where a device's profile could not source an energy figure.

Rule: a device whose profile marks one of its dynamic-energy figures unknown
(`dispatchprof.sim.unknowns.ENERGY_FIELDS`: per operation, per bit of memory or host traffic) has
no known dynamic energy, so every cell that contains it (dynamic, total, average power) reads
UNKNOWN for that device, never the 0 J the simulation computes from the zeros it stands in with.
A placement over several devices is UNKNOWN when any of them is. Static energy follows the static
power's own mark (`dispatchprof.sim.unknowns.unknown_figures`).
"""

from __future__ import annotations

from typing import Callable, Sequence

from dispatchprof import units
from dispatchprof.sim.device import Device
from dispatchprof.sim.unknowns import energy_unknown

UNKNOWN = "UNKNOWN"


def dynamic_energy_known(devices: Sequence[Device]) -> bool:
    """False when any of ``devices`` has an unknown dynamic-energy figure."""
    return not any(energy_unknown(d) for d in devices)


def energy_cell(value: float, devices: Sequence[Device], fmt: Callable[[float], str] = units.joules) -> str:
    """``fmt(value)`` (joules by default; watts for a power), or UNKNOWN when the dynamic energy of
    one of ``devices`` is unknown."""
    return fmt(value) if dynamic_energy_known(devices) else UNKNOWN

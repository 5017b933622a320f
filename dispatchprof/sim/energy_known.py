"""Which parts of a simulated energy are known: the one rule every report follows, so that no report
shows a silent zero.

A device's energy is dynamic (per operation, per bit of memory and host traffic) plus static
(static power x time). A part is unknown when the device's profile marks one of its figures
unknown (`dispatchprof.sim.unknowns`): the dynamic part when any of `ENERGY_FIELDS` is, the static
part when ``static_power_w`` is. The simulation stands in with 0 for an unknown figure; a report
never shows that 0:

- a figure over several devices (a placement) is unknown when it is for any of them;
- a total (energy = dynamic + static, average power = energy / time) is known only when both parts are;
- in text an unknown figure reads ``UNKNOWN`` (`UNKNOWN`); a total whose dynamic part is known and
  static part is not reads ``<dynamic> + static UNKNOWN`` (`total_text`), so the known part stays
  visible and the missing one is named;
- in numbers (dataframes, CSV) an unknown figure is NaN (`or_nan`); a CSV writes NaN as an empty
  cell, which pandas reads back as NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

from dispatchprof import units
from dispatchprof.sim.device import Device
from dispatchprof.sim.unknowns import energy_unknown, unknown_figures

#: How a report writes a figure the profile could not source.
UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class KnownEnergy:
    """Whether the dynamic and the static part of an energy are known (module docstring)."""

    dynamic: bool = True
    static: bool = True

    @property
    def total(self) -> bool:
        """A total (energy, average power) is known only when both its parts are."""
        return self.dynamic and self.static


def known_energy(devices: Iterable[Device]) -> KnownEnergy:
    """The parts known for a figure over ``devices`` (unknown when unknown for any of them)."""
    devices = tuple(devices)
    return KnownEnergy(dynamic=not any(energy_unknown(d) for d in devices),
                       static=not any("static_power_w" in unknown_figures(d) for d in devices))


def or_nan(value: float, known: bool) -> float:
    """``value`` where it is known, else NaN (numbers in dataframes and CSV)."""
    return value if known else math.nan


def part_text(value: float, known: bool, fmt: Callable[[float], str] = units.joules) -> str:
    """``fmt(value)`` (joules by default), or UNKNOWN."""
    return fmt(value) if known else UNKNOWN


def total_text(total: float, dynamic: float, known: KnownEnergy, fmt: Callable[[float], str] = units.joules) -> str:
    """A total's cell: ``fmt(total)`` when both parts are known; ``fmt(dynamic) + static UNKNOWN``
    when only the dynamic part is; UNKNOWN when the dynamic part is not (``fmt``: units.joules, or
    units.watts for an average power with ``total`` and ``dynamic`` divided by the time)."""
    if known.total:
        return fmt(total)
    return f"{fmt(dynamic)} + static {UNKNOWN}" if known.dynamic else UNKNOWN

"""Figures a profile could not source, so that no report shows a silent zero.

A like-for-like energy and time comparison needs, per device, its memory capacity, static power,
and the host's cost of launching its work. Where a profile's source does not publish one of these,
the profile says so in its ``sources`` with a text starting ``unknown`` (for example
``static_power_w: "unknown: not published by ..."``); the figure itself is simulated as 0 (or, for
capacity, not checked). `unknown_figures` lists them so every report can print "unknown" beside
the result instead of a zero.
"""

from __future__ import annotations

from dispatchprof.sim.device import Device

#: The figures of a device's dynamic energy (per operation, per bit moved), with how a report names
#: them: where one is unknown, no report shows a dynamic or total energy for the device.
ENERGY_FIELDS = {"pj_per_flop": "energy per operation", "memory_pj_per_bit": "memory energy per bit",
                 "host_to_device_pj_per_bit": "host -> device energy per bit",
                 "device_to_host_pj_per_bit": "device -> host energy per bit"}
#: The figures a comparison between devices needs, with how a report names them.
COMPARISON_FIELDS = {"memory_capacity_gb": "memory capacity", "static_power_w": "static power",
                     "launch_overhead_us": "launch overhead", "host_overhead_us": "host cost per op",
                     **ENERGY_FIELDS}
#: A source text starting with this (any case) marks the figure as not published.
UNKNOWN_MARK = "unknown"


def unknown_figures(device: Device) -> tuple[str, ...]:
    """The fields of `COMPARISON_FIELDS` whose source in ``device`` starts with ``unknown``."""
    return tuple(f for f in COMPARISON_FIELDS if device.source_of(f).strip().lower().startswith(UNKNOWN_MARK))


def energy_unknown(device: Device) -> bool:
    """True when one of ``device``'s `ENERGY_FIELDS` is unknown: its dynamic energy is not known."""
    return any(f in ENERGY_FIELDS for f in unknown_figures(device))


def unknown_note(device: Device) -> str:
    """One line naming the unknown figures of ``device`` and what the simulation did with them, or ``""``."""
    fields = unknown_figures(device)
    if not fields:
        return ""
    names = ", ".join(COMPARISON_FIELDS[f] for f in fields)
    capacity = " (capacity not checked)" if "memory_capacity_gb" in fields else ""
    return (f"{device.name}: UNKNOWN (not published by its sources): {names}; simulated as 0{capacity}, "
            f"so time and energy leave them out")

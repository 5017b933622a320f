"""Rendering raw numbers for people: SI prefixes, bytes, seconds, joules, percentages.

Results stay in raw units everywhere else; only reports call these.
"""

from __future__ import annotations

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K"))


def si(value: float, unit: str = "") -> str:
    """1234567 -> '1.23 M' (with ``unit`` appended); small values as they are."""
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value)} {unit}".rstrip()
    return f"{value:.2f} {unit}".rstrip()


def nbytes(value: float) -> str:
    """Decimal bytes: 1.5e9 -> '1.50 GB'."""
    return si(value, "B")


_SUBUNITS = ((1, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"))


def small(value: float, unit: str) -> str:
    """Values at or below one ``unit``: 0.00123 s -> '1.23 ms', down to pico."""
    if value == 0:
        return f"0 {unit}"
    for scale, prefix in _SUBUNITS:
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value / 1e-12:.2f} p{unit}"


def seconds(value: float) -> str:
    """0.00123 -> '1.23 ms'."""
    return small(value, "s")


def joules(value: float) -> str:
    """0.0123 -> '12.30 mJ'."""
    return small(value, "J")


def watts(value: float) -> str:
    return f"{value:.2f} W" if value >= 1 or value == 0 else f"{value * 1e3:.2f} mW"


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"

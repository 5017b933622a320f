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


def seconds(value: float) -> str:
    """0.00123 -> '1.23 ms'."""
    if value == 0:
        return "0 s"
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value / 1e-12:.2f} ps"


def joules(value: float) -> str:
    """0.0123 -> '12.30 mJ'."""
    if value == 0:
        return "0 J"
    for scale, unit in ((1, "J"), (1e-3, "mJ"), (1e-6, "uJ"), (1e-9, "nJ")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value / 1e-12:.2f} pJ"


def watts(value: float) -> str:
    return f"{value:.2f} W" if value >= 1 or value == 0 else f"{value * 1e3:.2f} mW"


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"
